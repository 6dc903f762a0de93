"""Comparison of a result with its baseline: a verdict per metric and per scenario.

A change is a regression only when it is larger than the metric's tolerance and, for metrics
judged by "mannwhitney", a one-sided Mann-Whitney U test over the round samples agrees
(asv and Google Benchmark judge the same way).  Deterministic metrics (greedy acceptance, lossless)
are judged on the threshold against the baseline alone; a sampled scenario's acceptance on its interval over requests
(judge/sampled.py); a distribution check's p on its value alone, with or without a baseline.
"""

from __future__ import annotations

import math
import statistics

from ..records import (
    Baseline,
    Metric,
    MetricVerdict,
    RequestAcceptance,
    Scenario,
    ScenarioResult,
    Verdict,
)
from ..records.scenario import GATE_TOLERANCE
from ..status import (
    ERROR,
    FAILING,
    IMPROVEMENT,
    INCOMPATIBLE,
    INCONCLUSIVE,
    INVALID,
    NO_BASELINE,
    PASS,
    REGRESSION,
    worst,
)
from .metrics import ABSOLUTE, HIGHER, known_metric, metric_errors, metric_samples, spec_for
from .rules import DEFAULT_RULES, Rules
from .sampled import PairedChange, paired_changes

__all__ = ["GATE_TOLERANCE", "spec_for"]  # also read from here by the other judges

ALPHA = 0.05  # significance level of the U test
MIN_ROUNDS = 4  # with fewer rounds on either side, p < ALPHA is impossible
NOISE_MULTIPLE = 3.0  # with a measured run-to-run CV, changes within 3 CV are noise (see noise.py)
MAX_NOISE_TOLERANCE = 0.5  # measured noise never widens a speed threshold beyond 50%
EPSILON = 1e-12
Z95 = 1.959963984540054  # the normal's 97.5% point: a two-sided 95% interval


def compare_metric(
    metric: str,
    baseline_samples: list[float],
    current_samples: list[float],
    tolerance: float | None = None,
    noise_cv: float | None = None,
) -> MetricVerdict:
    """tolerance: the profile's (default: the metric's); noise_cv widens a speed metric's to
    NOISE_MULTIPLE x CV, at most MAX_NOISE_TOLERANCE.  A value the metric cannot take (not finite,
    a zero speed, a rate above 1) on either side makes the verdict invalid."""
    spec = spec_for(metric)
    tol = spec.rel_tolerance if tolerance is None else tolerance
    if noise_cv is not None and not spec.deterministic:
        tol = max(tol, min(NOISE_MULTIPLE * noise_cv, MAX_NOISE_TOLERANCE))
    if not current_samples:
        return MetricVerdict(metric=metric, status=INVALID, tolerance=tol, note="no current value")
    for side, samples in (("current", current_samples), ("baseline", baseline_samples)):
        problem = next(filter(None, map(spec.out_of_range, samples)), None)
        if problem:
            return MetricVerdict(metric=metric, status=INVALID, tolerance=tol, note=f"a {side} value {problem}")
    current = statistics.median(current_samples)
    if spec.test == ABSOLUTE:  # the value itself says, whatever the baseline (a p: shown as the verdict's p)
        status = REGRESSION if current < tol else PASS
        note = f"p = {current:.2g}; below {tol:g} fails"
        return MetricVerdict(metric=metric, status=status, current=current, tolerance=tol, p_value=current, note=note)
    if not baseline_samples:
        return MetricVerdict(metric=metric, status=NO_BASELINE, current=current, tolerance=tol)
    baseline = statistics.median(baseline_samples)  # within the metric's range: >= 0, > 0 for speeds
    change = (current - baseline) / baseline if baseline else math.inf if current else 0.0
    worse_by = -change if spec.direction == HIGHER else change
    verdict = MetricVerdict(
        metric=metric,
        status=PASS,
        baseline=baseline,
        current=current,
        change=change if math.isfinite(change) else None,
        tolerance=tol,
        note="" if math.isfinite(change) else "baseline is 0",
    )
    if abs(worse_by) <= tol + EPSILON:
        return verdict
    if spec.test == "mannwhitney":
        if min(len(baseline_samples), len(current_samples)) < MIN_ROUNDS:
            verdict.status = INVALID
            verdict.note = f"too few rounds for a significance test (need {MIN_ROUNDS})"
            return verdict
        verdict.p_value = one_sided_p(baseline_samples, current_samples, spec.direction, worse=worse_by > 0)
        if verdict.p_value >= ALPHA:
            verdict.note = f"beyond tolerance but not significant (p >= {ALPHA})"
            return verdict
    verdict.status = REGRESSION if worse_by > 0 else IMPROVEMENT
    return verdict


