"""The paired comparison of alternating rounds: drift cancels, a real change is found with its interval."""

from __future__ import annotations

import math
import random

import pytest

from specperf.judge.paired import MIN_PAIRS, compare_paired, hodges_lehmann, ratios


def drifting(n: int, slowdown: float, seed: int = 1) -> tuple[list[float], list[float]]:
    """Pairs of throughputs on a machine that slows by 40% over the run, with 1% noise per round."""
    rng = random.Random(seed)
    current, candidate = [], []
    for i in range(n):
        machine = 100.0 * (1 - 0.4 * i / n)
        current.append(machine * rng.gauss(1, 0.01))
        candidate.append(machine * (1 - slowdown) * rng.gauss(1, 0.01))
    return current, candidate


def test_drift_alone_is_no_regression():
    current, candidate = drifting(10, 0.0)
    verdict = compare_paired("throughput_tok_s", current, candidate)
    assert verdict.status == "pass" and abs(verdict.change) < 0.02
    assert verdict.ci_low < 0 < verdict.ci_high and verdict.judged_by == "paired"


def test_a_five_percent_slowdown_under_drift_is_a_regression_with_its_interval():
    current, candidate = drifting(10, 0.05)
    verdict = compare_paired("throughput_tok_s", current, candidate)
    assert verdict.status == "regression"
    assert verdict.change == pytest.approx(-0.05, abs=0.01)
    assert verdict.ci_low <= verdict.change <= verdict.ci_high < 0
    assert verdict.p_value < 0.01
    assert "[-" in verdict.line() and "p-value" in verdict.line()


def test_a_faster_candidate_is_an_improvement():
    current, candidate = drifting(10, -0.08)
    assert compare_paired("speedup", current, candidate).status == "improvement"


def test_a_change_within_tolerance_passes_and_too_few_pairs_are_invalid():
    current, candidate = drifting(10, 0.02)
    assert compare_paired("throughput_tok_s", current, candidate).status == "pass"
    few = compare_paired("throughput_tok_s", current[:MIN_PAIRS - 1], candidate[:MIN_PAIRS - 1])
    assert few.status == "invalid" and "too few" in few.note


def test_broken_pairs_are_left_out():
    assert ratios([100.0, 0.0, float("nan"), 50.0], [90.0, 10.0, 5.0, 55.0]) == [0.9, 1.1]


def test_identical_rounds_pass_with_a_point_interval():
    verdict = compare_paired("throughput_tok_s", [100.0] * 6, [100.0] * 6)
    assert verdict.status == "pass" and verdict.ci_low == verdict.ci_high == 0


def test_a_significant_change_whose_interval_includes_no_change_passes():
    # Six pairs 15% slower, four 5% faster: the ranks are significant, the estimate is -5%, but
    # resamples with seven or more faster pairs (5.5% of them) put the estimate above no change.
    current = [100.0] * 10
    candidate = [100 * math.exp(-0.15)] * 6 + [100 * math.exp(0.05)] * 4
    verdict = compare_paired("throughput_tok_s", current, candidate)
    assert verdict.p_value < 0.05 and verdict.ci_low < 0 <= verdict.ci_high
    assert verdict.status == "pass" and "interval includes no change" in verdict.note


def test_the_change_is_the_hodges_lehmann_estimate_of_the_log_ratios():
    # log ratios 0, 0, 0, 0.3, 0.3: Walsh averages six 0, six 0.15, three 0.3 -> 0.15 (the plain median: 0)
    verdict = compare_paired("throughput_tok_s", [1.0] * 5, [1.0, 1.0, 1.0, math.exp(0.3), math.exp(0.3)])
    assert verdict.change == pytest.approx(math.exp(0.15) - 1)
    assert hodges_lehmann([0.0, 0.0, 0.3]) == pytest.approx(0.075)
