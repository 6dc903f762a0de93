"""Paired comparison of two engines measured in alternating rounds (the upgrade gate, paired speedup).

Round j of the current engine and round j of the candidate ran back to back, so whatever the machine
did meanwhile touched both: their log ratio cancels the drift that separate runs cannot.  The pairs
are not independent, though.  Pairs that ran on the same two engines (a cluster: one current and
one candidate engine, started together) share the offset between those fresh engines, a few
percent on a small CPU (benchmarks/engine_offsets.py), which no number of pairs averages away:

    log ratio of pair j in cluster c = change + offset_c + noise_cj

The change is the mean over clusters of each cluster's Hodges-Lehmann estimate (the median of the
Walsh averages of its log ratios: robust to a stray round).  One cluster's estimate varies by

    tau^2 = offset SD^2 + kappa(m) x pair noise^2 / m        (m pairs; kappa 1.02-1.09, HL_KAPPA)

Its error pools two sources, as a Student t with a prior on the variance does: the spread of this
gate's cluster estimates (clusters - 1 degrees of freedom) and the tier's prior, tau^2 with the
profile's `gate_engine_offset` (the offset SD measured on that tier) and this gate's pooled pair
noise, worth PRIOR_DF clusters.  With the floor at the true offset the 95% interval holds the
change 95% of the time (tests/test_paired_coverage.py); a higher floor only widens it (same degrees
of freedom, more variance), and a gate of few clusters still gets a usable interval.  A profile
without a floor (0) has no prior: the spread alone, or with one cluster its pairs' noise alone.
Where no cluster has two pairs (blocks of one round) the pair noise is unknown, so the floor is a
minimum on the spread instead.  The verdict is three-way (three_way): pass, shown within the
tolerance; regression or improvement, shown beyond no change; inconclusive, neither.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from ..records import MetricVerdict
from ..status import INCONCLUSIVE, INVALID, PASS
from .metrics import HIGHER
from .verdicts import EPSILON, GATE_TOLERANCE, spec_for, three_way

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


# n x Var / sigma^2 of the Hodges-Lehmann estimate (i <= j) of n normal values, n = 1..12 (Park, Kim &
# Wang, arXiv:1908.00462, their rQCC tables, 1e7 replicates); beyond, rQCC's fit towards pi/3.
HL_KAPPA = (1.0, 1.0, 1.0221, 1.0949, 1.0754, 1.0759, 1.0814, 1.0728, 1.0756, 1.0743, 1.0693, 1.0670)
PRIOR_DF = 10  # the tier's prior counts as the spread of ten engine pairs (docs/methodology/gate.md)


def hl_kappa(n: int) -> float:
    """How much more a Hodges-Lehmann estimate of n values varies than their mean does."""
    return HL_KAPPA[n - 1] if n <= len(HL_KAPPA) else 1.0472 + 0.2923 / n + 0.2258 / n**2


@dataclass(frozen=True)
class _Clusters:
    """The parts of a paired change's error: each cluster's estimate, the variance of their spread,
    and of one cluster's estimate from its pairs' noise (`noise`; `within`: one pair's)."""

    estimates: list[float]
    spread: float
    within: float
    within_df: int
    noise: float

    @classmethod
    def of(cls, log_ratios: list[float], clusters: list[int] | None) -> _Clusters:
        clusters = clusters if clusters is not None else [0] * len(log_ratios)
        groups: dict[int, list[float]] = {}
        for value, cluster in zip(log_ratios, clusters):
            groups.setdefault(cluster, []).append(value)
        members = list(groups.values())
        within_df = len(log_ratios) - len(members)
        squares = math.fsum((x - statistics.fmean(g)) ** 2 for g in members for x in g)
        within = squares / within_df if within_df > 0 else 0.0
        estimates = [float(hodges_lehmann(g)) for g in members]
        return cls(
            estimates=estimates,
            spread=statistics.variance(estimates) if len(members) > 1 else 0.0,
            within=within,
            within_df=within_df,
            noise=within * statistics.fmean(hl_kappa(len(g)) / len(g) for g in members),
        )


def paired_change(
    log_ratios: list[float], clusters: list[int] | None = None, offset_floor: float = 0.0, prior_df: int = PRIOR_DF
) -> PairedChange:
    """The change and its error from per-pair log ratios; `clusters[j]` names the engines pair j ran
    on (None: all on one engine per side), `offset_floor` the tier's SD of one cluster's offset."""
    parts = _Clusters.of(log_ratios, clusters)
    count, within_df = len(parts.estimates), parts.within_df
    if within_df > 0:  # pooled with the prior, which is worth no more than the pair noise behind it
        weight = min(prior_df, within_df) if offset_floor > 0 else 0  # no floor: the tier has no prior
        weight = weight or (within_df if count == 1 else 0)  # one cluster: its pairs' noise is all there is
        df = weight + count - 1
        variance = (weight * (offset_floor**2 + parts.noise) + (count - 1) * parts.spread) / df
    else:  # no pair noise to build a prior from: the floor is a minimum on the spread
        variance, df = max(parts.spread, offset_floor**2), max(count - 1, 1)
    return PairedChange(
        log_change=statistics.fmean(parts.estimates),
        se=math.sqrt(variance / count),
        df=df,
        between_engines=math.sqrt(max(0.0, parts.spread - parts.noise)) if count > 1 else None,
        between_pairs=math.sqrt(parts.within) if within_df > 0 else None,
        clusters=count,
        pairs=len(log_ratios),
    )


@dataclass(frozen=True)
class RecordedOffset:
    """The SD of the offset between two fresh engines, estimated from the gates on record."""

    sd: float
    df: int  # engine pairs less one, summed over the gates
    gates: int

    def line(self) -> str:
        return f"{self.sd:.1%} over the {self.gates} gates on record ({self.df} degrees of freedom)"


def recorded_offset_of(gates: list[tuple[list[float], list[int]]]) -> RecordedOffset | None:
    """The offset's SD from gates' pairs (each gate: per-pair log ratios and the engine pair of each):
    every gate's spread between its engine pairs' estimates less what its pairs' noise explains
    (paired_change's offset^2 + noise), pooled by degrees of freedom and never below 0 (the
    method-of-moments estimate of a variance component).  A change between the builds moves every
    engine pair of a gate alike and drops out.  None without a gate of two engine pairs with noise."""
    total, df, used = 0.0, 0, 0
    for log_ratios, clusters in gates:
        parts = _Clusters.of(log_ratios, clusters)
        if len(parts.estimates) < 2 or parts.within_df < 1:
            continue
        total += (len(parts.estimates) - 1) * (parts.spread - parts.noise)
        df, used = df + len(parts.estimates) - 1, used + 1
    return RecordedOffset(math.sqrt(max(0.0, total / df)), df, used) if df else None


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
    confidence: float = CONFIDENCE,
) -> MetricVerdict:
    """Judge `candidate` against `current`, pair by pair (the lists are aligned by round; `clusters`
    too).  `relative_to`: a change measured apart that this one is judged relative to (a gate's
    speedup: the SD engines' change less their no-SD reference's); `confidence`: the interval's,
    wider at a sequential gate's looks (judge/sequential.py)."""
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
    low, high = (math.exp(bound) - 1 for bound in estimate.interval(confidence))
    worse = sorted((-low, -high) if spec.direction == HIGHER else (low, high))  # how much worse, at least/most
    note = f"{estimate.pairs} pairs on {estimate.clusters} engine pair(s)" + (
        "; relative to the no-SD reference's change" if relative_to is not None else ""
    )
    verdict = MetricVerdict(
        metric=metric,
        status=three_way(worse[0], worse[1], tolerance),
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
    if verdict.status != PASS:
        verdict.p_value = estimate.p_value(lower=change < 0)
    if confidence != CONFIDENCE:
        verdict.note += f"; a {confidence:.1%} interval, this look's share of a sequential gate's 95%"
    if verdict.status == INCONCLUSIVE:
        verdict.note += f"; neither shown within {tolerance:.0%} nor shown worse: more engine pairs would tell"
    return verdict
