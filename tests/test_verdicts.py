"""Unit tests for specperf.judge.verdicts: per-metric and per-scenario judgement against a baseline."""

from __future__ import annotations

import pytest
from records import THROUGHPUT, make_record, make_scenario, reference_scenario, scaled_counters

from specperf.judge import verdicts as v
from specperf.judge.baselines import baseline_from_result
from specperf.judge.metrics import HIGHER, LOWER, METRICS, MetricSpec, metric_samples
from specperf.judge.rules import Rules
from specperf.judge.verdicts import ALPHA, MIN_ROUNDS, compare_metric, judge, spec_for
from specperf.records import Baseline, Metric, MetricVerdict, Verdict
from specperf.status import ERROR, IMPROVEMENT, INCOMPATIBLE, INVALID, NO_BASELINE, PASS, REGRESSION, SEVERITY, worst

BASE = [100.0, 101.0, 99.0, 100.5, 99.5]  # median 100
SPREAD = [20.0, 50.0, 100.0, 150.0, 180.0]  # median 100, very noisy
OVERLAPPING = [10.0, 40.0, 60.0, 170.0, 190.0]  # median 60, mixed in with SPREAD


def scaled(samples, factor):
    return [s * factor for s in samples]


# --------------------------------------------------------------------------
# compare_metric
# --------------------------------------------------------------------------


@pytest.mark.parametrize("metric", sorted(m for m in METRICS if METRICS[m].test != "absolute"))
def test_direction_of_every_metric(metric):
    spec = METRICS[metric]
    base = scaled(BASE, 0.025 if spec.least >= 1 else 0.005)  # 2.5 suits a length, 0.5 a fraction
    drop, rise = compare_metric(metric, base, scaled(base, 0.8)), compare_metric(metric, base, scaled(base, 1.2))
    if spec.direction == HIGHER:
        assert (drop.status, rise.status) == (REGRESSION, IMPROVEMENT)
    else:
        assert (drop.status, rise.status) == (IMPROVEMENT, REGRESSION)
    assert drop.change == pytest.approx(-0.2) and rise.change == pytest.approx(0.2)
    assert drop.tolerance == spec.rel_tolerance
    if spec.test == "mannwhitney":
        assert drop.p_value is not None and drop.p_value < ALPHA
    else:
        assert drop.p_value is None


def test_lower_is_better_metric(monkeypatch):
    monkeypatch.setitem(METRICS, "latency_s", MetricSpec("latency_s", "s", LOWER, 0.05, "mannwhitney", "test"))
    slower = compare_metric("latency_s", BASE, scaled(BASE, 1.4))
    faster = compare_metric("latency_s", BASE, scaled(BASE, 0.6))
    assert slower.status == REGRESSION and slower.p_value < ALPHA
    assert faster.status == IMPROVEMENT and faster.p_value < ALPHA


def test_separated_samples_large_drop_is_regression():
    verdict = compare_metric("throughput_tok_s", BASE, scaled(BASE, 0.6))
    assert verdict.status == REGRESSION
    assert verdict.baseline == 100.0 and verdict.current == pytest.approx(60.0)
    assert verdict.change == pytest.approx(-0.4)
    assert verdict.p_value == pytest.approx(1 / 252)  # exact U test, 5 vs 5, complete separation
    assert verdict.note == ""


def test_overlapping_samples_same_shift_is_not_regression():
    verdict = compare_metric("throughput_tok_s", SPREAD, OVERLAPPING)
    assert verdict.change == pytest.approx(-0.4)  # the same median shift as above
    assert verdict.status == PASS
    assert verdict.p_value is not None and verdict.p_value >= ALPHA
    assert "not significant" in verdict.note


def test_significant_change_within_tolerance_passes():
    verdict = compare_metric("throughput_tok_s", BASE, scaled(BASE, 0.97))
    assert verdict.status == PASS and verdict.p_value is None


def test_change_exactly_at_tolerance_passes():
    assert compare_metric("throughput_tok_s", [100.0] * 5, [95.0] * 5).status == PASS
    assert compare_metric("mean_acceptance_length", [2.0], [1.9]).status == PASS


