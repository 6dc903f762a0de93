"""Kubernetes manifests of a profile's sweep: an Indexed Job per array of `specperf plan
--max-shard-hours H --arrays` (an array per TP size), each pod one shard, and a merge Job.

    python examples/kubernetes/render.py PROFILE HOURS --name NAME --image IMAGE [-k EXPR] [-m EXPR]
        [--out DIR] [-- PYTEST OPTION...]

writes DIR/shards.yaml and DIR/merge.yaml (see README.md).  Pod i of a Job runs shard i+1 of N
(JOB_COMPLETION_INDEX, which Kubernetes sets in an Indexed Job's pods) into a run directory on the
shared volume named by the sweep, the time it was rendered, the Job and the index: a pod retried
for the same index goes on from what the failed one finished (pytest --run-dir), and a sweep
rendered again under the same name starts afresh.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

RUNS = "/runs"  # where the shared volume is mounted in every pod
GPU = "nvidia.com/gpu"  # the NVIDIA device plugin's resource
# pytest's exit codes that a retry cannot change: 4 a usage error, 5 nothing selected.  The index
# fails at once.  Exit 1 (a scenario failed: a regression, or an engine that crashed or timed out) is
# retried: the retry keeps every finished result and measures again only what ended in an error.
FINAL_EXITS = [4, 5]
NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?")  # a DNS label, with room for "-tp8-merge"


def arrays(profile: str, hours: str, python: str, select: list[str]) -> list[tuple[int, int, str]]:
    """The plan's arrays: (GPUs a task, tasks, the pytest options its tasks share, `select`'s -k/-m
    among them)."""
    plan = [python, "-m", "specperf.cli", "plan", "--profile", profile, "--max-shard-hours", hours, "--arrays"]
    lines = subprocess.run(
        [*plan, *select],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return [(int(gpus), int(tasks), options) for gpus, tasks, options, _ in (line.split("\t") for line in lines)]


def shard_script(profile: str, folder: str, job: str, tasks: int, options: str, extra: list[str]) -> str:
    """What a shard's pod runs: its shard of the array, into its index's run directory."""
    run_dir = f"{folder}/{job}-$((JOB_COMPLETION_INDEX + 1))"
    return (
        f"exec python -m pytest tests_perf --profile {shlex.quote(profile)} {options} "
        f"--shard $((JOB_COMPLETION_INDEX + 1))/{tasks} --run-dir {run_dir} --history off -p no:cacheprovider"
        + "".join(f" {shlex.quote(arg)}" for arg in extra)
    )


def merge_script(folder: str, jobs: list[str], out: str) -> str:
    """What the merge Job runs: one report of every shard's run directory."""
    globs = " ".join(f"{folder}/{job}-*/run.json" for job in jobs)
    return (
        "set -euo pipefail\nshopt -s nullglob\nshards=()\n"
        f'for run in {globs}; do\n    shards+=("$(dirname "$run")")\ndone\n'
        'if [[ ${#shards[@]} -eq 0 ]]; then\n    echo "specperf: no shard wrote a run" >&2\n    exit 1\nfi\n'
        f'python -m specperf.cli report "${{shards[@]}}" --out {out}\n'
    )


