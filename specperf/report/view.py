"""The report's view model: built once from the loaded results, then read by every renderer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..analysis import traces
from ..analysis.best_k import KChoice, best_k_table
from ..analysis.dynamic_sd import DynamicAgainstFixed, dynamic_against_fixed
from ..judge.verdicts import Z95
from ..profiles.registry import scenarios_loading_code
from ..records import Device, ScenarioResult
from ..run.hardware.telemetry import foreign_process_text
from ..status import (
    ERROR,
    FAILING,
    IMPROVEMENT,
    INCOMPATIBLE,
    INCONCLUSIVE,
    INVALID,
    NO_BASELINE,
    OK,
    PASS,
    REGRESSION,
    SEVERITY,
    SKIPPED,
)
from ..storage import parse_time
from .analyses.acceptance import AcceptanceTable, acceptance_table
from .analyses.clocks import Clocks, clock_summary
from .analyses.memory import MemoryTable, memory_table
from .analyses.sd_pays import SdPays, where_sd_pays
from .analyses.spreads import MetricSpread, metric_spreads
from .format import distinct, fmt_change, fmt_duration, fmt_p, fmt_spread
from .gate import GateView, gate_view
from .loading import RunData
from .serving import ServeTables, serve_tables
from .traces import TraceViews, trace_views
from .tree_chain import TreeVsChain, tree_vs_chain

IMPROVEMENT_HINT = "improvement — consider refreshing the baseline (--update-baselines)"
KEY_METRICS = ("throughput_tok_s", "speedup", "mean_acceptance_length", "draft_acceptance_rate", "lossless_fraction")
ATTENTION = (ERROR, REGRESSION, INCONCLUSIVE, INVALID)  # verdicts listed first, with their change and reason


def severity_rank(status: str) -> float:
    """Position in SEVERITY (worst first), skipped after pass; an unknown status sorts beside incompatible."""
    if status in SEVERITY:
        return SEVERITY.index(status)
    if status == SKIPPED:
        return len(SEVERITY)
    return SEVERITY.index(INCOMPATIBLE) + 0.5


def status_class(status: str) -> str:
    """The CSS class of a status word; statuses from newer writers get "unknown"."""
    return status if status in SEVERITY or status == SKIPPED else "unknown"


def metric_line(spread: MetricSpread) -> str:
    """'throughput_tok_s regression +3.6%: 130 ±6.3% (n=4) → 134.7 ±1.2% (n=5), p 0.01 (note)'."""
    m = spread.verdict
    text = (
        f"{m.metric} {m.status} {fmt_change(m.change)}: {fmt_spread(m.baseline, spread.baseline_stats)} → "
        f"{fmt_spread(m.current, spread.current_stats)}"
    )
    if m.p_value is not None:
        text += f", p {fmt_p(m.p_value)}"
    return text + (f" ({m.note})" if m.note else "")


@dataclass(frozen=True)
class ScenarioView:
    """One result with its verdict made explicit: a result without one is an error, skipped or unjudged."""

    result: ScenarioResult
    status: str
    note: str
    spreads: list[MetricSpread]
    source: str  # the run directory it came from

    @property
    def id(self) -> str:
        return self.result.id

    @property
    def model(self) -> str:
        return self.result.scenario.model.name

    @property
    def method(self) -> str:
        return self.result.scenario.method.label

    @property
    def is_sd(self) -> bool:
        return not self.result.scenario.is_reference

    @property
    def batch_size(self) -> int:
        return self.result.scenario.batch_size

    @property
    def dataset(self) -> str:
        return self.result.scenario.dataset

    @property
    def css(self) -> str:
        return status_class(self.status)

    @property
    def failed(self) -> bool:
        """Whether this scenario failed its run, as its verdict says (an inconclusive gate may only warn)."""
        verdict = self.result.verdict
        return verdict.failed if verdict is not None and verdict.status == self.status else self.status in FAILING

    @property
    def rank(self) -> float:
        return severity_rank(self.status)

    @property
    def error(self) -> str:
        return self.result.error or ""

    @property
    def attribution(self) -> traces.Attribution | None:
        """What moved, from the traces, where speed regressed and both sides were traced."""
        return traces.attribution_of(self.result) if self.status == REGRESSION else None

    @property
    def hint(self) -> str:
        if self.status == IMPROVEMENT:
            return IMPROVEMENT_HINT
        moved = self.attribution
        return f"what moved, from the traces: {moved.line()}" if moved else ""

    def value(self, metric: str):
        return self.result.value(metric)

    def interval(self, metric: str) -> tuple[float, float] | None:
        """A sampled scenario's 95% interval of `metric` over its requests (judge/sampled.py), or None."""
        entry = self.result.metrics.get(metric)
        if entry is None or not isinstance(entry.value, (int, float)) or not isinstance(entry.se, (int, float)):
            return None
        return entry.value - Z95 * entry.se, entry.value + Z95 * entry.se

    def judged(self, metric: str):
        """The verdict of one metric, or None where it was not judged."""
        return next((s.verdict for s in self.spreads if s.verdict.metric == metric), None)

    @property
    def flagged(self) -> list[MetricSpread]:
        """Metric verdicts other than pass and no-baseline, worst first."""
        return sorted(
            (s for s in self.spreads if s.verdict.status not in (PASS, NO_BASELINE)),
            key=lambda s: severity_rank(s.verdict.status),
        )

    @property
    def reason(self) -> str:
        """Why the scenario has its verdict: the error line, or the verdict's note."""
        return self.error if self.status in (ERROR, SKIPPED) and self.error else self.note

    def why(self) -> list[str]:
        """Short lines naming what made a scenario fail (or look suspicious), for summaries."""
        if self.status in (ERROR, SKIPPED) and self.error:
            return [self.error]
        lines = [self.note] if self.note else []
        lines += [metric_line(s) for s in self.flagged]
        return lines + ([self.hint] if self.hint else [])


