"""The paired comparison of alternating rounds: drift cancels, a real change is found with its interval."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from scipy import stats

from specperf.judge.paired import (
    MIN_PAIRS,
    PairedChange,
    compare_paired,
    hodges_lehmann,
    paired_change,
    ratios,
    three_way,
)


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
    assert verdict.ci_high < 0  # the interval excludes no change
    assert verdict.p_value < 0.01
    assert "[-" in verdict.line() and "p-value" in verdict.line()


def test_the_interval_holds_a_known_change_as_often_as_it_claims():
    """200 runs of 10 pairs under drift, the candidate truly 5% slower: the 95% interval holds -5% in
    about 95% of them, and its half-width is what 1% noise per round implies, t(9) x sqrt(2) x 1% / sqrt(10)."""
    held, halves = 0, []
    for seed in range(200):
        verdict = compare_paired("throughput_tok_s", *drifting(10, 0.05, seed))
        held += verdict.ci_low <= -0.05 <= verdict.ci_high
        halves.append((math.log1p(verdict.ci_high) - math.log1p(verdict.ci_low)) / 2)
    assert 0.90 <= held / 200 <= 0.99
    assert statistics.fmean(halves) == pytest.approx(
        stats.t.ppf(0.975, 9) * math.sqrt(2) * 0.01 / math.sqrt(10), rel=0.1
    )


@pytest.mark.parametrize("seed", range(6))
def test_without_a_floor_the_interval_is_t_over_the_engine_pairs_estimates(seed):
    """Four engine pairs of two pairs each (a Hodges-Lehmann estimate of two values is their mean):
    with no prior from the profile, the interval is t with 3 degrees of freedom over the spread of
    the four estimates, whatever the engine pairs' offsets."""
    rng = random.Random(seed)
    offsets = [rng.gauss(0, (0.0, 0.03)[seed % 2]) for _ in range(4)]
    clusters = [c for c in range(4) for _ in range(2)]
    logs = [offsets[c] + rng.gauss(0, 0.01) for c in clusters]
    verdict = compare_paired("throughput_tok_s", [100.0] * 8, [100 * math.exp(x) for x in logs], clusters=clusters)
    estimates = [statistics.fmean(logs[2 * c : 2 * c + 2]) for c in range(4)]
    half = stats.t.ppf(0.975, 3) * statistics.stdev(estimates) / 2
    assert math.log1p(verdict.ci_high) - math.log1p(verdict.ci_low) == pytest.approx(2 * half, rel=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_a_higher_floor_never_narrows_the_interval(seed):
    rng = random.Random(seed)
    sizes = [rng.randint(1, 8) for _ in range(rng.randint(1, 8))]
    clusters = [c for c, size in enumerate(sizes) for _ in range(size)]
    offsets = [rng.gauss(0, rng.choice((0.0, 0.01, 0.04))) for _ in sizes]
    logs = [offsets[c] + rng.gauss(0, rng.choice((0.005, 0.05))) for c in clusters]
    widths = [paired_change(logs, clusters, floor).interval() for floor in (0.001, 0.01, 0.02, 0.03, 0.1)]
    halves = [high - low for low, high in widths]
    assert halves == sorted(halves) and halves[0] < halves[-1]


def test_a_faster_candidate_is_an_improvement():
    current, candidate = drifting(10, -0.08)
    assert compare_paired("speedup", current, candidate).status == "improvement"


def test_a_change_within_tolerance_passes_and_too_few_pairs_are_invalid():
    current, candidate = drifting(10, 0.02)
    assert compare_paired("throughput_tok_s", current, candidate).status == "pass"
    few = compare_paired("throughput_tok_s", current[: MIN_PAIRS - 1], candidate[: MIN_PAIRS - 1])
    assert few.status == "invalid" and "too few" in few.note


def test_broken_pairs_are_left_out():
    assert ratios([100.0, 0.0, float("nan"), 50.0], [90.0, 10.0, 5.0, 55.0]) == [0.9, 1.1]


def test_identical_rounds_pass_with_a_point_interval():
    verdict = compare_paired("throughput_tok_s", [100.0] * 6, [100.0] * 6)
    assert verdict.status == "pass" and verdict.ci_low == verdict.ci_high == 0


def test_an_interval_that_holds_both_no_change_and_more_than_the_tolerance_is_inconclusive():
    # Log ratios -0.05 -+ 0.075, ten pairs on one engine pair: the 95% interval reaches from beyond
    # -3% to beyond no change: neither shown within the tolerance nor shown worse.
    current = [100.0] * 10
    candidate = [100 * math.exp(-0.05 + 0.075 * (-1) ** i) for i in range(10)]
    verdict = compare_paired("throughput_tok_s", current, candidate)
    assert verdict.ci_low < -0.03 and 0 <= verdict.ci_high
    assert verdict.status == "inconclusive" and "more engine pairs would tell" in verdict.note
    assert verdict.p_value == pytest.approx(paired_change([math.log(c / 100) for c in candidate]).p_value(lower=True))


@pytest.mark.parametrize(
    ("interval", "status"),
    [
        ((-0.025, -0.005), "pass"),  # worse, but shown within the tolerance
        ((-0.028, 0.01), "pass"),
        ((-0.05, -0.01), "regression"),  # shown worse, and it may be beyond the tolerance
        ((-0.05, 0.01), "inconclusive"),
        ((0.005, 0.025), "pass"),  # better, within the tolerance
        ((0.01, 0.05), "improvement"),
        ((-0.01, 0.05), "pass"),  # never worse than the tolerance
    ],
)
def test_the_three_way_rule_on_a_throughputs_interval(interval, status):
    low, high = interval  # a throughput: lower is worse
    assert three_way(-high, -low, 0.03) == status


def test_one_engine_pair_without_a_floor_is_the_one_sample_t_test_with_the_estimates_own_variance():
    logs = [-0.07, -0.05, -0.04, -0.02, 0.0, -0.03, -0.01, -0.06]  # symmetric about -0.035: HL = mean
    change = paired_change(logs)
    assert change.log_change == pytest.approx(-0.035) and change.df == 7
    # a Hodges-Lehmann estimate of 8 normal values varies 1.0728 times as much as their mean
    scale = stats.sem(logs) * math.sqrt(1.0728)
    assert change.p_value(lower=True) == pytest.approx(stats.t.cdf(-0.035 / scale, 7))
    assert change.interval() == pytest.approx(stats.t.interval(0.95, 7, loc=-0.035, scale=scale))
    assert change.between_engines is None and change.between_pairs == pytest.approx(statistics.stdev(logs))


def test_clusters_worked_by_hand():
    # Three engine pairs of two pairs each: cluster estimates 0.02, 0.06, 0.00 (mean 0.02667), their
    # variance 9.333e-4; pooled pair noise 6e-4 / 3 = 2e-4, so one cluster's estimate varies by at
    # least 1e-4 from the pairs alone.  The spread wins: se = sqrt(9.333e-4 / 3), df = 2.
    logs, clusters = [0.01, 0.03, 0.05, 0.07, -0.01, 0.01], [0, 0, 1, 1, 2, 2]
    change = paired_change(logs, clusters)
    assert change.log_change == pytest.approx(0.08 / 3)
    assert change.se == pytest.approx(math.sqrt(9.3333e-4 / 3), rel=1e-4) and change.df == 2
    assert change.between_engines == pytest.approx(math.sqrt(8.3333e-4), rel=1e-4)
    assert change.between_pairs == pytest.approx(math.sqrt(2e-4))
    # An offset floor of 5%: the prior 0.05^2 + 2e-4 / 2 = 0.0026 per cluster, worth 3 clusters (the
    # pair noise behind it has 3 degrees of freedom), pooled with the spread's 2: 0.0019333, df = 5
    floored = paired_change(logs, clusters, offset_floor=0.05)
    assert floored.se == pytest.approx(math.sqrt((3 * 0.0026 + 2 * 9.3333e-4) / 5 / 3), rel=1e-4)
    assert floored.df == 5
    assert floored.log_change == change.log_change


def test_pairs_that_share_engines_are_not_independent():
    # Four engine pairs whose offsets differ by several percent, each with almost no pair noise:
    # sixteen pairs taken as independent would call -4% certain; per engine pair it is not.
    offsets = [-0.10, -0.06, 0.0, 0.0]
    logs = [o + 0.002 * (-1) ** j for o in offsets for j in range(4)]
    clusters = [c for c in range(4) for _ in range(4)]
    current = [100.0] * 16
    candidate = [100 * math.exp(x) for x in logs]
    naive = compare_paired("throughput_tok_s", current, candidate)
    clustered = compare_paired("throughput_tok_s", current, candidate, clusters=clusters)
    assert naive.status == "regression"
    assert clustered.status == "inconclusive" and clustered.ci_low < -0.03 and 0 < clustered.ci_high
    assert clustered.change == pytest.approx(math.exp(-0.04) - 1, abs=1e-6)
    assert clustered.between_engines == pytest.approx(statistics.stdev(offsets), rel=0.01)


def test_a_change_relative_to_another_adds_both_errors():
    a = PairedChange(-0.02, 0.01, 10, None, None, 4, 16)
    b = PairedChange(0.03, 0.02, 5, None, None, 4, 16)
    diff = a.minus(b)
    assert diff.log_change == pytest.approx(-0.05) and diff.se == pytest.approx(math.sqrt(5e-4))
    assert diff.df == pytest.approx(5e-4**2 / (1e-4**2 / 10 + 4e-4**2 / 5))  # Welch-Satterthwaite


def test_the_change_is_the_hodges_lehmann_estimate_of_the_log_ratios():
    # log ratios 0, 0, 0, 0.3, 0.3: Walsh averages six 0, six 0.15, three 0.3 -> 0.15 (the plain median: 0)
    verdict = compare_paired("throughput_tok_s", [1.0] * 5, [1.0, 1.0, 1.0, math.exp(0.3), math.exp(0.3)])
    assert verdict.change == pytest.approx(math.exp(0.15) - 1)
    assert hodges_lehmann([0.0, 0.0, 0.3]) == pytest.approx(0.075)


def test_the_gates_on_record_estimate_the_offset_between_engines_whatever_each_gate_changed():
    from specperf.judge.paired import recorded_offset_of

    rng = random.Random(7)

    def one_gate(offset_sd: float, change: float) -> tuple[list[float], list[int]]:
        """8 engine pairs of 6 pairs: the engine pair's offset and 7.5% pair noise on the change."""
        ratios, clusters = [], []
        for cluster in range(8):
            offset = rng.gauss(0, offset_sd)
            ratios += [change + offset + rng.gauss(0, 0.075) for _ in range(6)]
            clusters += [cluster] * 6
        return ratios, clusters

    found = recorded_offset_of([one_gate(0.03, rng.choice([0.0, -0.05, 0.10])) for _ in range(40)])
    assert found is not None and (found.gates, found.df) == (40, 280) and 0.025 < found.sd < 0.035
    quiet = recorded_offset_of([one_gate(0.0, 0.0) for _ in range(40)])
    assert quiet is not None and quiet.sd < 0.02  # the pairs' noise is not taken for an offset
    assert recorded_offset_of([([0.1, 0.2], [0, 1])]) is None  # no pair noise to tell it from


def test_the_gates_on_record_only_raise_the_profiles_floor_and_the_judge_says_which_floor():
    from specperf.judge.gate import GateJudge
    from specperf.judge.paired import RecordedOffset
    from specperf.judge.rules import Rules

    rules = Rules(gate_engine_offset=0.02)
    assert GateJudge().rules(rules) == rules
    assert GateJudge().floor_note(rules) == "engine-offset floor 2.0%, the profile's (no gates on record)"
    higher = GateJudge(recorded=RecordedOffset(0.03, 12, 3))
    assert higher.rules(rules).gate_engine_offset == 0.03
    assert higher.floor_note(rules) == (
        "engine-offset floor 3.0% over the 3 gates on record (12 degrees of freedom), above the profile's 2.0%"
    )
    lower = GateJudge(recorded=RecordedOffset(0.01, 40, 8))
    assert lower.rules(rules) == rules and "the profile's (the history says 1.0% over the 8" in lower.floor_note(rules)
    few = GateJudge(recorded=RecordedOffset(0.05, 9, 3))  # worth less than the prior: not used
    assert few.rules(rules) == rules and "too few to count (under 10)" in few.floor_note(rules)
