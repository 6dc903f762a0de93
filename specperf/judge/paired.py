"""Paired comparison of two engines measured in alternating rounds (the upgrade gate, paired speedup).

Round j of the current engine and round j of the candidate ran back to back, so whatever the machine
did meanwhile touched both: their log ratio cancels the drift that separate runs cannot.  The pairs
are not independent, though.  Pairs that ran on the same two engines (a cluster: one current and
one candidate engine, started together) share the offset between those fresh engines, a few
percent on a small CPU (benchmarks/engine_offsets.py), which no number of pairs averages away:

    log ratio of pair j in cluster c = change + offset_c + noise_cj

The change is the mean over clusters of each cluster's Hodges-Lehmann estimate (the median of the
Walsh averages of its log ratios: robust to a stray round).  Its standard error comes from the
spread of the cluster estimates (df = clusters - 1), and is never less than the floor that the
profile's `gate_engine_offset` (the SD of offset_c measured on that tier) and the pairs' pooled
noise imply, the floor a gate of few clusters needs (df = pairs - clusters).  The interval is
Student's t on that error; a speed metric regresses when the change is beyond the tolerance and
the interval excludes no change (then the one-sided t test is below ALPHA too).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from ..records import MetricVerdict
from ..status import IMPROVEMENT, INVALID, PASS, REGRESSION
from .metrics import HIGHER
from .verdicts import ALPHA, EPSILON, GATE_TOLERANCE, spec_for

MIN_PAIRS = 5  # with fewer, no test of the pairs' noise is worth having
CONFIDENCE = 0.95


def ratios(current: list[float], candidate: list[float]) -> list[float]:
    """candidate_i / current_i for every pair where both are finite and positive."""
    return [b / a for a, b in zip(current, candidate) if _usable(a, b)]


def _usable(a: object, b: object) -> bool:
    return (
        isinstance(a, (int, float))
        and isinstance(b, (int, float))
        and math.isfinite(a)
        and math.isfinite(b)
        and a > 0
        and b > 0
    )


def hodges_lehmann(values: Any, axis: int = -1) -> Any:
    """The median of the Walsh averages (x_i + x_j) / 2, i <= j, along `axis` (vectorized)."""
    import numpy as np

    values = np.moveaxis(np.asarray(values, dtype=float), axis, -1)
    upper = np.triu_indices(values.shape[-1])
    walsh = (values[..., :, None] + values[..., None, :])[..., upper[0], upper[1]] / 2
    return np.median(walsh, axis=-1)


@dataclass(frozen=True)
class PairedChange:
    """A paired change in log units, with the two parts of its error."""

    log_change: float
    se: float  # standard error of log_change
    df: float  # degrees of freedom of se
    between_engines: float | None  # SD of one cluster's engine offset (None: one cluster, not seen)
    between_pairs: float | None  # SD of one pair's noise (None: one pair per cluster)
    clusters: int
    pairs: int

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """The change's confidence interval, in log units."""
        from scipy.stats import t

        half = 0.0 if self.se == 0 else float(t.ppf(0.5 + confidence / 2, self.df)) * self.se
        return self.log_change - half, self.log_change + half

    def p_value(self, lower: bool) -> float:
        """One-sided t test that the change lies below (lower) or above zero."""
        from scipy.stats import t

        if self.se == 0:
            return 1.0 if abs(self.log_change) < EPSILON or (self.log_change < 0) != lower else 0.0
        statistic = self.log_change / self.se
        return float(t.cdf(statistic, self.df) if lower else t.sf(statistic, self.df))

    def minus(self, other: PairedChange) -> PairedChange:
        """This change relative to another measured apart from it (speedup = SD change - reference
        change): errors add in quadrature, degrees of freedom by Welch-Satterthwaite."""
        v1, v2 = self.se**2, other.se**2
        df = (v1 + v2) ** 2 / (v1**2 / self.df + v2**2 / other.df) if v1 + v2 > 0 else self.df
        return PairedChange(
            self.log_change - other.log_change,
            math.sqrt(v1 + v2),
            df,
            self.between_engines,
            self.between_pairs,
            self.clusters,
            self.pairs,
        )


