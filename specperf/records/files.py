"""Records of how a scenario compared (verdicts, baselines, gates) and the files the suite writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field, ValidationError, computed_field, field_validator, model_validator

from ..status import FAILING, OK
from .base import SCHEMA_VERSION, Provenance, Record
from .measured import (
    Counters,
    Device,
    ForeignProcess,
    Lossless,
    Memory,
    Metric,
    OutputCheck,
    Round,
    ShownOutput,
    StudyThroughput,
    Timings,
    Trace,
    Validity,
    WorkloadFacts,
    checked_metrics,
)
from .scenario import Scenario

# ------------------------------------------------------------------ shapes of the plain dicts


class Spread(Record):
    min: float
    median: float
    max: float


class MemoryUsed(Record):
    start: float
    peak: float


class GpuTelemetry(Record):
    """The shape of ScenarioResult.gpu_telemetry (run/telemetry.TelemetrySampler.summary()).

    Results from before the ownership, foreign_processes and violation_ms fields have foreign_pids alone."""

    samples: int = 0
    interval_s: float | None = None
    sm_clock_mhz: Spread | None = None
    mem_clock_mhz: Spread | None = None
    temperature_c: Spread | None = None
    power_w: Spread | None = None
    throttle_reasons: list[str] = Field(default_factory=list)
    memory_used_mib: MemoryUsed | None = None
    foreign_pids: list[int] = Field(default_factory=list)
    foreign_processes: list[ForeignProcess] = Field(default_factory=list)
    ownership: str | None = None  # "pids", "counted" or None (ownership.BY_PID, BY_COUNT)
    violation_ms: dict[str, float] | None = None  # NVML violation counters' growth (run/telemetry.py)


class Environment(Record):
    """The shape of one build in RunFile.environments (run/environments.describe())."""

    python: str | None = None
    vllm: str | None = None
    distribution: str | None = None
    methods: dict[str, str | None]  # SD method -> None (supported) or why not


def shaped_as(model: type[Record]) -> Callable[[Any], Any]:
    """A field validator that checks a plain dict (or each value of a dict of them) against `model`
    and keeps it a dict: what the report reads of it is then there and of its type."""

    def check(value: Any) -> Any:
        try:
            if value is not None:
                model.model_validate(value)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"{where}: {first['msg']}" if where else first["msg"]) from None
        return value

    return check


def each_shaped_as(model: type[Record]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    check = shaped_as(model)
    return lambda values: {key: check(value) for key, value in values.items()}


# ------------------------------------------------------------------ how it compared


class MetricVerdict(Record):
    metric: str
    status: str
    baseline: float | None = None
    current: float | None = None
    change: float | None = None  # relative, signed: (current - baseline) / baseline
    tolerance: float | None = None
    p_value: float | None = None
    note: str = ""
    ci_low: float | None = None  # the change's confidence interval (paired comparisons)
    ci_high: float | None = None
    judged_by: str = ""  # "hardware" or "portable" baseline, or "paired" rounds
    between_engines: float | None = None  # paired: SD of the offset between fresh engines (log units)
    between_pairs: float | None = None  # paired: SD of one pair's noise (log units)

    def line(self) -> str:
        def fmt(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.4g}"

        change = "n/a" if self.change is None else f"{self.change:+.1%}"
        tolerance = "n/a" if self.tolerance is None else f"{self.tolerance:.1%}"
        p_value = "n/a" if self.p_value is None else f"{self.p_value:.3g}"
        interval = "" if self.ci_low is None else f" [{self.ci_low:+.1%}, {self.ci_high:+.1%}]"
        parts = [
            f"{name} {value:.1%}"
            for name, value in (("between engines", self.between_engines), ("between pairs", self.between_pairs))
            if value is not None
        ]
        interval += f" (SD {', '.join(parts)})" if parts else ""
        text = (
            f"{self.metric}: {self.status}: baseline {fmt(self.baseline)}, current {fmt(self.current)}, "
            f"change {change}{interval}, tolerance {tolerance}, p-value {p_value}"
        )
        return f"{text} ({self.note})" if self.note else text


class Verdict(Record):
    """A scenario's verdict: the worst of its gating metrics', or why it could not be judged."""

    scenario_id: str = ""
    status: str
    note: str = ""
    metrics: list[MetricVerdict] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        """`failed` and `message` are stored for readers of the JSON, and derived again on load."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in ("failed", "message")}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed(self) -> bool:
        return self.status in FAILING

    @computed_field  # type: ignore[prop-decorator]
    @property
    def message(self) -> str:
        if not self.failed:
            return ""
        lines = [f"{self.scenario_id}: {self.status}" + (f" ({self.note})" if self.note else "")]
        lines += ["  " + m.line() for m in self.metrics if m.status in FAILING]
        return "\n".join(lines)


class BaselineRef(Record):
    """What a result shows of the baseline that judged it."""

    vllm: str | None = None
    recorded_at: str | None = None
    effective_config: dict[str, Any] | None = None
    device: dict[str, Any] | None = None
    metric_medians: dict[str, float | list[float] | None] = Field(default_factory=dict)
    metric_samples: dict[str, list[float | list[float] | None] | None] = Field(default_factory=dict)
    memory_peak_mib: float | None = None
    trace: Trace | None = None

    @classmethod
    def of(cls, metrics: dict[str, Metric], **facts: Any) -> BaselineRef:
        """The medians and samples of `metrics`, with the other facts given."""
        return cls(
            metric_medians={k: m.value for k, m in metrics.items()},
            metric_samples={k: m.samples for k, m in metrics.items()},
            **facts,
        )


