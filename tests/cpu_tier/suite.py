"""Runs the suite as a user does (`pytest tests_perf ...` in a subprocess) for the CPU-tier tests."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILES = Path(__file__).resolve().parent / "profiles"
FAULT_PLUGIN = Path(__file__).resolve().parent / "vllm_faults"
GATE_PROFILE = str(PROFILES / "gate.toml")


def command(profile: str, reports: Path, baselines: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        str(ROOT / "tests_perf"),
        "--profile",
        profile,
        "--reports-dir",
        str(reports),
        "--baseline-dir",
        str(baselines),
        "-p",
        "no:cacheprovider",
        "-q",
        "-rA",
        *args,
    ]


def environment(fault: str | None = None) -> dict:
    """The suite's environment; with a fault, the fault-injection vLLM plugin is on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}  # a run of its own
    env.pop("SPECPERF_FAULT", None)
    if fault:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FAULT_PLUGIN), env.get("PYTHONPATH")]))
        env["SPECPERF_FAULT"] = fault
    return env


def run_suite(
    profile: str, reports: Path, baselines: Path, *args: str, fault: str | None = None, echo: bool = True
) -> subprocess.CompletedProcess:
    done = subprocess.run(
        command(profile, reports, baselines, *args),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
        env=environment(fault),
    )
    if echo:
        print(done.stdout[-6000:], done.stderr[-3000:])
    return done


def gate_run(tmp_path_factory, candidate: str, *args: str, profile: str = GATE_PROFILE):
    """An upgrade gate against `candidate` (an interpreter): (completed process, run dir, results)."""
    reports = tmp_path_factory.mktemp("reports")
    done = run_suite(profile, reports, tmp_path_factory.mktemp("baselines"), "--candidate", candidate, *args)
    run_dir = only_run_dir(reports)
    return done, run_dir, read_results(run_dir)


def only_run_dir(reports: Path) -> Path:
    (run_dir,) = [p for p in reports.iterdir() if p.is_dir()]
    return run_dir


def read_results(run_dir: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (run_dir / "results").glob("*.json")}


def slowed_python(folder: Path, fraction: float | Path, python: str = sys.executable, method: str = "") -> str:
    """`python` (default: this interpreter) with its engines (of `method` only, if given) `fraction`
    slower per step (the fault plugin's step_slowdown): a candidate build slower by a known amount,
    for `--candidate`.  A `fraction` that is a file is read at every step, so that a benchmark can
    switch it between rounds."""
    switched = isinstance(fraction, Path)
    path = folder / f"python-{method}{f'switched-{fraction.name}' if switched else f'{fraction:g}'}"
    value = f"@{fraction}" if switched else f"{fraction}"
    slowdown = f"{method}:{value}" if method else value
    return faulty_python(path, f"step_slowdown={slowdown}", python)


def faulty_python(path: Path, fault: str, python: str = sys.executable) -> str:
    """A wrapper at `path` that runs `python` with the fault plugin loaded and SPECPERF_FAULT=`fault`
    (tests/cpu_tier/vllm_faults): an engine's interpreter for a known fault."""
    path.write_text(
        f"#!/bin/sh\nexport SPECPERF_FAULT={fault}\n"
        f"export PYTHONPATH={FAULT_PLUGIN}${{PYTHONPATH:+:$PYTHONPATH}}\n"
        f'exec {python} "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def second_environment(folder: Path) -> str:
    """Another environment of this build: a virtual environment of its own (its own interpreter
    and prefix) that sees this one's packages through a .pth file.  A gate between the two is an
    A/A between two environments, as `tox -e gate` builds them, without a second install."""
    import site
    import venv

    venv.EnvBuilder(with_pip=False).create(folder)
    python = folder / "bin" / "python"
    target = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(target) / "this-build.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return str(python)


def check_request_acceptance(result: dict, requests: int) -> None:
    """Each request's counts, summed over the rounds, add up to vLLM's counters over them."""
    per_request = result["request_acceptance"]
    assert len(per_request) == requests
    for counts in per_request:
        positions = counts["accepted_per_pos"]
        assert counts["accepted"] <= counts["drafted"] <= 3 * counts["steps"]
        assert positions == sorted(positions, reverse=True)  # a later position only after the ones before
        assert sum(positions) == counts["accepted"]
    counters = result["counters"]
    assert sum(r["steps"] for r in per_request) == counters["drafts"]
    assert sum(r["drafted"] for r in per_request) == counters["draft_tokens"]
    assert sum(r["accepted"] for r in per_request) == counters["accepted"] > 0
    per_position = [sum(column) for column in zip(*(r["accepted_per_pos"] for r in per_request))]
    assert per_position == counters["accepted_per_pos"]


def check_sampled_acceptance(result: dict) -> None:
    """A sampled SD result's acceptance: both weightings, each with its error over requests; no lossless."""
    metrics, counters = result["metrics"], result["counters"]
    assert metrics["mean_acceptance_length"]["value"] == pytest.approx(1 + counters["accepted"] / counters["drafts"])
    for name in ("mean_acceptance_length", "request_mean_acceptance_length", "draft_acceptance_rate"):
        assert metrics[name]["se"] > 0, name
    for name in ("per_position_acceptance", "request_per_position_acceptance"):
        assert len(metrics[name]["se"]) == len(metrics[name]["value"]) == 3
    assert "lossless_fraction" not in metrics  # greedy equality says nothing of sampled outputs


def assert_methods_accept_and_are_lossless(results: dict, methods: set[str]) -> None:
    """A run's SD scenarios cover `methods` (at least), each accepting drafts on code editing, each
    greedy one lossless, each with a speedup."""
    sd = [r for r in results.values() if r["scenario"]["method"]["name"] != "none"]
    assert {r["scenario"]["method"]["name"] for r in sd} >= methods
    for result in sd:  # on chat (ShareGPT) n-gram may find no match that holds: code editing has them
        if result["scenario"]["dataset"] == "instructcoder":
            assert result["counters"]["accepted"] > 0, result["scenario"]["id"]
        if result["scenario"]["sampling"]["temperature"] == 0:
            assert result["metrics"]["lossless_fraction"]["value"] == 1.0, result["scenario"]["id"]
        assert result["metrics"]["speedup"]["value"] > 0