def on_interval(scenario: Scenario, metric: str) -> bool:
    """Whether `metric` of `scenario` is judged on its interval over requests: a sampled scenario's acceptance."""
    return not scenario.sampling.greedy and spec_for(metric).against_baseline and metric != "lossless_fraction"


def compare_sampled(
    metric: str,
    baseline: float | None,
    current: float,
    change: float | None,
    error: float | None,
    tolerance: float | None = None,
    figures: int = 1,
    how: str = "",
    requests: int | None = None,
    linear: bool = False,
) -> MetricVerdict:
    """A sampled acceptance figure against its baseline's, judged on the interval of its change
    (`change`: the log ratio; `error`: its standard error; None where unknown).  One of `figures`
    judged so in a scenario: each interval is widened (Bonferroni) so that all of them hold together
    95% of the time, and an unchanged scenario is flagged in at most 5% of runs however many
    figures it has.  `how` says how the change was paired, for the note; `requests`, how many the
    error rests on (a t interval on requests - 1 degrees of freedom; None: a normal one); `linear`:
    `change` and `error` are relative, not log (a figure that fell to 0 has no log ratio)."""
    spec = spec_for(metric)
    tol = spec.rel_tolerance if tolerance is None else tolerance
    if not math.isfinite(current):
        return MetricVerdict(metric=metric, status=INVALID, tolerance=tol, note="no current value")
    if baseline is None:
        return MetricVerdict(metric=metric, status=NO_BASELINE, current=current, tolerance=tol)
    verdict = MetricVerdict(metric=metric, status=INVALID, baseline=baseline, current=current, tolerance=tol)
    if change is None or error is None or not math.isfinite(error):
        verdict.note = "no error over requests on both sides: a sampled figure is judged on its interval"
        return verdict
    from scipy.stats import norm, t

    level = 1 - ALPHA / 2 / figures
    z = float(t.ppf(level, requests - 1) if requests and requests > 1 else norm.ppf(level))
    low, high = change - z * error, change + z * error
    if not linear:
        low, high = math.expm1(low), math.expm1(high)
    worse = (-high, -low) if spec.direction == HIGHER else (low, high)
    verdict.status = three_way(worse[0], worse[1], tol)
    verdict.change, verdict.ci_low, verdict.ci_high = change if linear else math.expm1(change), low, high
    together = f", 95% over the scenario's {figures} acceptance figures" if figures > 1 else ""
    verdict.note = f"sampled: {1 - ALPHA / figures:.1%} interval over requests{how}{together}"
    return verdict


