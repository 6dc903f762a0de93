"""The round spread behind each metric verdict: the round statistics of the baseline's and the
current result's samples, side by side."""

from __future__ import annotations

from dataclasses import dataclass

from ...judge.metrics import metric_samples, sample_summary
from ...records import Metric, MetricVerdict, ScenarioResult


@dataclass(frozen=True)
class MetricSpread:
    """A metric verdict with the round statistics (judge.metrics.sample_summary) of each side; None without samples."""

    verdict: MetricVerdict
    baseline_stats: dict | None
    current_stats: dict | None


def _stats(samples: list[float] | None) -> dict | None:
    return sample_summary(samples) if samples else None


def metric_spreads(result: ScenarioResult) -> list[MetricSpread]:
    """One entry per metric verdict; per-position samples are flattened to acceptance_pos<i> as the judge does."""
    current = metric_samples(result.metrics)
    stored = result.baseline.metric_samples if result.baseline else {}
    previous = metric_samples({name: Metric(value=None, samples=samples or []) for name, samples in stored.items()})
    verdicts = result.verdict.metrics if result.verdict else []
    return [MetricSpread(m, _stats(previous.get(m.metric)), _stats(current.get(m.metric))) for m in verdicts]
