"""scripts/gpu_check.py: its dry run where there is no GPU, and the helpers its GPU checks rest on."""

import contextlib
import json
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from fake_nvml import FOREIGN_PID, MIB, box, install  # noqa: F401 (fixture)

import specperf.run.hardware
from specperf.run.hardware import device

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
CHECK_NAMES = ["device", "pids", "colocation", "batch_variance", "sustained_load", "release_lag"]


@pytest.fixture(scope="module")
def gpu_check():
    sys.path.insert(0, str(SCRIPTS))  # as a module named gpu_check, so spawned children can import it
    try:
        import gpu_check

        yield gpu_check
    finally:
        sys.path.remove(str(SCRIPTS))


def run_script(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "gpu_check.py"), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


# ------------------------------------------------------------------ the dry run


@pytest.mark.skipif(device.has_nvidia_gpu(), reason="the dry run is for machines without an NVIDIA GPU")
def test_dry_run_describes_the_cpu_and_skips_every_gpu_check_with_its_reason(tmp_path):
    done = run_script("--sustain-s", "2", cwd=tmp_path, env={"OUT": str(tmp_path)})
    assert done.returncode == 1, done.stderr  # NVML described no GPU
    printed = json.loads(done.stdout)
    assert json.loads((tmp_path / "gpu_check.json").read_text()) == printed
    assert printed["exit_status"] == 1
    assert list(printed["checks"]) == CHECK_NAMES
    described = printed["checks"]["device"]
    assert described["description"]["kind"] == "cpu" and described["verdict"] == "no GPU described"
    assert described["unmet_requirement_min_class_h100"].startswith("needs an NVIDIA GPU")
    for name in CHECK_NAMES[1:]:
        section = printed["checks"][name]
        assert list(section) == ["skipped"], name
        assert "pynvml" in section["skipped"] or "torch" in section["skipped"], name
    assert printed["checks"]["pids"]["skipped"].startswith(printed["nvml_missing"])
    for name in CHECK_NAMES[1:]:
        assert f"gpu_check: {name}: skipped (" in done.stderr


@pytest.mark.skipif(device.has_nvidia_gpu(), reason="the dry run is for machines without an NVIDIA GPU")
def test_only_and_out_write_just_the_named_checks_to_the_file(tmp_path):
    out = tmp_path / "result.json"
    done = run_script("--only", "batch_variance,device", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert list(json.loads(out.read_text())["checks"]) == ["device", "batch_variance"]  # documented order
    assert not (tmp_path / "gpu_check.json").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--only", "pids,nonsense"], "argument --only: unknown check nonsense (known: device, pids,"),
        (["--only", ","], "argument --only: unknown check (none named)"),
        (["--sustain-s", "-1"], "argument --sustain-s: '-1' is not a number of seconds >= 0"),
        (["--sustain-s", "inf"], "argument --sustain-s: 'inf' is not a number of seconds >= 0"),
        (["--out", "/no-such-folder/gpu.json"], "argument --out: /no-such-folder is not a folder"),
    ],
)
def test_bad_options_stop_with_one_line_naming_the_option(gpu_check, capsys, args, message):
    with pytest.raises(SystemExit) as stopped:
        gpu_check.main(args)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


# ------------------------------------------------------------------ what the machine lets a check do


def test_missing_names_every_part_a_check_needs_and_lacks(gpu_check):
    machine = gpu_check.Machine("no module pynvml", "no module torch", None, None)
    assert gpu_check.missing(("nvml", "cuda"), machine) == "no module pynvml; no module torch"
    assert gpu_check.missing(("cuda",), machine) == "no module torch"
    assert gpu_check.missing((), machine) is None
    assert gpu_check.missing(("nvml", "cuda"), gpu_check.Machine(None, None, 0, "2.11.0")) is None