def paired_change(
    log_ratios: list[float], clusters: list[int] | None = None, offset_floor: float = 0.0
) -> PairedChange:
    """The change and its error from per-pair log ratios; `clusters[j]` names the engines pair j ran
    on (None: all on one engine per side), `offset_floor` the least SD of one cluster's offset."""
    clusters = clusters if clusters is not None else [0] * len(log_ratios)
    groups: dict[int, list[float]] = {}
    for value, cluster in zip(log_ratios, clusters):
        groups.setdefault(cluster, []).append(value)
    members = list(groups.values())
    estimates = [float(hodges_lehmann(g)) for g in members]
    count, pairs = len(members), len(log_ratios)
    within_df = pairs - count
    within = math.fsum((x - statistics.fmean(g)) ** 2 for g in members for x in g) / within_df if within_df > 0 else 0.0
    per_cluster = pairs / count
    floor = offset_floor**2 + within / per_cluster  # the variance of one cluster's estimate, at least
    spread = statistics.variance(estimates) if count > 1 else 0.0
    variance, df = (spread, count - 1) if count > 1 and spread >= floor else (floor, max(within_df, 1))
    return PairedChange(
        log_change=statistics.fmean(estimates),
        se=math.sqrt(variance / count),
        df=df,
        between_engines=math.sqrt(max(0.0, spread - within / per_cluster)) if count > 1 else None,
        between_pairs=math.sqrt(within) if within_df > 0 else None,
        clusters=count,
        pairs=pairs,
    )


def usable_change(
    current: list[float], candidate: list[float], clusters: list[int] | None = None, offset_floor: float = 0.0
) -> PairedChange | None:
    """paired_change over the pairs where both rounds are finite and positive; None with fewer than
    MIN_PAIRS of them."""
    usable = [j for j, (a, b) in enumerate(zip(current, candidate)) if _usable(a, b)]
    if len(usable) < MIN_PAIRS:
        return None
    return paired_change(
        [math.log(candidate[j] / current[j]) for j in usable],
        [clusters[j] for j in usable] if clusters is not None else None,
        offset_floor,
    )


def compare_paired(
    metric: str,
    current: list[float],
    candidate: list[float],
    tolerance: float = GATE_TOLERANCE,
    clusters: list[int] | None = None,
    offset_floor: float = 0.0,
    relative_to: PairedChange | None = None,
) -> MetricVerdict:
    """Judge `candidate` against `current`, pair by pair (the lists are aligned by round; `clusters`
    too).  `relative_to`: a change measured apart that this one is judged relative to (a gate's
    speedup: the SD engines' change less their no-SD reference's)."""
    spec = spec_for(metric)
    usable = [j for j, (a, b) in enumerate(zip(current, candidate)) if _usable(a, b)]
    estimate = usable_change(current, candidate, clusters, offset_floor)
    if estimate is None:
        return MetricVerdict(
            metric=metric,
            status=INVALID,
            tolerance=tolerance,
            note=f"{len(usable)} pairs are too few for the paired test (need {MIN_PAIRS})",
        )
    if relative_to is not None:
        estimate = estimate.minus(relative_to)
    change = math.exp(estimate.log_change) - 1
    low, high = (math.exp(bound) - 1 for bound in estimate.interval())
    worse_by = -change if spec.direction == HIGHER else change
    note = f"{estimate.pairs} pairs on {estimate.clusters} engine pair(s)" + (
        "; relative to the no-SD reference's change" if relative_to is not None else ""
    )
    verdict = MetricVerdict(
        metric=metric,
        status=PASS,
        baseline=statistics.median(current[j] for j in usable),
        current=statistics.median(candidate[j] for j in usable),
        change=change,
        tolerance=tolerance,
        ci_low=low,
        ci_high=high,
        judged_by="paired",
        between_engines=estimate.between_engines,
        between_pairs=estimate.between_pairs,
        note=note,
    )
    if abs(worse_by) <= tolerance + EPSILON:
        return verdict
    verdict.p_value = estimate.p_value(lower=change < 0)
    if verdict.p_value >= ALPHA:
        verdict.note += f"; beyond tolerance but not significant (p >= {ALPHA})"
        return verdict
    if low <= 0 <= high:
        verdict.note += "; beyond tolerance but the interval includes no change"
        return verdict
    verdict.status = REGRESSION if worse_by > 0 else IMPROVEMENT
    return verdict