def sampled_verdicts(
    names: list[str],
    current: dict[str, Metric],
    baseline: dict[str, Metric],
    rules: Rules = DEFAULT_RULES,
    paired: dict[str, PairedChange] | None = None,
    requests: int | None = None,
) -> list[MetricVerdict]:
    """The verdicts of a sampled scenario's acceptance figures `names` (flattened: acceptance_pos0, ...),
    judged together on their intervals (compare_sampled): from `paired` changes where the baseline
    kept its requests' counts (sampled.paired_changes), else from each side's own error as
    independent samples."""
    values, errors = metric_samples(current), metric_errors(current)
    base_values, base_errors = metric_samples(baseline), metric_errors(baseline)
    gating = max(1, sum(not rules.is_informational(name) for name in names))  # an informational one widens none
    verdicts = []
    for name in names:
        now = statistics.median(values[name]) if values.get(name) else math.nan
        then = statistics.median(base_values[name]) if base_values.get(name) else None
        change, error, how, linear = None, None, "", False
        if paired is not None and name in paired:
            (change, error, linear), how = paired[name], ", request by request"
        elif then is not None and then > 0 and now > 0 and name in errors:
            # a baseline without its error (the history's median over runs): taken as this run's
            base_error = base_errors[name] / then if name in base_errors else errors[name] / now
            change, error = math.log(now / then), math.hypot(errors[name] / now, base_error)
            how = "" if name in base_errors else ", the baseline's error taken as this run's"
        elif then is not None and then == now == 0:
            change, error = 0.0, 0.0
        elif then is not None and then > 0 and now == 0 and name in errors:  # fell to 0: no log ratio
            base_error = base_errors.get(name, errors[name])
            change, error, how, linear = -1.0, math.hypot(errors[name], base_error) / then, ", fell to 0", True
        verdicts.append(
            compare_sampled(name, then, now, change, error, rules.tolerance(name), gating, how, requests, linear)
        )
    return verdicts


def three_way(least_worse: float, most_worse: float, tolerance: float) -> str:
    """The verdict of a 95% interval of how much worse the candidate is (Chromium's Pinpoint says
    same / different / unknown): an improvement where all of it is better than no change and it
    reaches beyond the tolerance; a pass where none of it is worse than the tolerance (shown not
    worse); a regression where all of it is worse than no change (and it reaches beyond the
    tolerance); else inconclusive.  So a change near the tolerance can be flagged, where a rule that
    asks the estimate to lie beyond it catches a true change of the tolerance at most half the time."""
    if most_worse < 0 and least_worse < -tolerance - EPSILON:
        return IMPROVEMENT
    if most_worse <= tolerance + EPSILON:
        return PASS
    return REGRESSION if least_worse > 0 else INCONCLUSIVE


def one_sided_p(baseline: list[float], current: list[float], direction: str, worse: bool) -> float:
    """p-value of the U test in the direction of the observed change."""
    from scipy.stats import mannwhitneyu

    current_is_lower = (direction == HIGHER) == worse
    alternative = "less" if current_is_lower else "greater"
    return float(mannwhitneyu(current, baseline, alternative=alternative).pvalue)


def judged_samples(metrics: dict[str, Metric]) -> tuple[dict[str, list[float]], list[str]]:
    """A record's samples by metric (metrics.metric_samples) of the metrics the suite knows, and the
    names it does not know (reported, never judged)."""
    samples = metric_samples(metrics)
    return {k: v for k, v in samples.items() if known_metric(k)}, sorted(k for k in samples if not known_metric(k))


def unknown_note(names: list[str]) -> str:
    return f"not judged: unknown metric(s) {', '.join(names)}" if names else ""


