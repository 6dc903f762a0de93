"""How a scenario is judged (the profile's rules), and the one contract every judge keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..records import BaselineRef, ScenarioResult, Verdict
from ..records.scenario import GATE_TOLERANCE
from .metrics import spec_for


@dataclass(frozen=True)
class Rules:
    """How a scenario is judged: the profile's tolerances, the metrics that do not fail it, and the
    gate's.  Always taken from the profile in force (`Rules.of` its scenario), never from the result
    file being judged, so that no file on disk can widen its own gate.  The defaults are the metrics'
    own tolerances, every metric gating."""

    tolerances: dict[str, float] = field(default_factory=dict)
    informational: frozenset[str] = frozenset()
    gate_tolerance: float = GATE_TOLERANCE
    gate_engine_offset: float = 0.0

    @classmethod
    def of(cls, scenario: Any) -> Rules:
        """The rules of a scenario of the profile in force (profiles.scenarios.Scenario)."""
        return cls(
            dict(scenario.tolerances),
            frozenset(scenario.informational),
            scenario.gate_tolerance,
            scenario.gate_engine_offset,
        )

    def tolerance(self, metric: str) -> float | None:
        """The profile's override for this metric (or for its spec, e.g. per_position_acceptance), if any."""
        return self.tolerances.get(metric, self.tolerances.get(spec_for(metric).name))

    def is_informational(self, metric: str) -> bool:
        return metric in self.informational or spec_for(metric).name in self.informational


DEFAULT_RULES = Rules()


@dataclass(frozen=True)
class Judgement:
    """What a judge says of a result: its verdict, and the baseline that judged it (for the report)."""

    verdict: Verdict
    baseline: BaselineRef | None = None


class Judge(Protocol):
    """The one judging contract: the stored, rolling and paired-gate judges each implement it, and
    change nothing they are given; the run session calls its judge once per result."""

    def __call__(self, result: ScenarioResult, rules: Rules) -> Judgement: ...
