"""What the report works out from typed results, as plain data: no formatting, no HTML.

Round spreads of each metric verdict, acceptance pooled over scenarios, where SD stops paying,
peak memory against no-SD, effective-config drift, GPU clocks and throttling, and which panel of
the study's figure 1 a scenario matches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judge.metrics import acceptance, metric_samples, sum_counters, summarise
from ..methods import method_of
from ..profiles.registry import study_dataset_label
from ..records import Device, Memory, Metric, MetricVerdict, ScenarioResult
from ..run.telemetry import BAD_THROTTLE_REASONS
from ..status import OK
from .format import distinct

REFERENCE_DATA = Path(__file__).resolve().parent / "reference_data.json"
CPU_CLOCKS = "no GPU: clocks and throttling not measured (CPU tier)"

# The study's names (arXiv 2601.11580, figure 1: speedup against batch size on H100), kept here only.
# Substrings of a scenario's model name or path -> the model tag in the panel titles.
STUDY_MODELS = (
    ("llama3.1-8b", "L3.1-8B"),
    ("llama-3.1-8b", "L3.1-8B"),
    ("llama3-70b", "L3-70B"),
    ("llama-3-70b", "L3-70B"),
    ("qwen3-8b", "Q3-8B"),
)
# A scenario's dataset -> the dataset tag in the panel titles.


def _model(result: ScenarioResult) -> str:
    return result.scenario.model.name


def _method(result: ScenarioResult) -> str:
    return result.scenario.method.label


# --------------------------------------------------------------------------- spreads


@dataclass(frozen=True)
class MetricSpread:
    """A metric verdict with the round statistics (judge.metrics.summarise) of each side; None without samples."""

    verdict: MetricVerdict
    baseline_stats: dict | None
    current_stats: dict | None


def _stats(samples: list[float] | None) -> dict | None:
    return summarise(samples) if samples else None


def metric_spreads(result: ScenarioResult) -> list[MetricSpread]:
    """One entry per metric verdict; per-position samples are flattened to acceptance_pos<i> as the judge does."""
    current = metric_samples(result.metrics)
    stored = result.baseline.metric_samples if result.baseline else {}
    previous = metric_samples({name: Metric(value=None, samples=samples or []) for name, samples in stored.items()})
    verdicts = result.verdict.metrics if result.verdict else []
    return [MetricSpread(m, _stats(previous.get(m.metric)), _stats(current.get(m.metric))) for m in verdicts]


# --------------------------------------------------------------------------- acceptance


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


@dataclass(frozen=True)
class AcceptanceTable:
    columns: list[str]
    rows: list[AcceptanceRow]


def acceptance_table(results: list[ScenarioResult]) -> AcceptanceTable:
    """Acceptance per (model, method) and dataset, pooled over batch sizes; finished SD scenarios only."""
    cells: dict[tuple[str, str], dict[str, list[ScenarioResult]]] = {}
    for r in results:
        if r.status == OK and not r.scenario.is_reference:
            cells.setdefault((_model(r), _method(r)), {}).setdefault(r.scenario.dataset, []).append(r)
    columns = sorted({dataset for by_dataset in cells.values() for dataset in by_dataset})
    rows = []
    for (model, method), by_dataset in sorted(cells.items()):
        row = [
            AcceptanceCell(pooled_acceptance(members), sorted({m.scenario.batch_size for m in members}))
            if (members := by_dataset.get(dataset))
            else None
            for dataset in columns
        ]
        rows.append(AcceptanceRow(model, method, row))
    return AcceptanceTable(columns, rows)


# --------------------------------------------------------------------------- where SD pays


def speedup_curves(results: list[ScenarioResult]) -> dict[tuple[str, str, str], dict[int, float]]:
    """(model, dataset, method) -> batch size -> measured speedup, for SD scenarios that have one."""
    curves: dict[tuple[str, str, str], dict[int, float]] = {}
    for r in results:
        speedup = r.value("speedup")
        if not r.scenario.is_reference and speedup is not None and not r.scenario.serves:  # x: batch size
            curves.setdefault((_model(r), r.scenario.dataset, _method(r)), {})[r.scenario.batch_size] = speedup
    return curves


@dataclass(frozen=True)
class PayLimit:
    """The largest batch size at which a method's speedup is above 1.0 (None: at no size tested)."""

    model: str
    dataset: str
    method: str
    points: dict[int, float]  # batch size -> speedup, ascending
    largest: int | None
    all_pay: bool  # above 1.0 at every size tested
    gap: bool  # at or below 1.0 at some size smaller than `largest`


@dataclass(frozen=True)
class BestMethod:
    model: str
    dataset: str
    batch_size: int
    method: str
    speedup: float
    others: list[tuple[str, float]]  # the other methods, fastest first

    @property
    def pays(self) -> bool:
        return self.speedup > 1.0


@dataclass(frozen=True)
class SdPays:
    limits: list[PayLimit]
    best: list[BestMethod]


