"""The serve scenarios' tables: latency percentiles per concurrency, and where SD stops paying in
latency terms (its TPOT no lower than the no-SD server's), beside the offline speedup where the
run measured the same model, method and workload offline too."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..records import ScenarioResult

LATENCIES = ("ttft", "tpot", "itl")
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class LatencyRow:
    """One serve scenario: each latency's percentiles (ms; the median over rounds of each round's)."""

    model: str
    dataset: str
    method: str
    concurrency: int
    percentiles: dict[str, list[float | None]]  # latency -> [p50, p90, p99]
    throughput: float | None
    tpot_speedup: float | None  # no-SD TPOT p50 / this method's; None for no-SD
    is_reference: bool


@dataclass(frozen=True)
class LatencyLimit:
    """Where a method's TPOT stops beating no-SD's: the lowest concurrency at which it does not."""

    model: str
    dataset: str
    method: str
    points: dict[int, float]  # concurrency -> TPOT speedup, ascending
    stops_at: int | None  # None: it pays at every concurrency measured
    offline: dict[int, float]  # batch size -> offline throughput speedup, from the same run


@dataclass(frozen=True)
class ServeTables:
    rows: list[LatencyRow]
    limits: list[LatencyLimit]


def _percentiles(result: ScenarioResult, latency: str) -> list[float | None]:
    values = []
    for p in PERCENTILES:
        samples = [v for r in result.rounds if r.latency and (v := r.latency.get(f"{latency}_s_p{p}")) is not None]
        values.append(1000 * statistics.median(samples) if samples else None)
    return values


def _tpot_speedup(result: ScenarioResult, by_id: dict[str, ScenarioResult]) -> float | None:
    """The judged metric where the run had it, else the ratio of the two TPOT p50 medians."""
    measured = result.value("tpot_speedup")
    if isinstance(measured, (int, float)):
        return float(measured)
    reference = by_id.get(result.scenario.reference_id)
    ref_tpot = reference.value("tpot_p50_ms") if reference else None
    tpot = result.value("tpot_p50_ms")
    if isinstance(ref_tpot, (int, float)) and isinstance(tpot, (int, float)) and tpot > 0:
        return ref_tpot / tpot
    return None


def serve_tables(results: list[ScenarioResult]) -> ServeTables:
    by_id = {r.id: r for r in results if r.ok}
    rows = []
    for r in by_id.values():
        if not r.scenario.serves or r.scenario.concurrency is None:
            continue
        throughput = r.value("throughput_tok_s")
        rows.append(
            LatencyRow(
                r.scenario.model.name,
                r.scenario.dataset,
                r.scenario.method.label,
                r.scenario.concurrency,
                {latency: _percentiles(r, latency) for latency in LATENCIES},
                throughput if isinstance(throughput, (int, float)) else None,
                None if r.scenario.is_reference else _tpot_speedup(r, by_id),
                r.scenario.is_reference,
            )
        )
    rows.sort(key=lambda row: (row.model, row.dataset, not row.is_reference, row.method, row.concurrency))
    offline: dict[tuple[str, str, str], dict[int, float]] = {}
    for r in by_id.values():
        speedup = r.value("speedup")
        if not r.scenario.serves and isinstance(speedup, (int, float)):
            key = (r.scenario.model.name, r.scenario.dataset, r.scenario.method.label)
            offline.setdefault(key, {})[r.scenario.batch_size] = speedup
    curves: dict[tuple[str, str, str], dict[int, float]] = {}
    for row in rows:
        if row.tpot_speedup is not None:
            curves.setdefault((row.model, row.dataset, row.method), {})[row.concurrency] = row.tpot_speedup
    limits = []
    for key, points in sorted(curves.items()):
        points = dict(sorted(points.items()))
        stops = next((c for c, s in points.items() if s <= 1.0), None)
        limits.append(LatencyLimit(*key, points, stops, dict(sorted(offline.get(key, {}).items()))))
    return ServeTables(rows, limits)
