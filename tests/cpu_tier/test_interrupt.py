"""Ctrl-C in the middle of a run, then `--resume`: finished results stay, the rest is measured.

The suite runs in a subprocess that gets SIGINT once two scenarios have finished.  Before the
resume, one finished result file is truncated and one baseline corrupted, as a crash or a bad
disk would leave them.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from suite import PROFILES, ROOT, command, environment, only_run_dir, read_results, run_suite

pytestmark = pytest.mark.cpu_tier

PROFILE = str(PROFILES / "resume.toml")
SCENARIOS = {f"tiny-llama-{m}-bs{b}-instructcoder" for m in ("nosd", "eagle-k3") for b in (1, 2, 4)}


def finished_results(reports):
    return list(reports.glob("*/results/*.json"))


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    reports, store = tmp_path_factory.mktemp("reports"), tmp_path_factory.mktemp("baselines")
    # SIGINT as a terminal's Ctrl-C finds it: a shell starts background jobs with it ignored.
    process = subprocess.Popen(
        command(PROFILE, reports, store, "--update-baselines"),
        cwd=ROOT,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 600
    while len(finished_results(reports)) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=300)
    print(output[-6000:])
    run_dir = only_run_dir(reports)
    return process.returncode, output, run_dir, read_results(run_dir), store


@pytest.fixture(scope="module")
def resumed(interrupted):
    _, _, run_dir, before, store = interrupted
    truncated = sorted(before)[0]
    path = run_dir / "results" / f"{truncated}.json"
    path.write_text(path.read_text()[:100])
    kept = sorted(set(before) - {truncated})
    hardware_key = before[kept[0]]["device"]["hardware_key"]
    corrupt_baseline = store / hardware_key / f"{kept[0]}.json"
    corrupt_baseline.parent.mkdir(parents=True, exist_ok=True)
    corrupt_baseline.write_text('{"schema_version": 1, "scenario_hash": ')
    done = run_suite(PROFILE, run_dir.parent, store, "--resume", str(run_dir))
    return done, run_dir, read_results(run_dir), truncated, kept, corrupt_baseline


def test_sigint_ends_the_run_as_interrupted(interrupted):
    returncode, output, run_dir, results, _ = interrupted
    assert returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["interrupted"] is True


def test_finished_results_are_kept_intact(interrupted):
    _, _, _, results, _ = interrupted
    assert 2 <= len(results) < len(SCENARIOS)
    assert all(r["status"] == "ok" and r["validity"]["valid"] for r in results.values())


def test_the_report_is_written_for_what_finished(interrupted):
    _, _, run_dir, results, _ = interrupted
    html = (run_dir / "index.html").read_text()
    assert all(scenario_id in html for scenario_id in results)


def test_no_baseline_is_written_from_an_interrupted_run(interrupted):
    _, output, _, _, store = interrupted
    assert not list(store.glob("*/*.json"))
    assert "baselines not updated: the run was interrupted" in output


def test_resume_measures_only_what_is_missing(resumed, interrupted):
    done, _, after, truncated, kept, _ = resumed
    before = interrupted[3]
    assert set(after) == SCENARIOS
    assert all(r["status"] == "ok" for r in after.values())
    for scenario_id in kept:  # not measured again
        assert after[scenario_id]["started_at"] == before[scenario_id]["started_at"]
        assert f"[resumed] {scenario_id}" in done.stdout
    assert after[truncated]["started_at"] != before[truncated]["started_at"]
    for result in after.values():  # kept references serve the SD scenarios
        if result["scenario"]["method"]["name"] != "none":
            assert result["validity"]["valid"], result["validity"]
            assert result["metrics"]["speedup"]["value"] > 0
            assert result["metrics"]["lossless_fraction"]["value"] == 1.0


def test_a_truncated_result_is_named_and_measured_again(resumed):
    done, run_dir, _, truncated, _, _ = resumed
    assert f"resume: measuring again: {run_dir / 'results' / truncated}.json: corrupt result" in done.stdout


def test_a_corrupt_baseline_fails_its_scenario_with_the_file_named(resumed):
    done, _, after, _, kept, corrupt_baseline = resumed
    assert done.returncode == 1
    verdict = after[kept[0]]["verdict"]
    assert verdict["status"] == "error"
    assert verdict["note"].startswith(f"{corrupt_baseline}: corrupt baseline")
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and kept[0] in failed[0]
