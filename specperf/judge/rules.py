"""How a scenario is judged (the profile's rules), and the one contract every judge keeps."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..records import BaselineRef, ScenarioResult, Verdict
from ..records.scenario import GATE_TOLERANCE
from .metrics import spec_for


@dataclass(frozen=True)
class Rules:
    """How a scenario is judged: the profile's tolerances, the metrics that do not fail it, and the
    gate's.  Always taken from the profile in force (`Rules.of` its scenario), never from the result
    file being judged, so that no file on disk can widen its own gate.  The defaults are the metrics'
    own tolerances, every metric gating (in a sampled scenario, those of MetricSpec.gates_sampled)."""

    tolerances: dict[str, float] = field(default_factory=dict)
    informational: frozenset[str] = frozenset()
    gate_tolerance: float = GATE_TOLERANCE
    gate_engine_offset: float = 0.0
    sampled: bool = False  # the scenario judged samples its tokens

    @classmethod
    def of(cls, scenario: Any) -> Rules:
        """The rules of a scenario of the profile in force (profiles.scenarios.Scenario)."""
        return cls(
            dict(scenario.tolerances),
            frozenset(scenario.informational),
            scenario.gate_tolerance,
            scenario.gate_engine_offset,
        ).for_scenario(scenario)

    def for_scenario(self, scenario: Any) -> Rules:
        """These rules for `scenario` (records.Scenario): whether it samples decides which acceptance
        figures gate by default.  Every judge applies it, so rules taken from no profile do too."""
        return replace(self, sampled=not scenario.sampling.greedy)

    def tolerance(self, metric: str) -> float | None:
        """The profile's override for this metric (or for its spec, e.g. per_position_acceptance), if any."""
        return self.tolerances.get(metric, self.tolerances.get(spec_for(metric).name))

    def speed_tolerance(self, metric: str) -> float:
        """A gate's tolerance for a paired speed change: the profile's for this metric (e.g. a wider
        one for speedup, a ratio of two engines' throughputs and so about sqrt(2) times as noisy), else
        gate_tolerance."""
        tolerance = self.tolerance(metric)
        return self.gate_tolerance if tolerance is None else tolerance

    def is_informational(self, metric: str) -> bool:
        return self.why_informational(metric) is not None

    def why_informational(self, metric: str) -> str | None:
        """Why `metric` is judged and shown but fails nothing (None: it gates): the profile named it
        so; or, in a sampled scenario, it is an acceptance figure that explains the gating ones (not
        MetricSpec.gates_sampled) and the profile gave it no tolerance of its own (one makes it gate)."""
        spec = spec_for(metric)
        if metric in self.informational or spec.name in self.informational:
            return "does not fail this profile"
        if self.sampled and not spec.gates_sampled and self.tolerance(metric) is None:
            return "explains the acceptance lengths of a sampled scenario; a tolerance in the profile makes it gate"
        return None


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
