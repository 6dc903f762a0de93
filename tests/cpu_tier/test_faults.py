"""Faults provoked for real on vLLM CPU engines: the run goes on, keeps every result, says why.

One run of profiles/faults.toml with the fault-injection vLLM plugin (vllm_faults/): the EAGLE-3
engine kills itself mid-scenario, the MTP engine's second request never returns (a 30 s
scenario limit ends it), and one EAGLE engine gets a KV cache too small to start.
"""

from __future__ import annotations

import json

import pytest
from suite import PROFILES, only_run_dir, read_results, run_suite

pytestmark = pytest.mark.cpu_tier

FAULTS = "die_on_generate=eagle3:3,hang_on_generate=mtp:2"
LIMIT_S = 30
HEALTHY = [
    "tiny-llama-nosd-bs1-instructcoder",
    "tiny-llama-nosd-bs2-instructcoder",
    "tiny-mimo-nosd-bs1-instructcoder",
    "tiny-mimo-nosd-bs2-instructcoder",
    "tiny-llama-eagle-k3-bs2-instructcoder",
]
HEALTHY_SD = "tiny-llama-eagle-k3-bs2-instructcoder"  # its engine key runs after the killed one
KILLED = ["tiny-llama-eagle3-k3-bs1-instructcoder", "tiny-llama-eagle3-k3-bs2-instructcoder"]
HUNG = ["tiny-mimo-mtp-k1-bs1-instructcoder", "tiny-mimo-mtp-k1-bs2-instructcoder"]
NO_ROOM = ["tiny-llama-nosd-bs4-instructcoder", "tiny-llama-eagle-k3-bs4-instructcoder"]


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    reports, store = tmp_path_factory.mktemp("reports"), tmp_path_factory.mktemp("baselines")
    done = run_suite(
        str(PROFILES / "faults.toml"),
        reports,
        store,
        "--update-baselines",
        "--scenario-timeout",
        str(LIMIT_S),
        fault=FAULTS,
    )
    run_dir = only_run_dir(reports)
    return done, run_dir, read_results(run_dir), store


def test_every_scenario_has_a_result_and_the_run_finished(faulty_run):
    done, run_dir, results, _ = faulty_run
    assert done.returncode == 1, done.stdout[-3000:]  # failed cases, not a crash
    assert set(results) == set(HEALTHY + KILLED + HUNG + NO_ROOM)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["finished_at"] and run["interrupted"] is False


def test_healthy_engines_measured_normally(faulty_run):
    _, _, results, _ = faulty_run
    for scenario_id in HEALTHY:
        assert results[scenario_id]["status"] == "ok", scenario_id
        assert results[scenario_id]["validity"]["valid"], scenario_id
        assert results[scenario_id]["metrics"]["throughput_tok_s"]["value"] > 0


def test_an_sd_engine_after_the_killed_one_measures_ok_and_valid(faulty_run):
    done, run_dir, results, _ = faulty_run
    assert len(json.loads((run_dir / "run.json").read_text())["engine_keys"]) == 7
    assert done.stdout.index(f"] {HEALTHY_SD}") > done.stdout.index(f"] {KILLED[-1]}")  # progress lines
    result = results[HEALTHY_SD]
    assert result["status"] == "ok" and result["validity"]["valid"], result["validity"]
    assert result["metrics"]["speedup"]["value"] > 0
    assert result["metrics"]["lossless_fraction"]["value"] == 1.0


def test_a_killed_engine_fails_the_scenarios_of_its_key_only(faulty_run):
    done, _, results, _ = faulty_run
    for scenario_id in KILLED:
        assert results[scenario_id]["status"] == "error"
        assert results[scenario_id]["error_kind"] == "engine"
        assert "engine process died during generate (killed by signal 9)" in results[scenario_id]["error"]
    assert f"FAILED tests_perf/test_speculative_decoding.py::test_scenario[{KILLED[0]}]" in done.stdout


def test_a_hung_request_is_ended_by_the_scenario_time_limit(faulty_run):
    _, _, results, _ = faulty_run
    first, second = (results[s] for s in HUNG)
    assert first["error_kind"] == "timeout"
    assert f"did not finish within its {LIMIT_S:g} s limit; engine killed" in first["error"]
    assert second["status"] == "error" and second["error"] == first["error"]  # not started again


def test_an_engine_without_room_for_one_request_fails_to_start_with_the_cause(faulty_run):
    _, _, results, _ = faulty_run
    for scenario_id in NO_ROOM:
        error = results[scenario_id]["error"]
        assert results[scenario_id]["status"] == "error", scenario_id
        assert "\n" not in error
        assert error.startswith("ValueError: "), error  # vLLM's own words, e.g.
        assert "memory for the cache blocks" in error or "KV cache" in error, error  # per vLLM version


def test_the_next_engine_key_started_after_each_failure(faulty_run):
    """The failing keys are not last: engines after them started and measured."""
    _, run_dir, results, _ = faulty_run
    stats = json.loads((run_dir / "run.json").read_text())["stats"]
    assert stats["engine_starts"] == 7  # one per engine key, none restarted
    assert stats["errors"] == len(KILLED + HUNG + NO_ROOM)


def test_baselines_are_written_only_from_healthy_results(faulty_run):
    done, _, _, store = faulty_run
    assert {p.stem for p in store.glob("*/*.json")} == set(HEALTHY)
    refused = "baseline kept: tiny-llama-eagle3-k3-bs1-instructcoder: refusing to write a baseline"
    assert f"{refused} from a result with status 'error'" in done.stdout


def test_the_report_shows_every_failure(faulty_run):
    _, run_dir, results, _ = faulty_run
    html = (run_dir / "index.html").read_text()
    for scenario_id in KILLED + HUNG + NO_ROOM:
        assert scenario_id in html
    assert "killed by signal 9" in html