@pytest.mark.parametrize("n", range(1, MIN_ROUNDS))
def test_too_few_rounds_is_invalid(n):
    verdict = compare_metric("throughput_tok_s", BASE[:n], scaled(BASE[:n], 0.6))
    assert verdict.status == INVALID and verdict.p_value is None
    assert str(MIN_ROUNDS) in verdict.note
    # on either side
    assert compare_metric("throughput_tok_s", BASE, scaled(BASE[:n], 0.6)).status == INVALID
    assert compare_metric("throughput_tok_s", BASE[:n], scaled(BASE, 0.6)).status == INVALID


def test_min_rounds_separated_is_enough():
    verdict = compare_metric("throughput_tok_s", BASE[:MIN_ROUNDS], scaled(BASE[:MIN_ROUNDS], 0.6))
    assert verdict.status == REGRESSION and verdict.p_value < ALPHA


def test_too_few_rounds_within_tolerance_still_passes():
    assert compare_metric("throughput_tok_s", [100.0], [99.0]).status == PASS


def test_threshold_metric_single_sample():
    assert compare_metric("mean_acceptance_length", [2.5], [2.5 * 0.94]).status == REGRESSION
    assert compare_metric("mean_acceptance_length", [2.5], [2.5 * 0.96]).status == PASS
    assert compare_metric("draft_acceptance_rate", [0.5], [0.47]).status == REGRESSION
    assert compare_metric("draft_acceptance_rate", [0.5], [0.48]).status == PASS
    assert compare_metric("acceptance_pos2", [0.3], [0.28]).status == REGRESSION
    assert compare_metric("acceptance_pos2", [0.3], [0.29]).status == PASS
    assert compare_metric("mean_acceptance_length", [2.5], [2.7]).status == IMPROVEMENT


def test_lossless_has_no_tolerance():
    lost = compare_metric("lossless_fraction", [1.0], [0.875])
    assert lost.status == REGRESSION and lost.tolerance == 0.0
    assert compare_metric("lossless_fraction", [1.0], [1.0]).status == PASS


def test_tolerance_override():
    assert compare_metric("mean_acceptance_length", [2.5], [2.35], tolerance=0.1).status == PASS
    assert compare_metric("throughput_tok_s", BASE, scaled(BASE, 0.8), tolerance=0.25).status == PASS
    assert compare_metric("throughput_tok_s", BASE, scaled(BASE, 0.97), tolerance=0.01).status == REGRESSION
    assert compare_metric("throughput_tok_s", BASE, scaled(BASE, 0.8), tolerance=0.25).tolerance == 0.25


def test_missing_samples():
    empty = compare_metric("throughput_tok_s", BASE, [])
    assert empty.status == INVALID and empty.current is None
    fresh = compare_metric("throughput_tok_s", [], BASE)
    assert fresh.status == NO_BASELINE and fresh.current == 100.0 and fresh.baseline is None


def test_zero_baseline():
    assert compare_metric("lossless_fraction", [0.0], [0.0]).status == PASS
    assert compare_metric("lossless_fraction", [0.0], [1.0]).status == IMPROVEMENT


def test_zero_baseline_has_no_infinite_change(monkeypatch):
    same = compare_metric("lossless_fraction", [0.0], [0.0])
    assert same.change == 0.0 and same.note == ""
    gained = compare_metric("lossless_fraction", [0.0], [1.0])
    assert gained.baseline == 0.0 and gained.current == 1.0
    assert gained.change is None and gained.note == "baseline is 0"
    assert gained.line() == (
        "lossless_fraction: improvement: baseline 0, current 1, change n/a, tolerance 0.0%, p-value n/a (baseline is 0)"
    )
    # the direction still decides: from 0 to anything is worse for a lower-is-better metric
    monkeypatch.setitem(METRICS, "queue_s", MetricSpec("queue_s", "s", LOWER, 0.05, "threshold", "test"))
    lost = compare_metric("queue_s", [0.0], [0.5])
    assert lost.status == REGRESSION and lost.change is None and lost.note == "baseline is 0"
    # the verdict stays storable: a record refuses inf, and this one survives a JSON round trip
    assert MetricVerdict.model_validate(gained.to_json()) == gained


