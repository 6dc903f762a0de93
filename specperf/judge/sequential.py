"""A gate that looks more than once (`--gate-max-sets`): it adds sets of fresh engines to a scenario
it cannot yet decide, and judges again after each.  Judging every look with a 95% interval would
raise the false alarms with the number of looks, so each look's interval is wider: a one-sided
2.5% (the side of a 95% interval) is spent over the looks as Lan and DeMets' O'Brien-Fleming-like
function does (gsDesign's sfLDOF), by the share of the most engine pairs the gate may reach
(the information fraction).  A gate of one look keeps its 95% interval.  The boundaries of looks
k = 1..K are found one by one: look k's boundary b_k makes the chance of first crossing there, under
no change, what the function spends between the fractions t_(k-1) and t_k; the statistics of
successive looks correlate as sqrt(t_j / t_k) (Jennison and Turnbull 2000, ch. 3).
"""

from __future__ import annotations

import functools
import math

ONE_SIDED = 0.025  # the one side of a 95% interval


def spent(fraction: float, alpha: float = ONE_SIDED) -> float:
    """The share of `alpha` spent by information fraction `fraction` (O'Brien-Fleming-like)."""
    from scipy.stats import norm

    return 0.0 if fraction <= 0 else float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(min(fraction, 1.0))))


def _no_crossing(bounds: list[float], fractions: list[float]) -> float:
    """The chance under no change that no look's statistic exceeds its bound."""
    import numpy as np
    from scipy.stats import multivariate_normal, norm

    if len(bounds) == 1:
        return float(norm.cdf(bounds[0]))
    t = np.asarray(fractions[: len(bounds)], dtype=float)
    corr = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    rng = np.random.default_rng(1)  # the cdf is quasi-Monte Carlo: a fixed seed, a fixed boundary
    return float(multivariate_normal(np.zeros(len(bounds)), corr).cdf(np.array(bounds), rng=rng))


def boundaries(fractions: list[float], alpha: float = ONE_SIDED) -> list[float]:
    """The z boundary of each look, at increasing information fractions (the last planned one is 1)."""
    from scipy.optimize import brentq

    found: list[float] = []
    for k, fraction in enumerate(fractions):
        target = spent(fraction, alpha) - (spent(fractions[k - 1], alpha) if k else 0.0)
        stayed = _no_crossing(found, fractions) if found else 1.0
        found.append(
            float(
                brentq(
                    lambda b, f=found, s=stayed, x=target: s - _no_crossing([*f, b], fractions) - x, 0.5, 8.0, xtol=1e-6
                )
            )
        )
    return found


def look_confidence(fractions: list[float]) -> float:
    """The two-sided confidence of the interval judged at the last of these looks."""
    return _confidence(tuple(fractions))


@functools.lru_cache(maxsize=256)
def _confidence(fractions: tuple[float, ...]) -> float:
    if not fractions or fractions == (1.0,):
        return 1 - 2 * ONE_SIDED
    from scipy.stats import norm

    return float(1 - 2 * norm.sf(boundaries(list(fractions))[-1]))