def where_sd_pays(results: list[ScenarioResult]) -> SdPays:
    curves = speedup_curves(results)
    limits = []
    for (model, dataset, method), points in sorted(curves.items()):
        points = dict(sorted(points.items()))
        paying = [b for b, s in points.items() if s > 1.0]
        largest = max(paying) if paying else None
        limits.append(
            PayLimit(
                model,
                dataset,
                method,
                points,
                largest,
                bool(paying) and len(paying) == len(points),
                bool(paying) and any(b < largest and s <= 1.0 for b, s in points.items()),
            )
        )
    cells: dict[tuple[str, str, int], list[tuple[float, str]]] = {}
    for (model, dataset, method), points in curves.items():
        for batch_size, speedup in points.items():
            cells.setdefault((model, dataset, batch_size), []).append((speedup, method))
    best = []
    for (model, dataset, batch_size), options in sorted(cells.items()):
        options.sort(key=lambda o: (-o[0], o[1]))
        best.append(
            BestMethod(model, dataset, batch_size, options[0][1], options[0][0], [(m, s) for s, m in options[1:]])
        )
    return SdPays(limits, best)


# --------------------------------------------------------------------------- peak memory


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
            key = (_model(r), r.scenario.dataset, r.scenario.batch_size)
            groups.setdefault(key, {})[None if r.scenario.is_reference else _method(r)] = r
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


# --------------------------------------------------------------------------- config drift


@dataclass(frozen=True)
class Drift:
    key: str
    baseline: Any
    current: Any


def config_drift(current: dict | None, baseline: dict | None) -> list[Drift]:
    """Effective-config keys whose value differs from the baseline's (defaults drift across vLLM versions)."""
    if current is None or baseline is None:
        return []
    return [
        Drift(k, baseline.get(k), current.get(k))
        for k in sorted(set(current) | set(baseline))
        if current.get(k) != baseline.get(k)
    ]


# --------------------------------------------------------------------------- clocks


@dataclass(frozen=True)
class Clocks:
    """GPU clocks and throttling over the scenarios: the lowest median SM clock, the union of throttle reasons."""

    measured: bool
    line: str
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    throttle_reasons: list[str] = field(default_factory=list)  # clock-lowering ones first
    bad_reasons: list[str] = field(default_factory=list)
    bad_scenarios: list[str] = field(default_factory=list)


def clock_summary(results: list[ScenarioResult], devices: list[Device]) -> Clocks:
    # gpu_telemetry is run.gpus.TelemetrySampler.summary(): a dict whose spreads may be None
    sampled = [(r.id, r.gpu_telemetry) for r in results if r.gpu_telemetry]
    if not sampled:
        kinds = {d.kind for d in devices}
        return Clocks(
            False,
            "GPU clocks and throttling not recorded"
            if "gpu" in kinds
            else CPU_CLOCKS
            if "cpu" in kinds
            else "clocks and throttling unknown",
        )
    medians = [m for _, t in sampled if (m := (t.get("sm_clock_mhz") or {}).get("median")) is not None]
    maxima = [
        m
        for d in devices
        for g in (d.model_extra or {}).get("gpus") or []
        if (m := g.get("max_sm_clock_mhz")) is not None
    ]
    reasons = sorted(
        distinct(name for _, t in sampled for name in t.get("throttle_reasons") or []),
        key=lambda name: name not in BAD_THROTTLE_REASONS,
    )
    clock = f"SM clock {min(medians):.0f} MHz" if medians else "SM clock not sampled"
    if maxima:
        clock += f" (max {max(maxima):.0f})"
    return Clocks(
        True,
        f"{clock}, throttling: {', '.join(reasons) or 'none seen'}",
        min(medians) if medians else None,
        max(maxima) if maxima else None,
        reasons,
        [x for x in reasons if x in BAD_THROTTLE_REASONS],
        [sid for sid, t in sampled if BAD_THROTTLE_REASONS.intersection(t.get("throttle_reasons") or [])],
    )


# --------------------------------------------------------------------------- the study


def load_reference() -> dict:
    """The study's figure data shipped with the suite (arXiv 2601.11580), or {} when unreadable."""
    try:
        return json.loads(REFERENCE_DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def study_panel(model_name: str, model_path: str, dataset: str, reference: dict) -> tuple[str, dict] | None:
    """The figure 1 panel (title, series) for a (model, dataset), when the study measured that pair."""
    names = (model_name.lower(), model_path.lower())
    tag = next((t for key, t in STUDY_MODELS if any(key in n for n in names)), None)
    dataset_tag = study_dataset_label(dataset)
    if tag is None or dataset_tag is None:
        return None
    panels = reference.get("fig1_speedup_vs_batch", {}).get("panels", {})
    for title, series in panels.items():
        if title.split(") ", 1)[-1] == f"{tag} {dataset_tag}":
            return title, series
    return None


def study_series_name(method_name: str, params: dict) -> str | None:
    """The figure 1 series that a method corresponds to (same vLLM method and k)."""
    return method_of(method_name).study_series.get(params.get("num_speculative_tokens"))