def test_spec_for_positions():
    assert spec_for("acceptance_pos0") is METRICS["per_position_acceptance"]
    assert spec_for("acceptance_pos12") is METRICS["per_position_acceptance"]
    assert spec_for("speedup") is METRICS["speedup"]
    with pytest.raises(KeyError):
        spec_for("latency")


def test_rules_tolerance():
    rules = Rules({"per_position_acceptance": 0.2, "throughput_tok_s": 0.3, "acceptance_pos1": 0.4})
    assert rules.tolerance("acceptance_pos0") == 0.2
    assert rules.tolerance("acceptance_pos1") == 0.4
    assert rules.tolerance("throughput_tok_s") == 0.3
    assert rules.tolerance("speedup") is None


# --------------------------------------------------------------------------
# metric_samples
# --------------------------------------------------------------------------


def test_metric_samples_flattens_positions_and_drops_none():
    flat = metric_samples(
        {
            "throughput_tok_s": Metric(value=2.0, samples=[1.0, 2.0, 3.0]),
            "mean_acceptance_length": Metric(value=2.0, samples=[2.0, None, 2.2]),
            "per_position_acceptance": Metric(value=[0.7, 0.5], samples=[[0.7, 0.5], None, [0.6, 0.4]]),
            "speedup": Metric(value=None),  # no samples at all
            "draft_acceptance_rate": Metric(value=None, samples=[None, None]),
        }
    )
    assert flat == {
        "throughput_tok_s": [1.0, 2.0, 3.0],
        "mean_acceptance_length": [2.0, 2.2],
        "acceptance_pos0": [0.7, 0.6],
        "acceptance_pos1": [0.5, 0.4],
        "speedup": [],
        "draft_acceptance_rate": [],
    }


def test_metric_samples_of_a_record():
    flat = metric_samples(make_record().metrics)
    assert set(flat) == {
        "throughput_tok_s",
        "speedup",
        "mean_acceptance_length",
        "draft_acceptance_rate",
        "acceptance_pos0",
        "acceptance_pos1",
        "acceptance_pos2",
        "lossless_fraction",
    }
    assert flat["acceptance_pos0"] == pytest.approx([0.7] * 5)
    assert flat["mean_acceptance_length"] == pytest.approx([2.5] * 5)


# --------------------------------------------------------------------------
# judge: every scenario status
# --------------------------------------------------------------------------


def baseline_of(**kwargs):
    return baseline_from_result(make_record(**kwargs))


def statuses(verdict):
    return {m.metric: m.status for m in verdict.metrics}


def test_judge_pass():
    verdict = judge(make_record(), baseline_of())
    assert verdict.status == PASS and not verdict.failed
    assert verdict.scenario_id == "tiny-llama-eagle3-k3-bs4-gsm8k"
    assert set(statuses(verdict).values()) == {PASS}
    assert "acceptance_pos2" in statuses(verdict)


def test_judge_regression_on_throughput():
    verdict = judge(make_record(throughput=scaled(THROUGHPUT, 0.6)), baseline_of())
    assert verdict.status == REGRESSION and verdict.failed
    assert statuses(verdict)["throughput_tok_s"] == REGRESSION
    assert statuses(verdict)["speedup"] == REGRESSION
    assert statuses(verdict)["mean_acceptance_length"] == PASS


def test_judge_improvement():
    verdict = judge(make_record(throughput=scaled(THROUGHPUT, 1.5)), baseline_of())
    assert verdict.status == IMPROVEMENT and not verdict.failed


