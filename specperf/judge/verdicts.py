"""Comparison of a result with its baseline: a verdict per metric and per scenario.

A change is a regression only when it is larger than the metric's tolerance and, for metrics
judged by "mannwhitney", a one-sided Mann-Whitney U test over the round samples agrees
(asv and Google Benchmark judge the same way).  Deterministic metrics (acceptance, lossless)
are judged on the threshold alone.
"""

from __future__ import annotations

import math
import statistics

from ..records import Baseline, MetricVerdict, ScenarioResult, Verdict
from ..status import ERROR, FAILING, IMPROVEMENT, INCOMPATIBLE, INVALID, NO_BASELINE, PASS, REGRESSION, worst
from .metrics import HIGHER, METRICS, MetricSpec, metric_samples


ALPHA = 0.05        # significance level of the U test
MIN_ROUNDS = 4      # with fewer rounds on either side, p < ALPHA is impossible
NOISE_MULTIPLE = 3.0    # with a measured run-to-run CV, changes within 3 CV are noise (see noise.py)
MAX_NOISE_TOLERANCE = 0.5   # measured noise never widens a speed threshold beyond 50%
EPSILON = 1e-12


def spec_for(metric: str) -> MetricSpec:
    """Specs are per metric name; per-position rates (acceptance_pos0, ...) share one."""
    if metric.startswith("acceptance_pos"):
        return METRICS["per_position_acceptance"]
    return METRICS[metric]


def compare_metric(metric: str, baseline_samples: list[float], current_samples: list[float],
                   tolerance: float | None = None, noise_cv: float | None = None) -> MetricVerdict:
    """tolerance: the profile's (default: the metric's); noise_cv widens a speed metric's to
    NOISE_MULTIPLE x CV, at most MAX_NOISE_TOLERANCE.  A non-finite current value is invalid."""
    spec = spec_for(metric)
    tol = spec.rel_tolerance if tolerance is None else tolerance
    if noise_cv is not None and not spec.deterministic:
        tol = max(tol, min(NOISE_MULTIPLE * noise_cv, MAX_NOISE_TOLERANCE))
    if not all(math.isfinite(s) for s in current_samples):
        return MetricVerdict(metric=metric, status=INVALID, tolerance=tol, note="non-finite current value")
    if not current_samples:
        return MetricVerdict(metric=metric, status=INVALID, tolerance=tol, note="no current value")
    current = statistics.median(current_samples)
    if not baseline_samples:
        return MetricVerdict(metric=metric, status=NO_BASELINE, current=current, tolerance=tol)
    baseline = statistics.median(baseline_samples)
    change = (current - baseline) / abs(baseline) if baseline else math.copysign(math.inf, current) if current else 0.0
    worse_by = -change if spec.direction == HIGHER else change
    verdict = MetricVerdict(metric=metric, status=PASS, baseline=baseline, current=current,
                            change=change if math.isfinite(change) else None, tolerance=tol,
                            note="" if math.isfinite(change) else "baseline is 0")
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


def one_sided_p(baseline: list[float], current: list[float], direction: str, worse: bool) -> float:
    """p-value of the U test in the direction of the observed change."""
    from scipy.stats import mannwhitneyu

    current_is_lower = (direction == HIGHER) == worse
    alternative = "less" if current_is_lower else "greater"
    return float(mannwhitneyu(current, baseline, alternative=alternative).pvalue)


def tolerance_for(metric: str, overrides: dict) -> float | None:
    """A profile's override for this metric (or for its spec, e.g. per_position_acceptance), if any."""
    return overrides.get(metric, overrides.get(spec_for(metric).name))


def judge(result: ScenarioResult, baseline: Baseline | None, noise: dict[str, float] | None = None) -> Verdict:
    """noise: this scenario's measured CV per metric (noise.load_noise), widening its thresholds."""
    scenario = result.scenario
    if not result.ok:
        return Verdict(scenario_id=scenario.id, status=ERROR, note=result.error or "no result")
    if baseline is not None and baseline.scenario_hash != scenario.hash:
        return Verdict(scenario_id=scenario.id, status=INCOMPATIBLE,
                       note=f"scenario changed (hash {baseline.scenario_hash} -> {scenario.hash})")
    base = metric_samples(baseline.metrics) if baseline is not None else {}
    noise = noise or {}
    verdicts = [compare_metric(name, base.get(name, []), samples, tolerance_for(name, scenario.tolerances),
                               noise.get(name))
                for name, samples in metric_samples(result.metrics).items()]
    for verdict in verdicts:
        if is_informational(verdict.metric, result):
            verdict.note = "; ".join(filter(None, [verdict.note, "informational: does not fail this profile"]))
    return scenario_verdict(result, verdicts, baseline is not None)


def is_informational(metric: str, result: ScenarioResult) -> bool:
    informational = set(result.scenario.informational)
    return metric in informational or spec_for(metric).name in informational


def scenario_verdict(result: ScenarioResult, verdicts: list[MetricVerdict], has_baseline: bool) -> Verdict:
    """The worst status of the gating metrics' verdicts; an invalid result is never trusted or failed on."""
    status = worst(v.status for v in verdicts if not is_informational(v.metric, result)) \
        if has_baseline else NO_BASELINE
    note = ""
    if not result.valid:
        note = "; ".join(result.validity.reasons)
        if status not in FAILING:      # an invalid run is shown, never trusted, never failed on
            status = INVALID
    return Verdict(scenario_id=result.scenario.id, status=status, metrics=verdicts, note=note)
