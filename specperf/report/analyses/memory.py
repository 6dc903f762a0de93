"""Peak memory of each method against the no-SD reference of the same model, dataset and batch
size, measured and as the checkpoints' configs call for it."""

from __future__ import annotations

from dataclasses import dataclass

from ...records import Memory, ScenarioResult
from ..format import distinct


def memory_peaks(result: ScenarioResult) -> tuple[float | None, float | None]:
    """(current, baseline) peak memory in MiB of one scenario, None where not measured."""
    return (
        result.memory.peak_mib if result.memory else None,
        result.baseline.memory_peak_mib if result.baseline else None,
    )


def _ratio(value: float | None, reference: float | None) -> float | None:
    return value / reference if value and reference else None


@dataclass(frozen=True)
class MemoryCell:
    method: str | None  # None: the no-SD reference
    peak_mib: float | None
    ratio: float | None  # against the no-SD reference of the same model, dataset and batch size
    baseline_peak_mib: float | None
    baseline_ratio: float | None
    # From the checkpoints' configs: the target's (no-SD) or the draft's or head's weights and KV cache per token.
    weights_mib: float | None = None
    kv_kib_per_token: float | None = None
    kv_ratio: float | None = None  # a method's KV per token with the target's, over the target's alone
    estimate_note: str | None = None


@dataclass(frozen=True)
class MemoryRow:
    model: str
    dataset: str
    batch_size: int
    reference: MemoryCell | None
    methods: list[MemoryCell | None]  # one per MemoryTable.methods; None where not measured


@dataclass(frozen=True)
class MemoryTable:
    methods: list[str]
    rows: list[MemoryRow]
    sources: list[str]


def _scaled(value: int | None, unit: int) -> float | None:
    return value / unit if value is not None else None


def _memory_cell(method: str | None, result: ScenarioResult, reference: ScenarioResult | None) -> MemoryCell:
    current, baseline = memory_peaks(result)
    ref_current, ref_baseline = memory_peaks(reference) if reference else (None, None)
    memory = result.memory or Memory()
    weights, kv = (
        (memory.weights_bytes, memory.kv_bytes_per_token)
        if method is None
        else (memory.draft_weights_bytes, memory.draft_kv_bytes_per_token)
    )
    target_kv, draft_kv = memory.kv_bytes_per_token, memory.draft_kv_bytes_per_token
    kv_ratio = (target_kv + draft_kv) / target_kv if method is not None and target_kv and draft_kv is not None else None
    return MemoryCell(
        method,
        current,
        _ratio(current, ref_current),
        baseline,
        _ratio(baseline, ref_baseline),
        _scaled(weights, 2**20),
        _scaled(kv, 2**10),
        kv_ratio,
        memory.estimate_note,
    )


def memory_table(results: list[ScenarioResult]) -> MemoryTable:
    """Peak memory of each method against the no-SD reference, per (model, dataset, batch size)."""
    groups: dict[tuple[str, str, int], dict[str | None, ScenarioResult]] = {}
    for r in results:
        if any(x is not None for x in memory_peaks(r)):
            key = (r.scenario.model.name, r.scenario.dataset, r.scenario.batch_size)
            groups.setdefault(key, {})[None if r.scenario.is_reference else r.scenario.method.label] = r
    methods = sorted({m for group in groups.values() for m in group if m is not None})
    rows = []
    for (model, dataset, batch_size), group in sorted(groups.items()):
        reference = group.get(None)
        rows.append(
            MemoryRow(
                model,
                dataset,
                batch_size,
                _memory_cell(None, reference, None) if reference else None,
                [_memory_cell(m, group[m], reference) if m in group else None for m in methods],
            )
        )
    sources = distinct(r.memory.source for r in results if r.memory)
    return MemoryTable(methods, rows, sources)