def scenario_view(result: ScenarioResult, source: Path | None = None) -> ScenarioView:
    verdict = result.verdict
    if result.status == SKIPPED:
        status, note = SKIPPED, (verdict.note if verdict else "") or result.error or ""
    elif verdict is None:
        status, note = (NO_BASELINE if result.status == OK else ERROR), "no verdict recorded"
    else:
        status, note = verdict.status, verdict.note
    return ScenarioView(result, status, note, metric_spreads(result), "" if source is None else str(source))


def _order(view: ScenarioView) -> tuple:
    """Worst verdict first, then model, dataset, method and batch size."""
    return view.rank, view.model, view.dataset, view.method, view.batch_size, view.id


def verdict_counts(statuses) -> dict[str, int]:
    """Scenarios per verdict: every verdict of SEVERITY (zeros included), then any other status seen."""
    counts = {status: 0 for status in SEVERITY}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return counts


@dataclass(frozen=True)
class Count:
    status: str
    n: int

    @property
    def css(self) -> str:
        return status_class(self.status)


@dataclass(frozen=True)
class Header:
    """Run-level facts: what ran, where, with what, and how it went."""

    run_ids: list[str]
    profiles: list[str]
    counts: list[Count]
    total: int
    failed: int
    vllm: list[str]
    vllm_distribution: list[str]
    torch: list[str]
    baseline_vllm: list[str]
    devices: list[str]
    drivers: list[str]
    foreign_at_preflight: list[str]  # processes computing on the GPUs before the run started
    clocks: Clocks
    throttle_warning: str
    hardware_keys: list[str]
    git_commits: list[str]
    suite_versions: list[str]
    started: str | None
    finished: str | None
    run_time: str
    engine_starts: int | None
    has_run_file: bool
    interrupted: bool
    problems: list[str]
    stand_ins: list[str]
    loads_code: list[str]  # engine arguments and variables that loaded code (profiles/registry.py)


def _device_name(device: Device) -> str:
    name = device.name or device.kind
    return name + (f" x{device.count}" if device.kind == "gpu" and device.count and device.count > 1 else "")


def _driver(device: Device) -> str | None:
    cuda = (device.model_extra or {}).get("cuda_driver_version")
    return device.driver and device.driver + (f" (CUDA {cuda})" if cuda else "")


