"""Acceptance pooled over scenarios: per (model, method) and dataset, from the scenarios' summed
counters, over every batch size that ran."""

from __future__ import annotations

from dataclasses import dataclass

from ...judge.metrics import acceptance, sum_counters
from ...records import ScenarioResult
from ...status import OK


@dataclass(frozen=True)
class Pooled:
    """Acceptance of several scenarios from their summed counters (not a mean of their rates)."""

    length: float | None
    rate: float | None
    per_position: list[float]
    drafts: float


def pooled_acceptance(results: list[ScenarioResult]) -> Pooled:
    total = sum_counters([r.counters for r in results if r.counters is not None])
    pooled = acceptance(total)
    return Pooled(
        pooled["mean_acceptance_length"],
        pooled["draft_acceptance_rate"],
        pooled["per_position_acceptance"] or [],
        total.drafts,
    )


@dataclass(frozen=True)
class AcceptanceCell:
    pooled: Pooled
    batch_sizes: list[int]


@dataclass(frozen=True)
class AcceptanceRow:
    model: str
    method: str
    cells: list[AcceptanceCell | None]  # one per column (dataset); None where not run
    sampling: str = ""  # a sampled row's settings as its ids end ("-t0.8-p0.95"): never pooled with greedy


@dataclass(frozen=True)
class AcceptanceTable:
    columns: list[str]
    rows: list[AcceptanceRow]


def acceptance_table(results: list[ScenarioResult]) -> AcceptanceTable:
    """Acceptance per (model, method) and dataset, pooled over batch sizes; finished SD scenarios only."""
    cells: dict[tuple[str, str, str], dict[str, list[ScenarioResult]]] = {}
    for r in results:
        if r.status == OK and not r.scenario.is_reference:
            key = (r.scenario.model.name, r.scenario.method.label, r.scenario.sampling.label())
            cells.setdefault(key, {}).setdefault(r.scenario.dataset, []).append(r)
    columns = sorted({dataset for by_dataset in cells.values() for dataset in by_dataset})
    rows = []
    for (model, method, sampling), by_dataset in sorted(cells.items()):
        row = [
            AcceptanceCell(pooled_acceptance(members), sorted({m.scenario.batch_size for m in members}))
            if (members := by_dataset.get(dataset))
            else None
            for dataset in columns
        ]
        rows.append(AcceptanceRow(model, method, row, sampling))
    return AcceptanceTable(columns, rows)
