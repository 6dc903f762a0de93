"""Acceptance of a sampled scenario: figures over its requests, their errors, and how they are judged.

Under sampling, which drafts a request accepts depends on its draws, so a sampled scenario's
acceptance is an estimate over its requests.  Each figure is computed from the requests' counts
(records.RequestAcceptance, from vLLM's per-request metrics) in two weightings: by verify step, as
vLLM's counters weigh (a long output weighs more), and by request (each request's own mean counts
once).  Its standard error comes from a bootstrap over requests (scipy.stats.bootstrap, a request
resampled with all its counts), and a baseline keeps it, so that a change is judged
on its 95% interval (verdicts.compare_sampled).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..records import Metric, RequestAcceptance

RESAMPLES = 2000
SEED = 0  # the bootstrap's draws: a result's errors are the same each time they are computed
COUNTS = 3  # a request's columns before its per-position ones: steps, drafted, accepted


def _table(requests: list[RequestAcceptance], positions: int) -> list[np.ndarray]:
    """The requests' counts as columns: steps, drafted, accepted, then accepted at each position."""
    rows = [[r.steps, r.drafted, r.accepted, *(r.accepted_per_pos + [0] * positions)[:positions]] for r in requests]
    return list(np.array(rows, dtype=float).T)


def _per_request(numerator: np.ndarray, steps: np.ndarray, axis: int) -> Any:
    """The mean over the requests that drafted of numerator / steps (request-weighted)."""
    share = np.divide(numerator, steps, out=np.full(np.broadcast(numerator, steps).shape, np.nan), where=steps > 0)
    return np.nanmean(share, axis=axis)


def _figures(positions: int) -> dict[str, Callable[..., Any]]:
    """Every acceptance figure as a statistic of the columns (_table), by its judged name."""

    def token(column: int, plus: float = 0.0, over: int = 0) -> Callable[..., Any]:
        return lambda *cols, axis=-1: plus + np.sum(cols[column], axis=axis) / np.sum(cols[over], axis=axis)

    def request(column: int, plus: float = 0.0) -> Callable[..., Any]:
        return lambda *cols, axis=-1: plus + _per_request(cols[column], cols[0], axis)

    figures = {
        "mean_acceptance_length": token(2, plus=1.0),
        "request_mean_acceptance_length": request(2, plus=1.0),
        "draft_acceptance_rate": token(2, over=1),
    }
    for p in range(positions):
        figures[f"acceptance_pos{p}"] = token(COUNTS + p)
        figures[f"request_acceptance_pos{p}"] = request(COUNTS + p)
    return figures


def _bootstrap_se(statistic: Callable[..., Any], columns: list[np.ndarray]) -> float:
    """The bootstrap standard error of `statistic` over requests (the columns' rows resampled
    together); NaN with fewer than two requests."""
    from scipy.stats import bootstrap

    if len(columns[0]) < 2:
        return math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        found = bootstrap(
            columns,
            statistic,
            paired=True,
            vectorized=True,
            n_resamples=RESAMPLES,
            method="percentile",
            random_state=np.random.default_rng(SEED),
        )
    return float(found.standard_error)


def _positions(*sides: list[RequestAcceptance]) -> int:
    return max((len(r.accepted_per_pos) for side in sides for r in side), default=0)


def acceptance_metrics(requests: list[RequestAcceptance]) -> dict[str, Metric]:
    """A sampled SD scenario's acceptance over its requests: each figure's value (its one sample:
    the requests are the samples here) and standard error, in both weightings."""
    drafted = [r for r in requests if r.steps > 0]
    if not drafted:
        return {}
    positions = _positions(drafted)
    columns = _table(drafted, positions)
    found: dict[str, tuple[float, float]] = {}
    for name, statistic in _figures(positions).items():
        value = float(statistic(*columns))
        if math.isfinite(value):
            se = _bootstrap_se(statistic, columns)
            found[name] = (value, se)

    def metric(value: float, se: float) -> Metric:
        return Metric(value=value, samples=[value], se=None if math.isnan(se) else se)

    def vector(prefix: str) -> Metric:
        values = [found[f"{prefix}{p}"] for p in range(positions)]
        errors = [se for _, se in values]
        return Metric(
            value=[v for v, _ in values],
            samples=[[v for v, _ in values]],
            se=None if any(map(math.isnan, errors)) else errors,
        )

    metrics = {name: metric(*found[name]) for name in _figures(0) if name in found}
    metrics["per_position_acceptance"] = vector("acceptance_pos")
    metrics["request_per_position_acceptance"] = vector("request_acceptance_pos")
    return metrics


def paired_changes(
    current: list[RequestAcceptance], baseline: list[RequestAcceptance]
) -> dict[str, tuple[float, float]]:
    """Each figure's change (log ratio, current over baseline) and its standard error, the two sides
    being the same prompts in the same order, request i against request i: a bootstrap that
    resamples the pairs, so what both sides share cancels out of the error: the prompts (how much
    each lends itself to drafting), and the draws where they repeat (the same seed on the same
    build: docs/methodology/sampled.md).  Identical sides give a change of 0 with an error of 0."""
    if len(current) != len(baseline) or len(current) < 2:
        raise ValueError(f"{len(current)} requests against {len(baseline)}: not the same requests")
    positions = _positions(current, baseline)
    columns = _table(current, positions) + _table(baseline, positions)
    width = COUNTS + positions
    changes = {}
    for name, statistic in _figures(positions).items():

        def log_ratio(*cols: np.ndarray, axis: int = -1, _figure: Callable[..., Any] = statistic) -> Any:
            return np.log(_figure(*cols[:width], axis=axis) / _figure(*cols[width:], axis=axis))

        with np.errstate(invalid="ignore", divide="ignore"):
            change = float(log_ratio(*columns))
        if math.isfinite(change):
            changes[name] = (change, _bootstrap_se(log_ratio, columns))
    return changes