def _foreign_at_preflight(devices: list[Device]) -> list[str]:
    return distinct(foreign_process_text(p.to_json()) for d in devices for p in d.foreign_processes())


def build_header(data: RunData, views: list[ScenarioView]) -> Header:
    results, runs = data.results, data.runs
    provenances = [r.provenance for r in results] + [r.provenance for r in runs]
    devices = [r.device for r in results] + [r.device for r in runs]
    starts = [t for x in [*runs, *results] if (t := parse_time(x.started_at))]
    ends = [t for x in [*runs, *results] if (t := parse_time(x.finished_at))]
    started, finished = min(starts, default=None), max(ends, default=None)
    wall = sum(r.stats.wall_s for r in runs)
    counts = verdict_counts(v.status for v in views)
    clocks = clock_summary(results, devices)
    return Header(
        run_ids=distinct(r.run_id for r in runs) or [d.name for d in data.run_dirs],
        profiles=distinct([r.profile for r in runs] + [r.scenario.profile for r in results]),
        counts=[Count(s, n) for s, n in counts.items()],
        total=len(results),
        failed=sum(view.failed for view in views),
        vllm=distinct(str(p.get("vllm") or "") for p in provenances),
        vllm_distribution=distinct(str(p.get("vllm_distribution") or "") for p in provenances),
        torch=distinct(str(p.get("torch") or "") for p in provenances),
        baseline_vllm=distinct(r.baseline.vllm for r in results if r.baseline),
        devices=distinct(_device_name(d) for d in devices),
        drivers=distinct(_driver(d) for d in devices),
        foreign_at_preflight=_foreign_at_preflight(devices),
        clocks=clocks,
        throttle_warning=(
            f"GPU throttling that lowers clocks was seen ({', '.join(clocks.bad_reasons)}) in "
            f"{len(clocks.bad_scenarios)} of {len(results)} scenarios: their throughput and "
            "speedup are suspect."
            if clocks.bad_reasons
            else ""
        ),
        hardware_keys=distinct(d.hardware_key for d in devices),
        git_commits=distinct(str(p.get("git_commit") or "") for p in provenances),
        suite_versions=distinct(str(p.get("suite_version") or "") for p in provenances),
        started=started.isoformat(timespec="seconds") if started else None,
        finished=finished.isoformat(timespec="seconds") if finished else None,
        run_time=fmt_duration(
            wall if wall > 0 else (finished - started).total_seconds() if started and finished else None
        ),
        engine_starts=sum(r.stats.engine_starts for r in runs) if runs else None,
        has_run_file=bool(runs),
        interrupted=any(r.interrupted or r.finished_at is None for r in runs),
        problems=list(data.problems),
        stand_ins=distinct(r.workload.stand_in for r in results if r.workload),
        loads_code=scenarios_loading_code(r.scenario for r in results),
    )


@dataclass(frozen=True)
class ReportView:
    """Everything the HTML page, the Markdown summary and the JSON summary show."""

    data: RunData
    header: Header
    scenarios: list[ScenarioView]  # worst verdict first
    acceptance: AcceptanceTable
    pays: SdPays
    memory: MemoryTable
    gate: GateView | None = None
    traces: TraceViews = field(default_factory=TraceViews)
    serving: ServeTables = field(default_factory=lambda: ServeTables([], []))
    trees: list[TreeVsChain] = field(default_factory=list)  # the study's tree against chain
    best_k: list[KChoice] = field(default_factory=list)  # the measured best k of each sweep
    dynamic: list[DynamicAgainstFixed] = field(default_factory=list)  # dynamic SD against the fixed k

    @property
    def attention(self) -> list[ScenarioView]:
        return [v for v in self.scenarios if v.status in ATTENTION]


def build_view(data: RunData) -> ReportView:
    views = sorted((scenario_view(r, data.sources.get(r.id)) for r in data.results), key=_order)
    return ReportView(
        data,
        build_header(data, views),
        views,
        acceptance_table(data.results),
        where_sd_pays(data.results),
        memory_table(data.results),
        gate_view(data.runs, data.results),
        trace_views(data.results),
        serve_tables(data.results),
        tree_vs_chain(data.results),
        best_k_table(data.results),
        dynamic_against_fixed(data.results),
    )
