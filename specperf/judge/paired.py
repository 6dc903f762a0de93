"""Paired comparison of two engines measured in alternating rounds (the upgrade gate, paired speedup).

Round i of the current engine and round i of the candidate ran back to back, so whatever the machine
did meanwhile touched both: their ratio cancels the drift that separate runs cannot.  The change is
the Hodges-Lehmann estimate of the per-pair log ratios (the median of all pairwise averages: the
estimate that goes with the Wilcoxon signed-rank test).  It is steadier than the plain median: on
A/A pairs measured on a 2-core VM (per-pair noise 3.9%), resampled with a 5% slowdown added, 10 pairs
flagged it in 92% of draws against 82% with the median, 15 pairs in 98% against 88%
(benchmarks/paired_estimator.py).  A speed metric
regresses when that change is beyond the tolerance, a one-sided Wilcoxon signed-rank test on the log
ratios agrees, and the bootstrap interval of the estimate excludes no change (Kalibera and Jones;
Chromium's Pinpoint judges pairs the same way).
"""

from __future__ import annotations

import math
import statistics

from ..records import MetricVerdict
from ..status import IMPROVEMENT, INVALID, PASS, REGRESSION
from .metrics import HIGHER
from .verdicts import ALPHA, EPSILON, spec_for

MIN_PAIRS = 5               # with fewer, p < ALPHA is impossible (one-sided: 1/2^n)
GATE_TOLERANCE = 0.03       # a paired speed change smaller than this is never a regression
CONFIDENCE = 0.95
RESAMPLES = 2000


def ratios(current: list[float], candidate: list[float]) -> list[float]:
    """candidate_i / current_i for every pair where both are finite and positive."""
    return [b / a for a, b in zip(current, candidate)
            if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0]


def hodges_lehmann(values, axis: int = -1):
    """The median of the Walsh averages (x_i + x_j) / 2, i <= j, along `axis` (vectorized for bootstrap)."""
    import numpy as np

    values = np.moveaxis(np.asarray(values, dtype=float), axis, -1)
    upper = np.triu_indices(values.shape[-1])
    walsh = (values[..., :, None] + values[..., None, :])[..., upper[0], upper[1]] / 2
    return np.median(walsh, axis=-1)


def estimate_interval(log_ratios: list[float]) -> tuple[float, float]:
    """A bootstrap confidence interval of the Hodges-Lehmann estimate (percentile method, fixed seed:
    reproducible)."""
    import numpy as np
    from scipy.stats import bootstrap

    if len(set(log_ratios)) == 1:
        return log_ratios[0], log_ratios[0]
    result = bootstrap((np.asarray(log_ratios),), hodges_lehmann, confidence_level=CONFIDENCE,
                       n_resamples=RESAMPLES, method="percentile", vectorized=True, random_state=0)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def one_sided_p(log_ratios: list[float], lower: bool) -> float:
    """Wilcoxon signed-rank p-value that the log ratios lie below (lower) or above zero."""
    from scipy.stats import wilcoxon

    if all(abs(x) < EPSILON for x in log_ratios):
        return 1.0
    return float(wilcoxon(log_ratios, alternative="less" if lower else "greater").pvalue)


def compare_paired(metric: str, current: list[float], candidate: list[float],
                   tolerance: float = GATE_TOLERANCE) -> MetricVerdict:
    """Judge `candidate` against `current`, pair by pair (the lists are aligned by round)."""
    spec = spec_for(metric)
    pair_ratios = ratios(current, candidate)
    if len(pair_ratios) < MIN_PAIRS:
        return MetricVerdict(metric=metric, status=INVALID, tolerance=tolerance,
                             note=f"{len(pair_ratios)} pairs are too few for the paired test (need {MIN_PAIRS})")
    log_ratios = [math.log(r) for r in pair_ratios]
    change = math.exp(float(hodges_lehmann(log_ratios))) - 1
    low, high = (math.exp(bound) for bound in estimate_interval(log_ratios))
    worse_by = -change if spec.direction == HIGHER else change
    verdict = MetricVerdict(metric=metric, status=PASS, baseline=statistics.median(current),
                            current=statistics.median(candidate), change=change, tolerance=tolerance,
                            ci_low=low - 1, ci_high=high - 1, judged_by="paired",
                            note=f"{len(pair_ratios)} pairs")
    if abs(worse_by) <= tolerance + EPSILON:
        return verdict
    verdict.p_value = one_sided_p(log_ratios, lower=change < 0)
    if verdict.p_value >= ALPHA:
        verdict.note += f"; beyond tolerance but not significant (p >= {ALPHA})"
        return verdict
    if low <= 1 <= high:
        verdict.note += "; beyond tolerance but the interval includes no change"
        return verdict
    verdict.status = REGRESSION if worse_by > 0 else IMPROVEMENT
    return verdict