def test_judge_regression_on_acceptance_position():
    # position 2 loses 20% of its accepted tokens; 30 -> 24 of 100 drafts
    counters = [{"drafts": 100, "draft_tokens": 300, "accepted": 144, "accepted_per_pos": [70, 50, 24]}] * 5
    verdict = judge(make_record(counters=counters), baseline_of())
    assert verdict.status == REGRESSION
    s = statuses(verdict)
    assert s["acceptance_pos2"] == REGRESSION
    assert s["acceptance_pos0"] == s["acceptance_pos1"] == PASS
    assert s["mean_acceptance_length"] == PASS  # 2.44 against 2.5: -2.4%
    assert s["draft_acceptance_rate"] == PASS  # 0.48 against 0.5: -4%


def test_judge_applies_scenario_tolerances():
    counters = scaled_counters(0.9)  # acceptance metrics drop by ~6-10%
    strict = judge(make_record(counters=counters), baseline_of())
    assert strict.status == REGRESSION
    assert statuses(strict)["acceptance_pos0"] == REGRESSION

    lenient = make_scenario(
        tolerances={"mean_acceptance_length": 0.2, "draft_acceptance_rate": 0.2, "per_position_acceptance": 0.2}
    )
    verdict = judge(make_record(lenient, counters=counters), baseline_of(scenario=lenient), rules=Rules.of(lenient))
    assert verdict.status == PASS
    by_metric = {m.metric: m for m in verdict.metrics}
    assert by_metric["acceptance_pos1"].tolerance == 0.2
    assert by_metric["mean_acceptance_length"].tolerance == 0.2
    assert by_metric["throughput_tok_s"].tolerance == METRICS["throughput_tok_s"].rel_tolerance


def test_judge_throughput_tolerance_override():
    lenient = make_scenario(tolerances={"throughput_tok_s": 0.5, "speedup": 0.5})
    verdict = judge(
        make_record(lenient, throughput=scaled(THROUGHPUT, 0.6)), baseline_of(scenario=lenient), rules=Rules.of(lenient)
    )
    assert verdict.status == PASS


def test_a_result_files_own_rules_never_judge_it():
    """Tolerances and informational metrics written into the result being judged play no part:
    only the rules passed in (the profile's) do."""
    lossy = make_record(lossless=0.0)
    lossy.scenario = lossy.scenario.replace(
        tolerances={"lossless_fraction": 9.0, "throughput_tok_s": 9.9}, informational=["lossless_fraction"]
    )
    verdict = judge(lossy, baseline_of())
    assert verdict.status == REGRESSION and statuses(verdict)["lossless_fraction"] == REGRESSION
    assert {m.metric: m.tolerance for m in verdict.metrics}["lossless_fraction"] == 0.0


def test_unknown_metrics_are_named_and_not_judged():
    result = make_record()
    result.metrics["bogus_metric"] = Metric(value=1.0, samples=[1.0] * 5)
    baseline = baseline_of()
    baseline.metrics["bogus_metric"] = Metric(value=2.0, samples=[2.0] * 5)
    verdict = judge(result, baseline)
    assert verdict.status == PASS and "bogus_metric" not in statuses(verdict)
    assert "not judged: unknown metric(s) bogus_metric" in verdict.note


@pytest.mark.parametrize("bad", [0.0, -100.0, 1e-300, float("nan")])
def test_a_speed_baseline_of_zero_negative_or_denormal_never_makes_a_slowdown_an_improvement(bad):
    verdict = compare_metric("throughput_tok_s", [bad] + BASE[1:], scaled(BASE, 0.6)[:1] * 5)
    assert verdict.status == INVALID and "a baseline value" in verdict.note
    verdict = compare_metric("throughput_tok_s", [bad] * 5, scaled(BASE, 0.6))
    assert verdict.status == INVALID


def test_a_rate_above_one_is_out_of_range():
    assert compare_metric("lossless_fraction", [1.0], [1.5]).status == INVALID
    assert compare_metric("lossless_fraction", [0.0], [1.0]).status == IMPROVEMENT  # a rate may be 0


def test_judge_no_baseline():
    verdict = judge(make_record(), None)
    assert verdict.status == NO_BASELINE and not verdict.failed
    assert set(statuses(verdict).values()) == {NO_BASELINE}
    assert {m.metric: m.current for m in verdict.metrics}["throughput_tok_s"] == 100.0


