"""Records of what was measured: rounds, metrics, memory, traces, the device."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, NonNegativeInt, TypeAdapter, ValidationError, model_validator

from .base import Number, Record

# ------------------------------------------------------------------ what was measured


class Counters(Record):
    """vLLM's spec-decode counters over some calls (see run.engines.process.read_spec_counters)."""

    drafts: Number = 0
    draft_tokens: Number = 0
    accepted: Number = 0
    accepted_per_pos: list[Number] = Field(default_factory=list)


class RequestAcceptance(Record):
    """One request's SD counts over a result's measured rounds, from vLLM's per-request metrics: its
    verify steps (those that drafted), tokens drafted and accepted, and accepted at each draft position."""

    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = Field(default_factory=list)

    @classmethod
    def of_histogram(cls, histogram: list[int], drafted: int) -> RequestAcceptance:
        """vLLM's counts (histogram[j]: verify steps that accepted j drafts): acceptance is a prefix,
        so position p is accepted in every step that accepted more than p."""
        return cls(
            steps=sum(histogram),
            drafted=drafted,
            accepted=sum(j * count for j, count in enumerate(histogram)),
            accepted_per_pos=[sum(histogram[p + 1 :]) for p in range(len(histogram) - 1)],
        )

    def __add__(self, other: RequestAcceptance) -> RequestAcceptance:
        longest = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        pad = [0] * longest
        return RequestAcceptance(
            steps=self.steps + other.steps,
            drafted=self.drafted + other.drafted,
            accepted=self.accepted + other.accepted,
            accepted_per_pos=[
                a + b for a, b in zip((self.accepted_per_pos + pad)[:longest], (other.accepted_per_pos + pad)[:longest])
            ],
        )


class CallTiming(Record):
    """One generate() call of a round: its time, its tokens, and whether its first request ended on EOS."""

    wall_s: float
    output_tokens: int
    eos: bool | None = None


class Round(Record):
    wall_s: float
    output_tokens: int
    throughput: float
    counters: Counters = Field(default_factory=Counters)
    calls: list[CallTiming] = Field(default_factory=list)
    cpu_s: float | None = None  # CPU time (user + system) of the engine's process tree
    engine_instance: int = 0  # in a paired run: the engine pair (cluster) the round ran on
    latency: dict[str, float | None] | None = None  # serve: p50/p90/p99 of each latency in s (run/serving/load.py)
    errors: int = 0  # serve: requests of the round that failed
    client_bound: bool = False  # serve: the load generator kept a core busy, so it may have set the pace


class StudyThroughput(Record):
    """Throughput as the study defines it (judge/metrics.study_throughput): the mean over EOS-finished
    calls of output tokens / call time; the median over rounds, each round's value, and the calls used."""

    value: float | None = None
    samples: list[float | None] = Field(default_factory=list)
    eos_calls: int = 0
    calls: int = 0


class Metric(Record):
    """A metric's value (the median over rounds) and its samples; per-position rates are lists."""

    value: float | list[float] | None
    samples: list[float | list[float] | None] = Field(default_factory=list)
    # a sampled scenario's acceptance: the value's standard error over requests (judge/sampled.py);
    # left out of the file where there is none, so that greedy files stay as they were
    se: float | list[float] | None = Field(default=None, exclude_if=lambda se: se is None)


# One value per draft position: each name with the prefix its positions are judged under (acceptance_pos0, ...)
VECTOR_METRICS = {
    "per_position_acceptance": "acceptance_pos",
    "request_per_position_acceptance": "request_acceptance_pos",
}


def checked_metrics(metrics: dict[str, Metric]) -> dict[str, Metric]:
    """Vector metrics hold lists (per round), every other metric numbers."""
    for name, metric in metrics.items():
        vector = name in VECTOR_METRICS
        for value in [metric.value, *metric.samples, metric.se]:
            if value is not None and isinstance(value, list) != vector:
                raise ValueError(
                    f"{name}: {'a list per draft position' if vector else 'a number'} expected, got {value!r}"
                )
    return metrics


class Validity(Record):
    valid: bool
    reasons: list[str] = Field(default_factory=list)


class Lossless(Record):
    identical: int
    total: int
    reference_id: str


class OutputCheck(Record):
    """How a result's greedy outputs were checked (run/output_check.py): against no-SD's (lossless)
    and for repeating themselves (stability), on the timing rounds, on rounds of their own in vLLM's
    batch-invariant mode, or not at all (the reason in `note`)."""

    TIMING: ClassVar[str] = "timing rounds"
    OWN_ROUNDS: ClassVar[str] = "own rounds"
    NOT_CHECKED: ClassVar[str] = "not checked"

    way: str
    stable: bool | None = None  # own rounds: every prompt gave the same output alone as in one batch
    prompts: int = 0  # own rounds: the distinct prompts checked
    note: str = ""


class ShownOutput(Record):
    request_id: str
    prompt: str
    output: str


class WorkloadFacts(Record):
    source: str | None = None
    checksum: str | None = None
    stand_in: str | None = None
    request_ids: list[str] = Field(default_factory=list)
    prompt_tokens: list[int] = Field(default_factory=list)
    output_len: int | None = None
    overlap_bleu4: list[float] = Field(default_factory=list)
    selection: str | None = None  # how the requests were chosen (workloads/sampling.py)


