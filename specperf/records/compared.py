"""Records of how a scenario compared: each metric's verdict and the scenario's, the baseline that
judged it, and an upgrade gate's view of the current build beside the candidate."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, computed_field, field_validator, model_validator

from ..status import FAILING, INCONCLUSIVE
from .base import Provenance, Record
from .measured import Metric, RequestAcceptance, Round, Trace, Validity, checked_metrics


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
    inconclusive_fails: bool = True  # --inconclusive fail (the default) or warn

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
        return self.status in FAILING or (self.status == INCONCLUSIVE and self.inconclusive_fails)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def message(self) -> str:
        if not self.failed:
            return ""
        lines = [f"{self.scenario_id}: {self.status}" + (f" ({self.note})" if self.note else "")]
        lines += ["  " + m.line() for m in self.metrics if m.status in (*FAILING, INCONCLUSIVE)]
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
    # a sampled SD scenario's counts per request, for judging its acceptance request by request
    request_acceptance: list[RequestAcceptance] = Field(default_factory=list, exclude_if=lambda counts: not counts)
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
    # a sequential gate's looks (--gate-max-sets), as fractions of the engine pairs it may reach; empty: one look
    looks: list[Annotated[float, Field(gt=0, le=1)]] = Field(default_factory=list)
    config_diff: dict[str, Annotated[list[Any], Field(min_length=2, max_length=2)]] = Field(
        default_factory=dict
    )  # setting -> [current, candidate]