def test_the_distribution_checks_p_is_judged_on_its_value_with_a_baseline_or_without():
    """A p below the tolerance (0.001) says SD's draws do not follow the target's: a regression
    whatever the baseline held, even with none; above it a pass, even where the baseline's was higher."""
    assert compare_metric("distribution_match_p", [0.9], [0.0004]).status == REGRESSION
    assert compare_metric("distribution_match_p", [0.9], [0.0004]).p_value == 0.0004  # the report's p column
    assert compare_metric("distribution_match_p", [], [0.0004]).status == REGRESSION
    assert compare_metric("distribution_match_p", [0.9], [0.002]).status == PASS
    assert compare_metric("distribution_match_p", [], [0.5], tolerance=0.01).status == PASS
    assert compare_metric("distribution_match_p", [0.5], [0.005], tolerance=0.01).status == REGRESSION
    record = make_record()
    record.metrics["distribution_match_p"] = Metric(value=1e-9, samples=[1e-9])
    judged = judge(record, None)
    assert judged.status == REGRESSION and judged.failed
    assert statuses(judged)["distribution_match_p"] == REGRESSION
    assert statuses(judged)["throughput_tok_s"] == NO_BASELINE
    assert judge(record, None, rules=Rules(informational=frozenset({"distribution_match_p"}))).status == NO_BASELINE
    record.metrics["distribution_match_p"] = Metric(value=0.3, samples=[0.3])
    assert judge(record, None).status == NO_BASELINE


def test_a_changed_scenario_still_fails_on_a_value_that_needs_no_baseline():
    changed = make_scenario(output_len=64)
    record = make_record(changed)
    record.metrics["distribution_match_p"] = Metric(value=1e-9, samples=[1e-9])
    verdict = judge(record, baseline_of())
    assert verdict.status == REGRESSION and verdict.note.startswith("scenario changed")
    record.metrics["distribution_match_p"] = Metric(value=0.4, samples=[0.4])
    assert judge(record, baseline_of()).status == INCOMPATIBLE


def test_judge_incompatible_on_hash_change():
    changed = make_scenario(output_len=64)
    verdict = judge(make_record(changed, throughput=scaled(THROUGHPUT, 0.5)), baseline_of())
    assert verdict.status == INCOMPATIBLE and not verdict.failed
    assert verdict.metrics == []
    assert changed.hash in verdict.note and make_scenario().hash in verdict.note


def test_judge_same_hash_with_new_tolerances_is_comparable():
    tolerant = make_scenario(tolerances={"speedup": 0.3}, rounds=9)
    assert judge(make_record(tolerant), baseline_of()).status == PASS


def test_judge_invalid_result_shows_invalid():
    reasons = ["greedy outputs differ between rounds"]
    verdict = judge(make_record(reasons=reasons), baseline_of())
    assert verdict.status == INVALID and not verdict.failed
    assert verdict.note == reasons[0]


def test_judge_invalid_result_still_fails_on_regression():
    reasons = ["only 4 of 5 rounds finished"]
    verdict = judge(make_record(throughput=scaled(THROUGHPUT, 0.6), reasons=reasons), baseline_of())
    assert verdict.status == REGRESSION and verdict.failed
    assert reasons[0] in verdict.note


def test_judge_too_few_rounds_is_invalid():
    verdict = judge(make_record(throughput=scaled(THROUGHPUT[:2], 0.6)), baseline_of(throughput=THROUGHPUT[:2]))
    assert verdict.status == INVALID
    assert statuses(verdict)["throughput_tok_s"] == INVALID


def test_judge_error():
    record = make_record(status="error", error="engine failed to start: out of memory")
    verdict = judge(record, baseline_of())
    assert verdict.status == ERROR and verdict.failed
    assert verdict.note == "engine failed to start: out of memory"
    assert judge(make_record(status="error"), None).note == "no result"


