"""Unit tests for specperf.judge.metrics: counter arithmetic, acceptance, lossless fraction, summaries."""

from __future__ import annotations

import pytest

from specperf.judge.metrics import (
    HIGHER,
    LOWER,
    METRICS,
    acceptance,
    counter_delta,
    lossless_fraction,
    output_hash,
    sample_summary,
    sum_counters,
)
from specperf.records import Counters


def snapshot(drafts, draft_tokens, accepted, per_pos):
    """vLLM's cumulative counters as run.engines.process.read_spec_counters reads them."""
    return {"drafts": drafts, "draft_tokens": draft_tokens, "accepted": accepted, "accepted_per_pos": per_pos}


def counted(drafts, draft_tokens, accepted, per_pos):
    """The counters' change over some calls, as a round holds it."""
    return Counters(**snapshot(drafts, draft_tokens, accepted, per_pos))


def test_metric_specs_are_consistent():
    assert set(METRICS) == {
        "throughput_tok_s",
        "speedup",
        "tpot_speedup",
        "mean_acceptance_length",
        "request_mean_acceptance_length",
        "draft_acceptance_rate",
        "per_position_acceptance",
        "request_per_position_acceptance",
        "lossless_fraction",
        "distribution_match_p",
        *(f"{latency}_p{p}_ms" for latency in ("ttft", "tpot", "itl") for p in (50, 99)),
    }
    assert all(METRICS[f"ttft_p{p}_ms"].direction == LOWER for p in (50, 99))  # a latency: lower is better
    assert METRICS["tpot_speedup"].direction == HIGHER  # a ratio of latencies: higher is better
    for name, spec in METRICS.items():
        assert spec.name == name
        assert spec.direction in (HIGHER, LOWER)
        assert spec.test in ("mannwhitney", "threshold", "absolute")
        assert 0 <= spec.rel_tolerance < 1
    assert METRICS["throughput_tok_s"].test == METRICS["speedup"].test == "mannwhitney"
    assert METRICS["mean_acceptance_length"].test == "threshold"
    assert METRICS["lossless_fraction"].rel_tolerance == 0.0
    assert METRICS["distribution_match_p"].test == "absolute" and METRICS["distribution_match_p"].deterministic


def test_counter_delta():
    before = snapshot(10, 30, 12, [6, 4, 2])
    after = snapshot(25, 75, 40, [14, 10, 6])
    assert counter_delta(before, after) == counted(15, 45, 28, [8, 6, 4])


def test_counter_delta_with_positions_appearing_later():
    # the per-position vector is absent (or shorter) before the first draft
    before = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
    after = snapshot(4, 12, 5, [3, 2, 0])
    assert counter_delta(before, after) == counted(4, 12, 5, [3, 2, 0])
    assert counter_delta(snapshot(1, 3, 1, [1]), after).accepted_per_pos == [2, 2, 0]


def test_counter_delta_of_equal_snapshots_is_zero():
    same = snapshot(7, 21, 9, [5, 3, 1])
    assert counter_delta(same, dict(same)) == counted(0, 0, 0, [0, 0, 0])


def test_sum_counters():
    total = sum_counters([counted(10, 30, 12, [6, 4, 2]), counted(5, 15, 3, [2, 1]), counted(1, 3, 0, [])])
    assert total == counted(16, 48, 15, [8, 5, 2])


def test_sum_counters_of_nothing():
    assert sum_counters([]) == counted(0, 0, 0, [])


def test_sum_counters_does_not_alias_its_input():
    first = counted(1, 3, 1, [1, 0, 0])
    sum_counters([first, counted(1, 3, 2, [1, 1, 0])])
    assert first.accepted_per_pos == [1, 0, 0]


def test_acceptance():
    result = acceptance(counted(100, 300, 150, [70, 50, 30]))
    assert result["mean_acceptance_length"] == pytest.approx(2.5)  # 1 + 150 / 100
    assert result["draft_acceptance_rate"] == pytest.approx(0.5)  # 150 / 300
    assert result["per_position_acceptance"] == pytest.approx([0.7, 0.5, 0.3])


def test_acceptance_with_k1():
    result = acceptance(counted(8, 8, 2, [2]))
    assert result["mean_acceptance_length"] == pytest.approx(1.25)
    assert result["draft_acceptance_rate"] == pytest.approx(0.25)
    assert result["per_position_acceptance"] == pytest.approx([0.25])


def test_acceptance_all_rejected():
    result = acceptance(counted(10, 30, 0, [0, 0, 0]))
    assert result["mean_acceptance_length"] == 1.0
    assert result["draft_acceptance_rate"] == 0.0
    assert result["per_position_acceptance"] == [0.0, 0.0, 0.0]


def test_acceptance_without_drafts_is_none():
    # n-gram can find no match at all: no drafts, nothing to divide by
    assert acceptance(counted(0, 0, 0, [])) == {
        "mean_acceptance_length": None,
        "draft_acceptance_rate": None,
        "per_position_acceptance": None,
    }


def test_lossless_fraction():
    reference = [[1, 2, 3], [4, 5], [6]]
    assert lossless_fraction([[1, 2, 3], [4, 5], [6]], reference) == 1.0
    assert lossless_fraction([[1, 2, 3], [4, 9], [6]], reference) == pytest.approx(2 / 3)
    assert lossless_fraction([[1, 2], [4, 5, 7], [7]], reference) == 0.0
    hashes = [output_hash(ids) for ids in reference]
    assert lossless_fraction([output_hash(ids) for ids in ([1, 2, 3], (4, 5), [6])], hashes) == 1.0
    assert lossless_fraction([output_hash(ids) for ids in ([1, 2, 3], [4, 5, 0], [6])], hashes) == pytest.approx(2 / 3)
    assert output_hash([1, 23]) != output_hash([12, 3])


def test_lossless_fraction_length_mismatch():
    with pytest.raises(ValueError, match="2 outputs against 3 reference outputs"):
        lossless_fraction([[1], [2]], [[1], [2], [3]])


def test_sample_summary():
    summary = sample_summary([10.0, 12.0, 11.0, 14.0, 13.0])
    assert summary["n"] == 5
    assert summary["median"] == 12.0
    assert summary["mean"] == pytest.approx(12.0)
    assert (summary["min"], summary["max"]) == (10.0, 14.0)
    assert summary["stdev"] == pytest.approx(1.5811388, rel=1e-6)
    assert summary["cv"] == pytest.approx(1.5811388 / 12.0, rel=1e-6)


def test_sample_summary_even_count_median():
    assert sample_summary([1.0, 2.0, 3.0, 10.0])["median"] == 2.5


def test_sample_summary_single_and_empty():
    single = sample_summary([7.0])
    assert single["n"] == 1 and single["median"] == 7.0 and single["stdev"] == 0.0 and single["cv"] == 0.0
    assert sample_summary([]) == {"n": 0}
    assert sample_summary([0.0, 0.0])["cv"] is None