class Memory(Record):
    peak_mib: float | None = None
    source: str | None = None
    # From the checkpoints' configs (profiles.model_memory); a draft's 0 where the method has none.
    weights_bytes: int | None = None
    draft_weights_bytes: int | None = None
    kv_bytes_per_token: int | None = None
    draft_kv_bytes_per_token: int | None = None
    weights_dtype: str | None = None
    kv_dtype: str | None = None
    estimate_note: str | None = None  # why a figure is None


class Timings(Record):
    engine_start_s: float = 0.0
    warmup_s: float = 0.0
    measure_s: float = 0.0

    def parts(self) -> dict[str, float]:
        """The timings this suite knows (a newer file's extra fields are kept, never shown as times)."""
        return {name: getattr(self, name) for name in Timings.model_fields}


class RequestTrace(Record):
    """One request of the traced round: draft tokens proposed and accepted at each verification step,
    and what n-gram (analysis/ngram.py) and the scenario's draft model (run/engines/draft_lm.py, draft-model and
    adaptive scenarios) would produce at every output position."""

    request_id: str
    drafted: list[NonNegativeInt]
    accepted: list[NonNegativeInt]
    ngram_acc: list[NonNegativeInt] = Field(default_factory=list)
    draft_acc: list[NonNegativeInt] = Field(default_factory=list)
    prompt_len: NonNegativeInt = 0


STEP_PARTS = ("total", "draft", "forward", "sample")  # the step timer's parts: microseconds in step_us
STEP_BATCH = ("tokens", "kv_tokens", "requests")  # the step's batch, in step_batch


class Trace(Record):
    """Inside the steps of a traced scenario (run.tracing.trace): per-step lists of its last measured
    round, and totals over all its measured rounds.  Step times are microseconds; rest = total -
    draft - forward - sample (scheduling, input preparation, bookkeeping)."""

    requests: list[RequestTrace] = Field(default_factory=list)
    step_us: dict[str, list[NonNegativeInt]] = Field(default_factory=dict)  # STEP_PARTS
    step_batch: dict[str, list[NonNegativeInt]] = Field(default_factory=dict)  # STEP_BATCH (tokens: forward's)
    seconds: dict[str, float] = Field(default_factory=dict)  # the same parts and rest, all rounds
    steps: int = 0  # engine steps, all rounds
    output_tokens: int = 0  # all rounds
    drafted: int = 0  # per-step counts summed, all rounds
    accepted: int = 0
    notes: list[str] = Field(default_factory=list)  # what could not be traced, and why

    @model_validator(mode="after")
    def _steps_aligned(self) -> Trace:
        """Step i of every list is one step: the readers (analysis/cost_fit.py, headroom.py) index them
        together, read step_us wherever step_batch is kept (step_us alone is a trace from before the
        batch was kept), and divide by a step's total time."""
        for name, lists, parts in (("step_us", self.step_us, STEP_PARTS), ("step_batch", self.step_batch, STEP_BATCH)):
            kept = lists or (name == "step_us" and self.step_batch)
            if kept and (missing := [p for p in parts if p not in lists]):
                raise ValueError(f"{name} lacks {', '.join(missing)}")
        if 0 in self.step_us.get("total", []):
            raise ValueError(f"step_us.total[{self.step_us['total'].index(0)}]: a step of 0 µs")
        lengths = {name: len(v) for name, v in (self.step_us | self.step_batch).items()}
        if len(set(lengths.values())) > 1:
            shortest, longest = min(lengths, key=lengths.__getitem__), max(lengths, key=lengths.__getitem__)
            raise ValueError(
                f"step lists of unequal length ({shortest} {lengths[shortest]}, {longest} {lengths[longest]})"
            )
        return self

    def totals(self) -> Trace:
        """The totals without the per-step lists: what a baseline keeps."""
        return self.model_copy(update={"requests": [], "step_us": {}, "step_batch": {}})


class ForeignProcess(Record):
    """A process the suite did not start, computing on a GPU (run/hardware/ownership.py)."""

    gpu_index: int
    pid: int  # as NVML gives it: the host's pid where NVML's pids are another PID namespace's
    used_memory_mib: int | None = None
    pid_namespace: str = "this"  # "other": told foreign by count, not by pid


class Device(Record):
    """What ran the scenario: the CPU, or the GPUs NVML described (more fields then, among them
    `foreign_processes`: those computing on the GPUs before the run started)."""

    kind: str
    name: str | None = None
    count: int | None = None
    memory_gib: float | None = None
    driver: str | None = None
    hardware_key: str = Field(min_length=1)
    facts: dict[str, Any] = Field(default_factory=dict)  # added by conftest.py (pytest_specperf_machine_facts)
    # A CPU's speed, which its key does not name: seconds of a fixed workload (run/hardware/calibration.py)
    calibration_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _foreign_processes_shaped(self) -> Device:
        """preflight's foreign_processes, a field of the GPUs' description, checked so that the report can read it."""
        try:
            _FOREIGN_PROCESSES.validate_python((self.model_extra or {}).get("foreign_processes") or [])
        except ValidationError as err:
            first = err.errors()[0]
            raise ValueError(".".join(["foreign_processes", *map(str, first["loc"])]) + f": {first['msg']}") from None
        return self

    def foreign_processes(self) -> list[ForeignProcess]:
        return _FOREIGN_PROCESSES.validate_python((self.model_extra or {}).get("foreign_processes") or [])


_FOREIGN_PROCESSES = TypeAdapter(list[ForeignProcess])