def judge(
    result: ScenarioResult,
    baseline: Baseline | None,
    noise: dict[str, float] | None = None,
    rules: Rules = DEFAULT_RULES,
) -> Verdict:
    """noise: this scenario's measured CV per metric (noise.load_noise), widening its thresholds;
    rules: the profile's (never the result's own)."""
    scenario = result.scenario
    rules = rules.for_scenario(scenario)
    if not result.ok:
        return Verdict(scenario_id=scenario.id, status=ERROR, note=result.error or "no result")
    if baseline is not None and baseline.scenario_hash != scenario.hash:
        changed = f"scenario changed (hash {baseline.scenario_hash} -> {scenario.hash})"
        alone = judge(result, None, noise, rules)  # what needs no baseline (distribution_match_p) still holds
        if alone.status == REGRESSION:
            alone.note = "; ".join(filter(None, [changed, alone.note]))
            return alone
        return Verdict(scenario_id=scenario.id, status=INCOMPATIBLE, note=changed)
    base = judged_samples(baseline.metrics)[0] if baseline is not None else {}
    current, unknown = judged_samples(result.metrics)
    noise = noise or {}
    on_intervals = [name for name in current if on_interval(scenario, name)]
    verdicts = [
        compare_metric(name, base.get(name, []), samples, rules.tolerance(name), noise.get(name))
        for name, samples in current.items()
        if name not in on_intervals
    ] + sampled_scenario_verdicts(
        scenario,
        on_intervals,
        (result.metrics, result.request_acceptance),
        (baseline.metrics, baseline.request_acceptance) if baseline is not None else ({}, []),
        rules,
    )
    mark_informational(verdicts, rules)
    judged = scenario_verdict(result, verdicts, baseline is not None, rules)
    judged.note = "; ".join(filter(None, [judged.note, unknown_note(unknown)]))
    return judged


def mark_informational(verdicts: list[MetricVerdict], rules: Rules) -> None:
    """Say so in the note of each verdict the profile keeps informational (it fails nothing)."""
    for verdict in verdicts:
        why = rules.why_informational(verdict.metric)
        if why is not None:
            verdict.note = "; ".join(filter(None, [verdict.note, f"informational: {why}"]))


def sampled_scenario_verdicts(
    scenario: Scenario,
    names: list[str],
    current: tuple[dict[str, Metric], list[RequestAcceptance]],
    baseline: tuple[dict[str, Metric], list[RequestAcceptance]],
    rules: Rules = DEFAULT_RULES,
) -> list[MetricVerdict]:
    """sampled_verdicts of `scenario`'s figures `names`, each side its (metrics, per-request counts):
    request by request where the baseline (or a gate's current build) kept its requests' counts,
    the t interval on the prompts behind them."""
    paired = changes_by_request(scenario, current[1], baseline[1])
    rules = rules.for_scenario(scenario)
    return sampled_verdicts(names, current[0], baseline[0], rules, paired, samples_of(scenario, current[1]))


def samples_of(scenario: Scenario, requests: list[RequestAcceptance]) -> int | None:
    """The independent samples a sampled figure's error rests on (its t interval's): the prompts
    of its requests, a prompt's replicas counted once; None where it kept no requests."""
    return -(-len(requests) // scenario.prompt_replicas) or None


def changes_by_request(
    scenario: Scenario, current: list[RequestAcceptance], baseline: list[RequestAcceptance]
) -> dict[str, PairedChange] | None:
    """A sampled result's changes request by request against a baseline (or a gate's current build)
    that kept its requests' counts (sampled.paired_changes: the same scenario hash, so the same
    prompts in the same order, a prompt's replicas resampled together); None where it kept none."""
    if len(baseline) != len(current) or len(current) < 2:
        return None
    return paired_changes(current, baseline, scenario.prompt_replicas)


def scenario_verdict(
    result: ScenarioResult, verdicts: list[MetricVerdict], has_baseline: bool, rules: Rules = DEFAULT_RULES
) -> Verdict:
    """The worst status of the gating metrics' verdicts (without a baseline, of those judged on their
    value alone); an invalid result is never trusted or failed on."""
    rules = rules.for_scenario(result.scenario)
    gating = [v for v in verdicts if not rules.is_informational(v.metric)]
    absolute = [v for v in gating if spec_for(v.metric).test == ABSOLUTE and v.status == REGRESSION]
    status = worst(v.status for v in gating) if has_baseline else REGRESSION if absolute else NO_BASELINE
    note = ""
    if not result.valid:
        note = "; ".join(result.validity.reasons) if result.validity else ""
        if status not in FAILING:  # an invalid run is shown, never trusted, never failed on
            status = INVALID
    return Verdict(scenario_id=result.scenario.id, status=status, metrics=verdicts, note=note)
