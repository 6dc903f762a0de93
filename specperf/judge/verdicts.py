"""Comparison of a result with its baseline: a verdict per metric and per scenario.

A change is a regression only when it is larger than the metric's tolerance and, for metrics
judged by "mannwhitney", a one-sided Mann-Whitney U test over the round samples agrees
(asv and Google Benchmark judge the same way).  Deterministic metrics (acceptance, lossless)
are judged on the threshold alone.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..records import Baseline, BaselineRef, Metric, MetricVerdict, ScenarioResult, Verdict
from ..records.scenario import GATE_TOLERANCE
from ..status import ERROR, FAILING, IMPROVEMENT, INCOMPATIBLE, INVALID, NO_BASELINE, PASS, REGRESSION, worst
from .metrics import HIGHER, known_metric, metric_samples, spec_for

__all__ = ["GATE_TOLERANCE", "spec_for"]  # also read from here by the other judges

ALPHA = 0.05  # significance level of the U test
MIN_ROUNDS = 4  # with fewer rounds on either side, p < ALPHA is impossible
NOISE_MULTIPLE = 3.0  # with a measured run-to-run CV, changes within 3 CV are noise (see noise.py)
MAX_NOISE_TOLERANCE = 0.5  # measured noise never widens a speed threshold beyond 50%
EPSILON = 1e-12


@dataclass(frozen=True)
class Rules:
    """How a scenario is judged: the profile's tolerances, the metrics that do not fail it, and the
    gate's.  Always taken from the profile in force (`Rules.of` its scenario), never from the result
    file being judged, so that no file on disk can widen its own gate.  The defaults are the metrics'
    own tolerances, every metric gating."""

    tolerances: dict[str, float] = field(default_factory=dict)
    informational: frozenset[str] = frozenset()
    gate_tolerance: float = GATE_TOLERANCE
    gate_engine_offset: float = 0.0

    @classmethod
    def of(cls, scenario: Any) -> Rules:
        """The rules of a scenario of the profile in force (profiles.scenarios.Scenario)."""
        return cls(
            dict(scenario.tolerances),
            frozenset(scenario.informational),
            scenario.gate_tolerance,
            scenario.gate_engine_offset,
        )

    def tolerance(self, metric: str) -> float | None:
        """The profile's override for this metric (or for its spec, e.g. per_position_acceptance), if any."""
        return self.tolerances.get(metric, self.tolerances.get(spec_for(metric).name))

    def is_informational(self, metric: str) -> bool:
        return metric in self.informational or spec_for(metric).name in self.informational


DEFAULT_RULES = Rules()


@dataclass(frozen=True)
class Judgement:
    """What a judge says of a result: its verdict, and the baseline that judged it (for the report)."""

    verdict: Verdict
    baseline: BaselineRef | None = None


class Judge(Protocol):
    """The one judging contract: the stored, rolling and paired-gate judges each implement it, and
    change nothing they are given; the run session calls its judge once per result."""

    def __call__(self, result: ScenarioResult, rules: Rules) -> Judgement: ...


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
    if not result.ok:
        return Verdict(scenario_id=scenario.id, status=ERROR, note=result.error or "no result")
    if baseline is not None and baseline.scenario_hash != scenario.hash:
        return Verdict(
            scenario_id=scenario.id,
            status=INCOMPATIBLE,
            note=f"scenario changed (hash {baseline.scenario_hash} -> {scenario.hash})",
        )
    base = judged_samples(baseline.metrics)[0] if baseline is not None else {}
    current, unknown = judged_samples(result.metrics)
    noise = noise or {}
    verdicts = [
        compare_metric(name, base.get(name, []), samples, rules.tolerance(name), noise.get(name))
        for name, samples in current.items()
    ]
    for verdict in verdicts:
        if rules.is_informational(verdict.metric):
            verdict.note = "; ".join(filter(None, [verdict.note, "informational: does not fail this profile"]))
    judged = scenario_verdict(result, verdicts, baseline is not None, rules)
    judged.note = "; ".join(filter(None, [judged.note, unknown_note(unknown)]))
    return judged


def scenario_verdict(
    result: ScenarioResult, verdicts: list[MetricVerdict], has_baseline: bool, rules: Rules = DEFAULT_RULES
) -> Verdict:
    """The worst status of the gating metrics' verdicts; an invalid result is never trusted or failed on."""
    status = worst(v.status for v in verdicts if not rules.is_informational(v.metric)) if has_baseline else NO_BASELINE
    note = ""
    if not result.valid:
        note = "; ".join(result.validity.reasons) if result.validity else ""
        if status not in FAILING:  # an invalid run is shown, never trusted, never failed on
            status = INVALID
    return Verdict(scenario_id=result.scenario.id, status=status, metrics=verdicts, note=note)
