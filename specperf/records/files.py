"""Records of the files the suite writes: a scenario's result, a baseline, run.json and noise.json,
and the shapes of the plain dicts they keep."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field, ValidationError, field_validator

from ..status import OK
from .base import SCHEMA_VERSION, Provenance, Record
from .compared import BaselineRef, Gate, Verdict
from .measured import (
    Counters,
    Device,
    ForeignProcess,
    Lossless,
    Memory,
    Metric,
    OutputCheck,
    RequestAcceptance,
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
    violation_ms: dict[str, float] | None = None  # NVML violation counters' growth (run/hardware/telemetry.py)


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
    # a sampled SD scenario's, per request (left out of the file where there are none)
    request_acceptance: list[RequestAcceptance] = Field(default_factory=list, exclude_if=lambda counts: not counts)


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
    # a sampled scenario's requests' counts: the next run's acceptance is judged request by request
    request_acceptance: list[RequestAcceptance] = Field(default_factory=list, exclude_if=lambda counts: not counts)
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
    environments: dict[str, dict[str, Any]] = Field(default_factory=dict)  # a gate's builds (run.builds.environments)
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
