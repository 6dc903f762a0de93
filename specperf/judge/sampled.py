"""Acceptance of a sampled scenario: figures over its requests, their errors, and how they are judged.

Under sampling, which drafts a request accepts depends on its draws, so a sampled scenario's
acceptance is an estimate over its requests.  Each figure is computed from the requests' counts
(records.RequestAcceptance, from vLLM's per-request metrics) in two weightings: by verify step, as
vLLM's counters weigh (a long output weighs more), and by request (each request's own mean counts
once).  Its standard error comes from a bootstrap over requests (scipy.stats.bootstrap, a request
resampled with all its counts, and the replicas of one prompt in a call resampled together: they
share the prompt, so they are not independent samples of the workload), and a baseline keeps it, so
that a change is judged on its 95% interval (verdicts.compare_sampled).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..records import Metric, RequestAcceptance

RESAMPLES = 2000
SEED = 0  # the bootstrap's draws: a result's errors are the same each time they are computed
COUNTS = 3  # a request's columns before its per-position ones: steps, drafted, accepted


def _table(requests: list[RequestAcceptance], positions: int, cluster: int = 1) -> list[np.ndarray]:
    """The requests' counts as columns, summed over each run of `cluster` consecutive requests (the
    replicas of one prompt, which share it, resampled together): steps, drafted, accepted, accepted
    at each position; then, of the requests that drafted, their number and the sums of their own
    accepted / steps and accepted at each position / steps (the request-weighted figures)."""
    counts = np.array(
        [[r.steps, r.drafted, r.accepted, *(r.accepted_per_pos + [0] * positions)[:positions]] for r in requests],
        dtype=float,
    ).reshape(len(requests), COUNTS + positions)
    steps = counts[:, :1]
    shares = np.divide(counts[:, 2:], steps, out=np.zeros_like(counts[:, 2:]), where=steps > 0)
    rows = np.hstack([counts, (steps > 0).astype(float), shares])
    return list(np.add.reduceat(rows, np.arange(0, len(rows), cluster), axis=0).T) if len(rows) else list(rows.T)


def _figures(positions: int) -> dict[str, Callable[..., Any]]:
    """Every acceptance figure as a statistic of the columns (_table), by its judged name: each a
    ratio of two columns' sums, so that a resample of clusters is a resample of their requests."""
    drafted = COUNTS + positions  # the column of the requests that drafted; their shares follow

    def ratio(column: int, over: int, plus: float = 0.0) -> Callable[..., Any]:
        return lambda *cols, axis=-1: plus + np.sum(cols[column], axis=axis) / np.sum(cols[over], axis=axis)

    figures = {
        "mean_acceptance_length": ratio(2, 0, plus=1.0),
        "request_mean_acceptance_length": ratio(drafted + 1, drafted, plus=1.0),
        "draft_acceptance_rate": ratio(2, 1),
    }
    for p in range(positions):
        figures[f"acceptance_pos{p}"] = ratio(COUNTS + p, 0)
        figures[f"request_acceptance_pos{p}"] = ratio(drafted + 2 + p, drafted)
    return figures


def _bootstrap_se(statistic: Callable[..., Any], columns: list[np.ndarray]) -> float:
    """The bootstrap standard error of `statistic` over requests (the columns' rows resampled
    together); NaN with fewer than two requests, or where the statistic is not finite in every
    resample (scipy then warns of its interval, which the suite does not use: the caller says why)."""
    from scipy.stats import DegenerateDataWarning, bootstrap

    if len(columns[0]) < 2:
        return math.nan
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
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


def acceptance_metrics(requests: list[RequestAcceptance], cluster: int = 1) -> dict[str, Metric]:
    """A sampled SD scenario's acceptance over its requests: each figure's value (its one sample:
    the requests are the samples here) and standard error, in both weightings; the error resamples
    runs of `cluster` consecutive requests together (a prompt's replicas: Scenario.prompt_replicas)."""
    positions = _positions(requests)
    columns = _table(requests, positions, cluster)
    drafted = columns[0] > 0 if columns else np.array([], dtype=bool)
    if not drafted.any():
        return {}
    columns = [column[drafted] for column in columns]  # a cluster that never drafted tells nothing
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


class PairedChange(NamedTuple):
    """A figure's change request by request and its standard error: a log ratio, or, where `linear`,
    the change relative to the baseline's value (a log ratio has no error where the figure is 0 in
    some resamples of the requests: a position no resampled request reached, on either side)."""

    change: float
    error: float
    linear: bool = False


def paired_changes(
    current: list[RequestAcceptance], baseline: list[RequestAcceptance], cluster: int = 1
) -> dict[str, PairedChange]:
    """Each figure's change (log ratio, current over baseline) and its standard error, the two sides
    being the same prompts in the same order, request i against request i: a bootstrap that
    resamples the pairs (runs of `cluster` of them together: a prompt's replicas), so what both
    sides share cancels out of the error: the prompts (how much each lends itself to drafting),
    and the draws where they repeat (the same seed on the same build: docs/methodology/sampled.md).
    Identical sides give a change of 0 with an error of 0.  A figure whose log ratio is not finite in
    every resample is changed relative to the baseline's value instead (PairedChange.linear)."""
    if len(current) != len(baseline) or len(current) < 2:
        raise ValueError(f"{len(current)} requests against {len(baseline)}: not the same requests")
    positions = _positions(current, baseline)
    columns = _table(current, positions, cluster) + _table(baseline, positions, cluster)
    width = len(columns) // 2
    changes = {}
    for name, statistic in _figures(positions).items():

        def log_ratio(*cols: np.ndarray, axis: int = -1, _figure: Callable[..., Any] = statistic) -> Any:
            return np.log(_figure(*cols[:width], axis=axis) / _figure(*cols[width:], axis=axis))

        with np.errstate(invalid="ignore", divide="ignore"):
            change = float(log_ratio(*columns))
            base_value = float(statistic(*columns[width:]))
        error = _bootstrap_se(log_ratio, columns) if math.isfinite(change) else math.nan
        if math.isfinite(error):
            changes[name] = PairedChange(change, error)
        elif base_value > 0:

            def relative(
                *cols: np.ndarray, axis: int = -1, _figure: Callable[..., Any] = statistic, _base: float = base_value
            ) -> Any:
                return (_figure(*cols[:width], axis=axis) - _figure(*cols[width:], axis=axis)) / _base

            changes[name] = PairedChange(float(relative(*columns)), _bootstrap_se(relative, columns), linear=True)
    return changes
