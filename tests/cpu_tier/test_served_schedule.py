"""vLLM's dynamic SD behind the server, as a profile's served cells run it: the schedule's server
paired with the no-SD server, and vLLM's counters showing the k the schedule picks by the running
batch (four requests in flight: k 1; alone: k 5)."""

from __future__ import annotations

import pytest
from suite import PROFILES, only_run_dir, read_results, run_suite

pytestmark = pytest.mark.cpu_tier

CLOSED = "smollm2-135m-ngram-dynamic-c4-instructcoder-serve"
POISSON = "smollm2-135m-ngram-dynamic-c4-r8-instructcoder-serve"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    done = run_suite(str(PROFILES / "serve-dynamic.toml"), reports, tmp_path_factory.mktemp("baselines"))
    assert done.returncode == 0, done.stdout[-3000:]
    return read_results(only_run_dir(reports))


@pytest.mark.parametrize("scenario_id", [CLOSED, POISSON])
def test_a_served_schedule_runs_paired_with_the_no_sd_server(results, scenario_id):
    result = results[scenario_id]
    assert result["status"] == "ok" and result["validity"]["valid"], result["validity"]
    assert result["scenario"]["paired_reference"]
    assert len(result["metrics"]["speedup"]["samples"]) == len(result["rounds"]) == 4  # a ratio per pair of rounds
    assert len(result["metrics"]["tpot_speedup"]["samples"]) == 4
    assert result["metrics"]["lossless_fraction"]["value"] == 1.0
    counters = result["counters"]
    assert counters["drafts"] > 0 and len(counters["accepted_per_pos"]) == 5  # the engine's k is the largest


def test_four_requests_in_flight_draft_the_schedules_k_for_four(results):
    """k 1 from two requests in flight; k 5 only where one request is left alone at the end."""
    counters = results[CLOSED]["counters"]
    assert counters["drafts"] <= counters["draft_tokens"] < 2 * counters["drafts"], counters
    poisson = results[POISSON]["counters"]
    assert poisson["drafts"] <= poisson["draft_tokens"] <= 5 * poisson["drafts"], poisson
