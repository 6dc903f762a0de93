"""Real regressions injected into a vLLM CPU engine are caught, on the right metric; a clean
repeat is not flagged.

A clean run stores baselines; then the n-gram scenario runs again unchanged (A/A), with the n-gram
proposer slowed down (a sleep around every proposal), with a smaller n-gram window (fewer accepted
tokens) and with one output token changed (not lossless), through the fault-injection vLLM plugin
in vllm_faults/.  No fault changes the scenario definition, so every run is judged against the
clean baselines.  Each of those runs resumes a copy of the clean run without its n-gram result:
the no-SD reference, which no fault touches, is kept from the clean run.  The scenarios are traced,
so the report also says what moved.
"""

from __future__ import annotations

import json
import shutil

import pytest
from suite import PROFILES, only_run_dir, read_results, run_suite

pytestmark = pytest.mark.cpu_tier

PROFILE = str(PROFILES / "detect.toml")
NGRAM = "smollm2-135m-ngram-k3-bs1-instructcoder-traced"
REFERENCE = "smollm2-135m-nosd-bs1-instructcoder-traced"
DELAY = "propose_delay_ms=150"  # most of a step: far beyond the profile's 35% speed tolerance
SMALLER_WINDOW = "ngram_window=1:1"
LOSSY = "lossy=ngram"
ACCEPTANCE = ("mean_acceptance_length", "draft_acceptance_rate")


def deterministic(metrics: dict) -> dict:
    return {
        name: m
        for name, m in metrics.items()
        if name in ACCEPTANCE + ("lossless_fraction",) or name.startswith("acceptance_pos")
    }


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The clean run that stores the baselines: (baseline store, its run directory)."""
    store, reports = tmp_path_factory.mktemp("baselines"), tmp_path_factory.mktemp("clean")
    done = run_suite(PROFILE, reports, store, "--update-baselines")
    assert done.returncode == 0, done.stdout[-3000:]
    return store, only_run_dir(reports)


def faulty_run(tmp_path_factory, clean, fault=None):
    """The n-gram scenario measured again, with the fault: a copy of the clean run resumed without
    its n-gram result, so that the untouched no-SD reference is kept, not measured again."""
    store, clean_dir = clean
    run_dir = tmp_path_factory.mktemp("faulty") / clean_dir.name
    shutil.copytree(clean_dir, run_dir)
    (run_dir / "results" / f"{NGRAM}.json").unlink()
    done = run_suite(PROFILE, run_dir.parent, store, "--resume", str(run_dir), fault=fault)
    assert f"[resumed] {REFERENCE}: kept" in done.stdout
    result = read_results(run_dir)[NGRAM]
    return done, result, {m["metric"]: m for m in result["verdict"]["metrics"]}, run_dir


@pytest.fixture(scope="module")
def repeated(tmp_path_factory, clean):
    return faulty_run(tmp_path_factory, clean)


@pytest.fixture(scope="module")
def lossy(tmp_path_factory, clean):
    return faulty_run(tmp_path_factory, clean, LOSSY)


@pytest.fixture(scope="module")
def slowed(tmp_path_factory, clean):
    return faulty_run(tmp_path_factory, clean, DELAY)


@pytest.fixture(scope="module")
def smaller_window(tmp_path_factory, clean):
    return faulty_run(tmp_path_factory, clean, SMALLER_WINDOW)


def test_a_clean_repeat_passes_with_every_deterministic_metric_unchanged(repeated):
    """First in the module, so the repeat runs right after the baselines it is judged against; its
    speedup is paired within the run, so the machine's drift in between does not move it."""
    done, result, metrics, _ = repeated
    assert done.returncode == 0, done.stdout[-3000:]
    assert result["verdict"]["status"] == "pass", result["verdict"]
    assert metrics["speedup"]["status"] == "pass", metrics["speedup"]
    assert len(deterministic(metrics)) == len(ACCEPTANCE) + 1 + 3  # 3 draft positions
    for name, metric in deterministic(metrics).items():
        assert metric["status"] == "pass" and metric["change"] == 0, (name, metric)


def test_a_slower_proposer_is_a_throughput_and_speedup_regression(slowed):
    """Speedup (paired with the no-SD engine) fails the case; throughput, informational here, is
    flagged beside it."""
    done, result, metrics, _ = slowed
    assert result["verdict"]["status"] == "regression"
    for name in ("throughput_tok_s", "speedup"):
        assert metrics[name]["status"] == "regression", metrics[name]
        assert metrics[name]["change"] < -0.05 and metrics[name]["p_value"] < 0.05
    assert "informational" in metrics["throughput_tok_s"]["note"]
    assert f"FAILED tests_perf/test_speculative_decoding.py::test_scenario[{NGRAM}]" in done.stdout
    assert "speedup: regression: baseline" in done.stdout


def test_the_traces_put_a_slower_proposer_down_to_drafting(slowed):
    _, _, _, run_dir = slowed
    (scenario,) = [s for s in json.loads((run_dir / "summary.json").read_text())["scenarios"] if s["id"] == NGRAM]
    moved = scenario["attribution"]
    assert moved["mover"] == "draft" and moved["change"] > 0.05, moved
    # The sleep is in the proposer, so drafting carries most of the change; not all of it, because on
    # CPU the engine's threads go idle during the sleep and the next forward pays for waking them
    # (a CI run measured drafting +121% and the forward +72% of a +202% change).
    assert moved["contributions"]["draft"] > 0.5 * moved["change"], moved
    assert moved["tokens_per_step"][0] == moved["tokens_per_step"][1]  # acceptance unchanged
    assert "what moved, from the traces: time per output token +" in (run_dir / "index.html").read_text()


def test_a_slower_proposer_leaves_acceptance_alone(slowed):
    _, _, metrics, _ = slowed
    for name in ACCEPTANCE + ("lossless_fraction",):
        assert metrics[name]["status"] == "pass" and metrics[name]["change"] == 0, metrics[name]


def test_a_smaller_ngram_window_is_an_acceptance_regression(smaller_window):
    done, result, metrics, _ = smaller_window
    assert result["verdict"]["status"] == "regression"
    assert metrics["mean_acceptance_length"]["status"] == "regression"
    assert metrics["mean_acceptance_length"]["change"] < -0.05
    assert "mean_acceptance_length: regression" in done.stdout
    assert metrics["lossless_fraction"]["status"] == "pass"  # still the same greedy output


def test_a_changed_output_token_is_a_lossless_regression(lossy):
    done, result, metrics, _ = lossy
    assert result["verdict"]["status"] == "regression"
    assert metrics["lossless_fraction"]["status"] == "regression"
    assert metrics["lossless_fraction"]["current"] < 1.0
    assert f"FAILED tests_perf/test_speculative_decoding.py::test_scenario[{NGRAM}]" in done.stdout
    assert "lossless_fraction: regression" in done.stdout