class Side(Record):
    """What one build measured of a scenario in a paired run (the current build, in a gate)."""

    vllm: str | None = None
    python: str | None = None
    provenance: Provenance = Field(default_factory=dict)
    effective_config: dict[str, Any] | None = None
    rounds: list[Round] = Field(default_factory=list)
    metrics: dict[str, Metric] = Field(default_factory=dict)
    output_hashes: list[str] | None = None
    validity: Validity | None = None
    _metrics_shape = field_validator("metrics")(checked_metrics)


class PairedSamples(Record):
    """One metric of both builds, pair by pair, and the engine pair (cluster) each pair ran on."""

    current: list[float]
    candidate: list[float]
    clusters: list[int]


class Gate(Record):
    """An upgrade gate's view of a scenario: the result's own figures are the candidate's, these the
    current build's, measured in alternating rounds."""

    current: Side
    candidate_python: str
    pairing: str  # "interleaved", or "blocks of N rounds"
    reference: PairedSamples | None = None  # the no-SD reference's throughput, where speedup divides by it
    reference_tpot: PairedSamples | None = None  # a serve reference's TPOT p50 (ms), for tpot_speedup
    output_drift: int = 0  # requests whose greedy output differs between the builds
    config_diff: dict[str, Annotated[list[Any], Field(min_length=2, max_length=2)]] = Field(
        default_factory=dict
    )  # setting -> [current, candidate]


# ------------------------------------------------------------------ the files


class Figures(Record):
    """What a scenario's rounds come to (run/summary.summarise), stored in its result under these
    names as they are: a new figure of the result is one field here."""

    rounds: list[Round] = Field(default_factory=list)
    counters: Counters | None = None
    memory: Memory | None = None
    output_hashes: list[str] | None = None
    outputs: list[ShownOutput] = Field(default_factory=list)
    metrics: dict[str, Metric] = Field(default_factory=dict)
    _metrics_shape = field_validator("metrics")(checked_metrics)
    study_throughput: StudyThroughput | None = None
    lossless: Lossless | None = None
    output_check: OutputCheck | None = None
    trace: Trace | None = None


class ResultHead(Record):
    """What a result says before its figures: which scenario, how it ended, where and when."""

    schema_version: int = SCHEMA_VERSION
    scenario: Scenario
    status: str
    error: str | None = None
    error_kind: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    device: Device
    provenance: Provenance = Field(default_factory=dict)
    effective_config: dict[str, Any] | None = None
    workload: WorkloadFacts | None = None
    timings: Timings | None = None


class ScenarioResult(Figures, ResultHead):
    """reports/<run-id>/results/<scenario-id>.json: one scenario of one run (its head first in the
    file, then its figures, then how it was judged)."""

    gpu_telemetry: dict[str, Any] | None = None
    _telemetry_shape = field_validator("gpu_telemetry")(shaped_as(GpuTelemetry))
    validity: Validity | None = None
    verdict: Verdict | None = None
    baseline: BaselineRef | None = None
    gate: Gate | None = None

    @property
    def id(self) -> str:
        return self.scenario.id

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def valid(self) -> bool:
        """False only when a validity rule was broken (a result that never ran has no validity)."""
        return self.validity is None or self.validity.valid

    def value(self, metric: str) -> float | list[float] | None:
        entry = self.metrics.get(metric)
        return None if entry is None else entry.value


class Baseline(Record):
    """baselines/<hardware-key>/<scenario-id>.json: the samples of a valid result, kept for comparison."""

    schema_version: int = SCHEMA_VERSION
    scenario_id: str
    scenario_hash: str
    hardware_key: str
    metrics: dict[str, Metric]
    _metrics_shape = field_validator("metrics")(checked_metrics)
    summaries: dict[str, dict[str, Any]] = Field(default_factory=dict)
    provenance: Provenance = Field(default_factory=dict)
    device: dict[str, Any] | None = None
    effective_config: dict[str, Any] | None = None
    memory: Memory | None = None
    recorded_at: str | None = None
    trace: Trace | None = None  # its totals: what a regression is attributed against


class RunStats(Record):
    engine_starts: int = 0
    engine_start_s: float = 0.0
    checkpoint_fetch_s: float = 0.0  # hub checkpoints into the cache before their engines started
    warmup_s: float = 0.0
    measure_s: float = 0.0
    scenarios: int = 0
    errors: int = 0
    resumed: int = 0
    wall_s: float = 0.0


class RunFile(Record):
    """reports/<run-id>/run.json: what ran, where, and how long each phase took."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    profile: str
    profile_path: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    interrupted: bool = False
    device: Device
    provenance: Provenance = Field(default_factory=dict)
    stats: RunStats = Field(default_factory=RunStats)
    engine_keys: list[str] = Field(default_factory=list)
    workers: int | None = None
    scenario_hashes: dict[str, str] = Field(default_factory=dict)  # the profile's, id -> content hash
    environments: dict[str, dict[str, Any]] = Field(default_factory=dict)  # a gate's builds (run.environments)
    _environments_shape = field_validator("environments")(each_shaped_as(Environment))


class NoiseEntry(Record):
    """One metric of one scenario, measured over several runs (judge.noise)."""

    runs: int = Field(ge=0)
    median: float | None = None
    round_cv: float | None = Field(default=None, ge=0)
    run_cv: float | None = Field(default=None, ge=0)

    @property
    def cv(self) -> float | None:
        """The CV that widens thresholds: run-to-run where measured (baselines come from another run)."""
        return self.run_cv if self.run_cv is not None else self.round_cv


class NoiseFile(Record):
    """baselines/<hardware-key>/noise.json: each metric's measured noise on that hardware."""

    schema_version: int = SCHEMA_VERSION
    measured_at: str | None = None
    hardware_key: str | None = None
    run_dirs: list[str] = Field(default_factory=list)
    scenarios: dict[str, dict[str, NoiseEntry]] = Field(default_factory=dict)
