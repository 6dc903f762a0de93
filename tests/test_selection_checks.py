"""What the suite checks of a run's selection before any engine starts, on a GPU machine: engines
alive together that fit in GPU memory (a gate, paired_reference), and GPUs for the selection's
largest TP on every xdist worker.  The GPUs are stand-ins: has_nvidia_gpu answers yes and
CUDA_VISIBLE_DEVICES names four; collection only, or stand-in tests on workers that record their GPUs."""

from __future__ import annotations

import pytest
from test_plugin import PROFILE, collected_ids, usage_error

import specperf.run.gate.sides  # noqa: F401 - numpy imported here once: an in-process run cannot import it again
from specperf.run.builds import environments
from specperf.suite import checks
from specperf.suite import gpus as suite_gpus

CANDIDATE = "/envs/candidate/bin/python"
AT_NINE_TENTHS = PROFILE.replace(
    "output_len = 8\n", "output_len = 8\n\n[profile.engine_args]\ngpu_memory_utilization = 0.9\n"
)
TWO_TP = """
[profile]
name = "two-tp"
tier = "cpu"                   # no requires_gpu marks: the stand-in GPUs are for the suite's checks only
num_requests = 1
output_len = 8

[methods.ngram-k3]
method = "ngram"
num_speculative_tokens = 3
prompt_lookup_min = 3
prompt_lookup_max = 7

[models.narrow]
path = "builtin:tiny-llama"

[models.wide]
path = "builtin:tiny-llama"
tp = 4

[[cells]]
model = "narrow"
methods = ["ngram-k3"]
batch_sizes = [1]
datasets = ["gsm8k"]

[[cells]]
model = "wide"
methods = ["ngram-k3"]
batch_sizes = [1]
datasets = ["gsm8k"]
"""


@pytest.fixture
def gpu_machine(monkeypatch):
    """Four GPUs as the suite's checks see them; a gate's candidate described without running it."""
    monkeypatch.setattr(checks, "has_nvidia_gpu", lambda: True)
    monkeypatch.setattr(suite_gpus, "has_nvidia_gpu", lambda: True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setattr(environments, "describe", lambda python=None: {"vllm": "0.0-fake", "methods": {}})


def write(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_a_gate_whose_engines_do_not_fit_a_gpu_stops_with_the_profile_and_the_fix(pytester, tmp_path, gpu_machine):
    profile = write(tmp_path, "gpu-gate", AT_NINE_TENTHS)
    line = usage_error(pytester, "--profile", str(profile), "--candidate", CANDIDATE)
    assert line.startswith(f"ERROR: {profile}: tiny-nosd-bs1-gsm8k: a gate (--candidate) keeps 2 engines alive")
    assert "--gate-blocks N, or gate_blocks in the profile" in line and line.endswith("to 0.47")
    assert collected_ids(pytester, "--profile", str(profile), "--candidate", CANDIDATE, "--gate-blocks", "2")
    blocked = write(
        tmp_path, "gpu-gate-blocks", AT_NINE_TENTHS.replace("output_len = 8\n", "output_len = 8\ngate_blocks = 3\n")
    )
    assert collected_ids(pytester, "--profile", str(blocked), "--candidate", CANDIDATE)
    assert collected_ids(pytester, "--profile", str(profile))  # no gate: one engine at a time
    paired = write(
        tmp_path, "gpu-paired", AT_NINE_TENTHS.replace("output_len = 8\n", "output_len = 8\npaired_reference = true\n")
    )
    line = usage_error(pytester, "--profile", str(paired), "-k", "eagle3")
    assert ": tiny-eagle3-k3-bs1-gsm8k: paired_reference keeps 2 engines alive together" in line


def test_on_the_cpu_tier_a_gate_starts_as_before(pytester, tmp_path, gpu_machine, monkeypatch):
    """CPU engines size their KV cache by kv_cache_memory_bytes and pass no GPU memory check."""
    monkeypatch.setattr(checks, "has_nvidia_gpu", lambda: False)
    assert collected_ids(pytester, "--profile", str(write(tmp_path, "gate", AT_NINE_TENTHS)), "--candidate", CANDIDATE)


def test_a_run_without_xdist_keeps_the_gpus_of_the_selections_largest_tp(pytester, tmp_path, gpu_machine, monkeypatch):
    import os

    profile = write(tmp_path, "two-tp", TWO_TP)
    assert collected_ids(pytester, "--profile", str(profile), "-k", "narrow")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert collected_ids(pytester, "--profile", str(profile))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    reserved = {}
    for shard in ("1/2", "2/2"):  # each shard's own selection decides
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
        ids = collected_ids(pytester, "--profile", str(profile), "--shard", shard)
        reserved[os.environ["CUDA_VISIBLE_DEVICES"]] = {sid.split("-")[0] for sid in ids}
    assert reserved == {"0": {"narrow"}, "0,1,2,3": {"wide"}}


XDIST_CONFTEST = """
import os
import pathlib

import specperf.suite.checks
import specperf.suite.gpus

# four stand-in GPUs (CUDA_VISIBLE_DEVICES names them), in the controller and on every worker
specperf.suite.checks.has_nvidia_gpu = lambda: True
specperf.suite.gpus.has_nvidia_gpu = lambda: True


def pytest_collection_finish(session):
    \"\"\"Each worker's GPUs once it has collected, whether or not it gets a test.\"\"\"
    worker = os.environ["PYTEST_XDIST_WORKER"]
    (pathlib.Path(os.environ["GPU_RECORD_DIR"]) / worker).write_text(os.environ["CUDA_VISIBLE_DEVICES"])
"""
STAND_IN_TESTS = """
def test_scenario(specperf_scenario):
    pass
"""


def xdist_run(pytester, tmp_path, monkeypatch, profile_text: str, *args):
    """A suite run of stand-in tests on two xdist workers; what each worker's CUDA_VISIBLE_DEVICES was."""
    record = tmp_path / "gpus"
    record.mkdir()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("GPU_RECORD_DIR", str(record))
    pytester.makeconftest(XDIST_CONFTEST)
    pytester.makepyfile(test_stand_in=STAND_IN_TESTS)
    profile = write(tmp_path, "two-tp", profile_text)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--profile", str(profile), *args)
    return result, {path.name: path.read_text() for path in record.iterdir()}


def test_xdist_workers_take_the_gpus_of_the_selections_largest_tp(pytester, tmp_path, monkeypatch):
    """-n 2 on four GPUs with a profile whose largest TP is 4: the TP 1 selection runs, a GPU each."""
    result, gpus = xdist_run(pytester, tmp_path, monkeypatch, TWO_TP, "-k", "narrow")
    result.assert_outcomes(passed=2)
    assert gpus == {"gw0": "0", "gw1": "1"}


@pytest.mark.parametrize(
    "profile_text, args, words",
    [
        (TWO_TP, ["-k", "wide"], "ERROR: 2 workers x TP 4 need 8 GPUs, but only 4 are visible (0,1,2,3)"),
        (
            AT_NINE_TENTHS.replace("output_len = 8\n", "output_len = 8\npaired_reference = true\n"),
            [],
            "paired_reference keeps 2 engines",
        ),
    ],
    ids=["gpus", "memory"],
)
def test_the_xdist_controller_refuses_a_selection_before_any_test_runs(
    pytester, tmp_path, monkeypatch, profile_text, args, words
):
    """A worker's usage error would crash it: the controller checks what each worker collected."""
    result, _ = xdist_run(pytester, tmp_path, monkeypatch, profile_text, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert words in result.stderr.str() and "no tests ran" in result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