def pod(name: str, image: str, script: str, args, gpus: int) -> dict:
    """A pod of one container: the shared runs volume at RUNS, a memory-backed /dev/shm (vLLM's
    workers talk through it; the default 64 MiB is too small at TP > 1), CPUs and memory per GPU."""
    container = {
        "name": name,
        "image": image,
        "workingDir": args.workdir,
        "command": ["bash", "-c", script],
        "volumeMounts": [{"name": "runs", "mountPath": RUNS}, {"name": "shm", "mountPath": "/dev/shm"}],
    }
    if gpus:
        cpus, memory = str(args.cpus_per_gpu * gpus), f"{args.memory_gib_per_gpu * gpus}Gi"
        container["resources"] = {  # quantities: Kubernetes' models keep them as text
            "requests": {"cpu": cpus, "memory": memory},
            "limits": {GPU: str(gpus), "memory": memory},
        }
    return {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [
            {"name": "runs", "persistentVolumeClaim": {"claimName": args.claim}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
        ],
    }


def shard_job(args, gpus: int, tasks: int, options: str) -> dict:
    job = f"{args.name}-tp{gpus}" if gpus else f"{args.name}-cpu"
    labels = {"app.kubernetes.io/name": "specperf", "specperf/sweep": args.name}
    script = shard_script(args.profile, args.folder, job, tasks, options, args.pytest)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": tasks,
            "parallelism": min(tasks, args.parallelism),
            "backoffLimitPerIndex": args.retries,
            "maxFailedIndexes": tasks,  # a failed shard stops no other
            "podFailurePolicy": {
                "rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},  # preempted, evicted
                    {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": FINAL_EXITS}},
                ]
            },
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": pod("shard", args.image, script, args, gpus),
            },
        },
    }


def merge_job(args, jobs: list[str]) -> dict:
    script = merge_script(args.folder, jobs, f"{args.folder}/merged")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{args.name}-merge", "labels": {"app.kubernetes.io/name": "specperf"}},
        "spec": {
            "backoffLimit": 2,
            "template": {"spec": pod("merge", args.image, script, args, 0)},
        },
    }


def dumped(documents: list[dict]) -> str:
    """YAML as a person reads it: a script as a block of its own lines, no line folded."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper, value: str):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    return yaml.dump_all(documents, Dumper=Dumper, sort_keys=False, width=10_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", help="profile name or .toml path (as the image's checkout sees it)")
    parser.add_argument("hours", help="the longest a shard may run (specperf plan --max-shard-hours)")
    parser.add_argument("--name", required=True, help="this sweep's name: its Jobs' and run directories' prefix")
    parser.add_argument("--image", required=True, help="an image with the checkout and the suite installed")
    parser.add_argument("--workdir", default="/specperf", help="the checkout in the image (default: /specperf)")
    parser.add_argument("--claim", default="specperf-runs", help="the shared volume's claim (runs-pvc.yaml)")
    parser.add_argument("--parallelism", type=int, default=64, help="pods of one Job at once (default: 64)")
    parser.add_argument("--retries", type=int, default=2, help="retries of one shard after a crash (default: 2)")
    parser.add_argument("--cpus-per-gpu", type=int, default=8, help="CPUs a shard's pod asks for per GPU (default: 8)")
    parser.add_argument(
        "--memory-gib-per-gpu", type=int, default=64, help="memory a pod asks for per GPU (default: 64)"
    )
    parser.add_argument("--out", type=Path, default=Path("."), help="where shards.yaml and merge.yaml go")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs specperf plan")
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="select scenarios as pytest -k does")
    parser.add_argument("-m", dest="markexpr", metavar="EXPR", help="select scenarios as pytest -m does")
    parser.epilog = "After --: options every shard's pytest gets."
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.pytest = argv[cut + 1 :]
    if not NAME.fullmatch(args.name):
        parser.error(f"--name {args.name!r}: lower-case letters, digits and '-', at most 42 characters")
    args.folder = f"{RUNS}/{args.name}-{time.strftime('%Y%m%d-%H%M%S')}"  # this rendering's runs
    select = [arg for flag, expr in (("-k", args.keyword), ("-m", args.markexpr)) if expr for arg in (flag, expr)]
    planned = arrays(args.profile, args.hours, args.python, select)
    jobs = [shard_job(args, gpus, tasks, options) for gpus, tasks, options in planned]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "shards.yaml").write_text(dumped(jobs))
    (args.out / "merge.yaml").write_text(dumped([merge_job(args, [job["metadata"]["name"] for job in jobs])]))
    for job in jobs:
        print(f"{job['metadata']['name']}: {job['spec']['completions']} shards")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
