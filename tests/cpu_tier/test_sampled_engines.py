"""Sampled SD on real vLLM engines: each request draws with its own seed, and its acceptance comes
back per request from vLLM's own per-request metrics, complete (it adds up to vLLM's counters) and
with its error over requests.  Behind the server: tests/cpu_tier/test_server.py."""

import pytest
from suite import PROFILES, check_request_acceptance, check_sampled_acceptance, only_run_dir, read_results, run_suite

from specperf.run.builds import fixes
from specperf.run.builds.versions import installed_vllm

pytestmark = pytest.mark.cpu_tier

PROFILE = str(PROFILES / "sampled.toml")
OFFLINE = "smollm2-135m-ngram-k3-bs4-instructcoder-t0.8-p0.95"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    done = run_suite(PROFILE, reports, tmp_path_factory.mktemp("baselines"), "--update-baselines")
    assert done.returncode == 0, done.stdout[-3000:]
    return read_results(only_run_dir(reports))


def test_every_sampled_scenario_ran_and_is_valid(results):
    assert set(results) == {OFFLINE, "smollm2-135m-nosd-bs4-instructcoder-t0.8-p0.95"}
    for result in results.values():
        assert result["status"] == "ok" and result["validity"]["valid"], result["validity"]
        assert result["scenario"]["sampling"] == {
            "temperature": 0.8,
            "top_p": 0.95,
            "top_k": 0,
            "seed": 100,
            "check_draws": 0,
        }
        # the engine ran with the vLLM fixes its vLLM wants (run/builds/fixes.py), and says so
        assert result["provenance"].get("vllm_fixes", "") == "; ".join(fixes.wanted(*installed_vllm()))


def test_replicas_of_a_prompt_draw_different_outputs(results):
    """Greedy, the four replicas of a prompt in one call give one output; sampled, each its own seed."""
    hashes = results[OFFLINE]["output_hashes"]
    replicas = [hashes[i : i + 4] for i in range(0, len(hashes), 4)]
    assert len(replicas) == 2
    assert any(len(set(group)) > 1 for group in replicas), replicas


def test_per_request_counts_add_up_to_vllms_counters(results):
    check_request_acceptance(results[OFFLINE], requests=8)


def test_sampled_acceptance_has_both_weightings_with_their_errors(results):
    check_sampled_acceptance(results[OFFLINE])