def test_machine_uses_nvmls_first_visible_gpu_and_says_why_nvml_cannot_be_used(gpu_check, install, monkeypatch):
    install(box(2))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert gpu_check._nvml_state() == (None, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_check._nvml_state()[0].startswith("NVML sees no GPU")
    install(box(2), driver_works=False)
    assert gpu_check._nvml_state() == ("NVML did not start (no NVIDIA driver?)", None)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert gpu_check._nvml_state() == ("no module pynvml (pip install nvidia-ml-py)", None)


def test_exit_status_is_1_without_a_gpu_else_2_when_a_check_broke(gpu_check):
    with_gpu, without = gpu_check.Machine(None, None, 0, "2.11"), gpu_check.Machine("no module pynvml", None, None, "")
    assert gpu_check.exit_status(with_gpu, {"device": {}, "pids": {"skipped": "x"}}) == 0
    assert gpu_check.exit_status(with_gpu, {"device": {}, "pids": {"error": "RuntimeError: x"}}) == 2
    assert gpu_check.exit_status(without, {"device": {}, "pids": {"error": "RuntimeError: x"}}) == 1


# ------------------------------------------------------------------ children


def report_and_hold(conn, fail):
    """A child job for running(): report the pid, or fail, then wait for the parent."""
    if fail:
        raise ValueError("no CUDA device here")
    conn.send({"pid": os.getpid()})
    conn.recv()


def test_running_yields_the_first_message_and_kills_the_childs_group_on_leaving(gpu_check):
    with gpu_check.running(report_and_hold, False) as (process, _, message):
        assert message == {"pid": process.pid} and process.is_alive()
    assert process.exitcode == -signal.SIGKILL
    deadline = time.monotonic() + 5  # the group's other member, child.py's reaper, dies a moment later
    while living_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert living_members(process.pid) == []


def living_members(group: int) -> list[int]:
    """The processes of a process group that are neither gone nor zombies."""
    members = []
    for found in psutil.process_iter(["status"]):
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(found.pid) == group and found.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(found.pid)
    return members


def test_running_raises_the_childs_error_and_leaves_no_child(gpu_check):
    with pytest.raises(RuntimeError, match="report_and_hold child: ValueError: no CUDA device here"):
        with gpu_check.running(report_and_hold, True):
            pass
    assert multiprocessing.active_children() == []


# ------------------------------------------------------------------ pids


@pytest.mark.parametrize(
    "new, verdict",
    [
        ({101}, "namespace_pids"),
        ({101, 4_000_101}, "namespace_pids"),
        ({4_000_101}, "other_pids"),
        (set(), "not_listed"),
    ]
    + [({4_000_101, 4_000_102}, "ambiguous")],
)
def test_pid_verdict(gpu_check, new, verdict):
    assert gpu_check.pid_verdict(101, new) == verdict


def test_suite_ownership_asks_the_suites_check_about_the_childs_entries(gpu_check):
    mine, stranger = (
        SimpleNamespace(pid=os.getpid(), usedGpuMemory=MIB),
        SimpleNamespace(pid=FOREIGN_PID, usedGpuMemory=MIB),
    )
    assert gpu_check.suite_ownership(0, 0, [mine], {os.getpid()}) == {
        "suite_verdict": "ours",
        "suite_ownership": "pids",
    }
    # a pid of no process here, and no process of ours holding the GPU's device file: foreign, by count
    judged = gpu_check.suite_ownership(0, 0, [mine, stranger], {FOREIGN_PID})
    assert judged == {"suite_verdict": "foreign", "suite_ownership": "counted"}
    assert gpu_check.suite_ownership(0, 0, [mine], set()) == {
        "suite_verdict": None,
        "suite_verdict_reason": "NVML listed no process for the child",
    }


def test_suite_ownership_says_why_there_is_no_verdict_without_the_suites_check(gpu_check, monkeypatch):
    from specperf.run.hardware import ownership

    monkeypatch.delattr(ownership.Ownership, "foreign_on")
    assert gpu_check.suite_ownership(0, 0, [], {FOREIGN_PID}) == {
        "suite_verdict": None,
        "suite_verdict_reason": "specperf.run.hardware.ownership has no Ownership.foreign_on",
    }
    monkeypatch.delattr(specperf.run.hardware, "ownership")
    monkeypatch.setitem(sys.modules, "specperf.run.hardware.ownership", None)
    judged = gpu_check.suite_ownership(0, 0, [], {FOREIGN_PID})
    assert judged["suite_verdict"] is None and judged["suite_verdict_reason"].startswith(
        "specperf.run.hardware.ownership: "
    )


def test_holds_gpu_device_file_matches_the_gpus_device_number(gpu_check):
    files = [
        {"path": "/dev/nvidiactl", "major": 195, "minor": 255},
        {"path": "/dev/nvidia-uvm", "major": 508, "minor": 0},
        {"path": "/dev/nvidia1", "major": 195, "minor": 1},
    ]
    assert gpu_check.holds_gpu_device_file(files, 1) is True
    assert gpu_check.holds_gpu_device_file(files, 0) is False  # nvidia-uvm's minor 0 is no GPU's
    assert gpu_check.holds_gpu_device_file(files, None) is None
    assert gpu_check.nvidia_files(os.getpid()) == []  # this process has no GPU


def test_nspid_reads_this_process_pid_namespaces(gpu_check):
    assert gpu_check.nspid("self")[-1] == os.getpid()
    assert gpu_check.nspid(FOREIGN_PID) is None


# ------------------------------------------------------------------ colocation


GIB = 2**30


def test_vllm_memory_rule_is_free_memory_at_least_the_utilization_of_total(gpu_check):
    total = 81559 * 2**20  # an H100's
    needed = math.ceil(0.9 * total)
    assert gpu_check.vllm_memory_rule(needed, total, 0.9)["passes"]
    assert not gpu_check.vllm_memory_rule(needed - 1, total, 0.9)["passes"]
    beside_an_engine = gpu_check.vllm_memory_rule(total // 10 - GIB // 2, total, 0.9)
    assert beside_an_engine["largest_passing_utilization"] == 0.09 and not beside_an_engine["passes"]


def test_bytes_to_fill_brings_the_devices_use_to_the_fraction(gpu_check):
    total = 80 * GIB
    assert gpu_check.bytes_to_fill(0.9, free=total - GIB // 2, total=total) == math.floor(0.9 * total) - GIB // 2
    assert gpu_check.bytes_to_fill(0.45, free=10 * GIB, total=total) == 0  # already fuller than that
    assert gpu_check.bytes_to_fill(0.0, free=total, total=total) == 0


# ------------------------------------------------------------------ release_lag


class Clock:
    """A stand-in clock that moves only when the poll loop sleeps."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += 0.010


def test_wait_for_release_times_each_condition_from_the_kill(gpu_check):
    clock = Clock()
    asked = {"reaped": 0}

    def reaped():
        asked["reaped"] += 1
        return clock.now >= 100.02

    conditions = {"reaped": reaped, "memory": lambda: clock.now >= 100.05, "never": lambda: False}
    lag = gpu_check.wait_for_release(conditions, 100.0, clock=clock, sleep=clock.sleep, timeout_s=0.1)
    assert lag == {"reaped": 20.0, "memory": 50.0, "never": None}
    assert asked["reaped"] == 3  # not asked again once it held


def test_wait_for_release_stops_once_everything_held(gpu_check):
    clock = Clock()
    lag = gpu_check.wait_for_release({"a": lambda: True, "b": lambda: True}, 99.99, clock=clock, sleep=clock.sleep)
    assert lag == {"a": 10.0, "b": 10.0} and clock.now == 100.0


@pytest.mark.parametrize(
    "lag, after, verdict",
    [
        ({"process_reaped": 30.0, "nvml_memory_back": 12.0, "cuda_free_back": 30.0}, 0.0, "back by the reap"),
        (
            {"process_reaped": 30.0, "nvml_memory_back": 12.0, "cuda_free_back": 530.0},
            500.0,
            "back within 1 s of the reap",
        ),
        (
            {"process_reaped": 30.0, "nvml_memory_back": 2030.5, "cuda_free_back": 9.0},
            2000.5,
            "back more than 1 s after",
        ),
        ({"process_reaped": 30.0, "nvml_memory_back": None, "cuda_free_back": 9.0}, None, "not released within 30 s"),
    ],
)
def test_release_verdict(gpu_check, lag, after, verdict):
    judged = gpu_check.release_verdict(lag)
    assert judged["memory_back_after_reap_ms"] == after and judged["verdict"].startswith(verdict)


# ------------------------------------------------------------------ batch_variance


def test_drift_summary_names_the_batch_sizes_that_changed_the_first_row(gpu_check):
    rows = [
        {"m": 1, "max_abs_diff": 0.0, "argmax": 7},
        {"m": 2, "max_abs_diff": 0.0, "argmax": 7},
        {"m": 3, "max_abs_diff": 0.0078125, "argmax": 7},
        {"m": 4, "max_abs_diff": 0.015625, "argmax": 9},
    ]
    summary = gpu_check.drift_summary(7, rows)
    assert summary == {
        "differs_at_m": [3, 4],
        "argmax_changed_at_m": [4],
        "max_abs_diff": 0.015625,
        "verdict": "argmax_depends_on_batch",
    }
    assert gpu_check.drift_summary(7, rows[:3])["verdict"] == "logits_depend_on_batch"
    assert gpu_check.drift_summary(7, rows[:2])["verdict"] == "batch_invariant"
