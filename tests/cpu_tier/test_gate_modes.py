"""The upgrade gate's other pairings on real vLLM CPU engines: blocks of rounds with one engine
alive at a time (--gate-blocks), and the paired speedup, where the n-gram engine and its no-SD
reference stay up side by side (paired_reference).  Apart from test_upgrade_gate.py, so that the
CPU tier's two workers can run them beside its gates; on the tiny Llama, whose rounds take a fifth
of SmolLM2's time at batch 1 (these tests check the pairings' workings, not a speed).
"""

from __future__ import annotations

import sys

import pytest
from suite import PROFILES, gate_run, only_run_dir, read_results, run_suite

pytestmark = pytest.mark.cpu_tier

NGRAM = "tiny-llama-ngram-k3-bs1-instructcoder"


def test_blocks_pair_rounds_with_one_engine_alive(tmp_path_factory):
    done, _, results = gate_run(
        tmp_path_factory, sys.executable, "--gate-blocks", "4", "-k", "nosd", profile=str(PROFILES / "blocks.toml")
    )
    result = next(iter(results.values()))
    assert result["gate"]["pairing"] == "blocks of 4 rounds"
    assert len(result["rounds"]) == len(result["gate"]["current"]["rounds"]) == 8
    # judged, not invalid (two engine pairs seldom decide: one degree of freedom in their spread)
    assert result["verdict"]["status"] in ("pass", "improvement", "regression", "inconclusive")
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
    assert len({round(s / t, 9) for s, t in zip(speedups, throughputs)}) > 1  # a reference per pair
    assert result["metrics"]["lossless_fraction"]["value"] == 1.0
    assert "2 engine starts for 2 engine keys" in done.stdout  # the reference scenario reuses its engine
