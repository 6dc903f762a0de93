"""Comparison of a result with its baseline: a verdict per metric and per scenario.

A change is a regression only when it is larger than the metric's tolerance and, for metrics
judged by "mannwhitney", a one-sided Mann-Whitney U test over the round samples agrees
(asv and Google Benchmark judge the same way).  Deterministic metrics (acceptance, lossless)
are judged on the threshold alone.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from .metrics import HIGHER, METRICS, MetricSpec

PASS = "pass"
REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_BASELINE = "no-baseline"
INCOMPATIBLE = "incompatible"
INVALID = "invalid"
ERROR = "error"

# Worst first: a scenario's verdict is the worst of its metrics'.
SEVERITY = (ERROR, REGRESSION, INVALID, INCOMPATIBLE, NO_BASELINE, IMPROVEMENT, PASS)
FAILING = (ERROR, REGRESSION)

ALPHA = 0.05        # significance level of the U test
MIN_ROUNDS = 4      # with fewer rounds on either side, p < ALPHA is impossible
NOISE_MULTIPLE = 3.0    # with a measured run-to-run CV, changes within 3 CV are noise (see noise.py)
EPSILON = 1e-12


def spec_for(metric: str) -> MetricSpec:
    """Specs are per metric name; per-position rates (acceptance_pos0, ...) share one."""
    if metric.startswith("acceptance_pos"):
        return METRICS["per_position_acceptance"]
    return METRICS[metric]


@dataclass
class MetricVerdict:
    metric: str
    status: str
    baseline: float | None = None
    current: float | None = None
    change: float | None = None          # relative, signed: (current - baseline) / baseline
    tolerance: float | None = None
    p_value: float | None = None
    note: str = ""

    def line(self) -> str:
        def fmt(value):
            return "n/a" if value is None else f"{value:.4g}"
        change = "n/a" if self.change is None else f"{self.change:+.1%}"
        tolerance = "n/a" if self.tolerance is None else f"{self.tolerance:.1%}"
        p_value = "n/a" if self.p_value is None else f"{self.p_value:.3g}"
        text = (f"{self.metric}: {self.status}: baseline {fmt(self.baseline)}, current {fmt(self.current)}, "
                f"change {change}, tolerance {tolerance}, p-value {p_value}")
        return f"{text} ({self.note})" if self.note else text


@dataclass
class ScenarioVerdict:
    scenario_id: str
    status: str
    metrics: list[MetricVerdict] = field(default_factory=list)
    note: str = ""

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def failure_message(self) -> str:
        lines = [f"{self.scenario_id}: {self.status}" + (f" ({self.note})" if self.note else "")]
        lines += ["  " + m.line() for m in self.metrics if m.status in FAILING]
        return "\n".join(lines)


def worst(statuses) -> str:
    statuses = list(statuses)
    for status in SEVERITY:
        if status in statuses:
            return status
    return PASS


def compare_metric(metric: str, baseline_samples: list[float], current_samples: list[float],
                   tolerance: float | None = None, noise_cv: float | None = None) -> MetricVerdict:
    """tolerance: the profile's (default: the metric's); noise_cv widens it to NOISE_MULTIPLE x CV."""
    spec = spec_for(metric)
    tol = spec.rel_tolerance if tolerance is None else tolerance
    if noise_cv is not None:
        tol = max(tol, NOISE_MULTIPLE * noise_cv)
    if not current_samples:
        return MetricVerdict(metric, INVALID, tolerance=tol, note="no current value")
    current = statistics.median(current_samples)
    if not baseline_samples:
        return MetricVerdict(metric, NO_BASELINE, current=current, tolerance=tol)
    baseline = statistics.median(baseline_samples)
    change = (current - baseline) / abs(baseline) if baseline else (0.0 if current == baseline else float("inf"))
    worse_by = -change if spec.direction == HIGHER else change
    verdict = MetricVerdict(metric, PASS, baseline, current, change, tol)
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


def metric_samples(metrics: dict) -> dict[str, list[float]]:
    """Flatten a result's metrics to name -> samples; per-position vectors become acceptance_pos<i>."""
    flat: dict[str, list[float]] = {}
    for name, entry in metrics.items():
        samples = entry.get("samples") or []
        if name == "per_position_acceptance":
            for round_values in samples:
                for i, value in enumerate(round_values or []):
                    flat.setdefault(f"acceptance_pos{i}", []).append(value)
        else:
            flat[name] = [s for s in samples if s is not None]
    return flat


def tolerance_for(metric: str, overrides: dict) -> float | None:
    """A profile's override for this metric (or for its spec, e.g. per_position_acceptance), if any."""
    return overrides.get(metric, overrides.get(spec_for(metric).name))


def judge(result: dict, baseline: dict | None, noise: dict[str, float] | None = None) -> ScenarioVerdict:
    """noise: this scenario's measured CV per metric (noise.load_noise), widening its thresholds."""
    scenario = result["scenario"]
    if result.get("status") != "ok":
        return ScenarioVerdict(scenario["id"], ERROR, note=result.get("error") or "no result")
    if baseline is not None and baseline["scenario_hash"] != scenario["hash"]:
        return ScenarioVerdict(scenario["id"], INCOMPATIBLE,
                               note=f"scenario changed (hash {baseline['scenario_hash']} -> {scenario['hash']})")
    tolerances = scenario.get("tolerances", {})
    base = metric_samples(baseline["metrics"]) if baseline is not None else {}
    noise = noise or {}
    verdicts = [compare_metric(name, base.get(name, []), samples, tolerance_for(name, tolerances), noise.get(name))
                for name, samples in metric_samples(result["metrics"]).items()]
    informational = set(scenario.get("informational", []))
    gating = []
    for verdict in verdicts:
        if verdict.metric in informational or spec_for(verdict.metric).name in informational:
            verdict.note = "; ".join(filter(None, [verdict.note, "informational: does not fail this profile"]))
        else:
            gating.append(verdict)
    status = worst(v.status for v in gating) if baseline is not None else NO_BASELINE
    validity = result.get("validity", {})
    note = ""
    if validity.get("valid") is False:
        note = "; ".join(validity.get("reasons", []))
        if status not in FAILING:      # an invalid run is shown, never trusted, never failed on
            status = INVALID
    return ScenarioVerdict(scenario["id"], status, verdicts, note)