def test_judge_reference_scenario():
    ref = reference_scenario()
    verdict = judge(make_record(ref, throughput=scaled(THROUGHPUT, 0.6)), baseline_of(scenario=ref))
    assert verdict.scenario_id == "tiny-llama-nosd-bs4-gsm8k"
    assert statuses(verdict) == {"throughput_tok_s": REGRESSION}


def test_judge_metric_new_since_baseline():
    baseline = baseline_of(reference_throughput=None)  # no speedup/lossless in the baseline
    verdict = judge(make_record(), baseline)
    assert statuses(verdict)["speedup"] == NO_BASELINE
    assert verdict.status == NO_BASELINE


# --------------------------------------------------------------------------
# severity and messages
# --------------------------------------------------------------------------


def test_worst():
    assert worst([PASS, IMPROVEMENT]) == IMPROVEMENT
    assert worst([PASS, NO_BASELINE, IMPROVEMENT]) == NO_BASELINE
    assert worst([INVALID, REGRESSION, PASS]) == REGRESSION
    assert worst([REGRESSION, ERROR]) == ERROR
    assert worst([]) == PASS
    assert SEVERITY[0] == ERROR and SEVERITY[-1] == PASS
    assert set(v.FAILING) == {ERROR, REGRESSION}


def test_failure_message():
    verdict = judge(make_record(throughput=scaled(THROUGHPUT, 0.6)), baseline_of())
    message = verdict.message
    lines = message.splitlines()
    assert lines[0] == "tiny-llama-eagle3-k3-bs4-gsm8k: regression"
    throughput = next(line for line in lines if "throughput_tok_s" in line)
    assert "baseline 100" in throughput
    assert "current 60" in throughput
    assert "change -40.0%" in throughput
    assert "tolerance 5.0%" in throughput
    assert "p-value 0.00397" in throughput
    assert not any("mean_acceptance_length" in line for line in lines)  # passing metrics left out


def test_metric_line_formats():
    line = MetricVerdict(
        metric="mean_acceptance_length", status=REGRESSION, baseline=2.5, current=2.35, change=-0.06, tolerance=0.05
    ).line()
    assert line == (
        "mean_acceptance_length: regression: baseline 2.5, current 2.35, change -6.0%, tolerance 5.0%, p-value n/a"
    )
    assert MetricVerdict(metric="speedup", status=INVALID, note="no current value").line() == (
        "speedup: invalid: baseline n/a, current n/a, change n/a, tolerance n/a, p-value n/a (no current value)"
    )


def test_scenario_failure_message_with_note():
    verdict = Verdict(scenario_id="x", status=ERROR, note="boom")
    assert verdict.failed and verdict.message == "x: error (boom)"


def test_verdict_failed_and_message_are_derived_again_on_load():
    verdict = Verdict(scenario_id="x", status=ERROR, note="boom")
    stored = verdict.to_json()
    assert stored["failed"] is True and stored["message"] == "x: error (boom)"
    stale = Verdict.model_validate({**stored, "failed": False, "message": "stale"})
    assert stale == verdict and stale.failed and stale.message == "x: error (boom)"
    passing = Verdict.model_validate({**stored, "status": PASS})
    assert not passing.failed and passing.message == ""


def test_informational_metrics_are_judged_but_do_not_fail_the_scenario():
    baseline_record = make_record(throughput=[100.0, 101.0, 99.0, 100.0, 100.5])
    slower = make_record(throughput=[50.0, 51.0, 49.0, 50.0, 50.5])
    baseline = Baseline(
        scenario_id=baseline_record.id,
        scenario_hash=baseline_record.scenario.hash,
        hardware_key=baseline_record.device.hardware_key,
        metrics=baseline_record.metrics,
    )
    assert v.judge(slower, baseline).status == v.REGRESSION
    verdict = v.judge(slower, baseline, rules=Rules(informational=frozenset({"throughput_tok_s", "speedup"})))
    assert verdict.status != v.REGRESSION and not verdict.failed
    throughput = next(m for m in verdict.metrics if m.metric == "throughput_tok_s")
    assert throughput.status == v.REGRESSION
    assert "informational" in throughput.note
