"""The two builds of an upgrade gate side by side: each build's figures, and what differs between them."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ...judge.gate import RATIOS, look_decides
from ...judge.metrics import output_hash
from ...judge.rules import Rules
from ...profiles.scenarios import REFERENCE_METHOD, Scenario
from ...records import BaselineRef, Figures, Gate, OutputCheck, PairedSamples, ScenarioResult, Side, Validity
from ..loop import RoundResult
from ..measurement import EngineFacts, Looks, Measured
from ..summary import Checked, Reference, Summary, served_latencies, speedups, tpot_speedups

CURRENT = "current"  # this environment's vLLM (the interpreter running the suite)
CANDIDATE = "candidate"  # the other environment's (--candidate PYTHON)


@dataclass(frozen=True)
class Role:
    """Which engine of a scenario's measurement: a build's (`side`), or that build's no-SD engine
    measured beside it (`reference`, a paired_reference scenario)."""

    side: str = CURRENT
    reference: bool = False


@dataclass
class SideSummary:
    summary: Summary
    validity: Validity
    engine: EngineFacts


def reference_from_alternating_rounds(rounds: list[RoundResult], check: Checked | None = None) -> Reference:
    """An SD scenario's no-SD Reference, built from the no-SD rounds that alternated with its own
    (a `paired_reference` scenario): speedup becomes a ratio per pair.
    `check`: how the reference's outputs were checked (run/output_check.py), where not by these rounds."""
    check = check or Checked()
    throughputs = [r.throughput for r in rounds]
    tpots = [1000 * r.latency["tpot_s_p50"] for r in rounds if r.latency and r.latency.get("tpot_s_p50") is not None]
    return Reference(
        statistics.median(throughputs),
        check.hashes if check.hashes is not None else [output_hash(ids) for ids in rounds[0].token_ids],
        paired=throughputs,
        tpot_ms=statistics.median(tpots) if len(tpots) == len(rounds) else None,
        paired_tpot_ms=tpots if len(tpots) == len(rounds) else None,
        checked_by=check.way,
    )


def config_diff(current: dict | None, candidate: dict | None) -> dict[str, list]:
    """The effective engine settings that differ: setting -> [current, candidate]."""
    current, candidate = current or {}, candidate or {}
    return {
        key: [current.get(key), candidate.get(key)]
        for key in sorted(current.keys() | candidate.keys())
        if current.get(key) != candidate.get(key)
    }


def output_drift(current: Figures, candidate: Figures) -> int:
    """Requests whose greedy output differs between the builds (hashes, request by request), where
    both builds' outputs were checked the same way."""
    ways = {s.output_check.way if s.output_check else None for s in (current, candidate)}
    if len(ways) > 1 or OutputCheck.NOT_CHECKED in ways:
        return 0
    return sum(1 for a, b in zip(current.output_hashes or [], candidate.output_hashes or []) if a != b)


def current_as_baseline(current: SideSummary) -> BaselineRef:
    """The current build in the role a stored baseline has elsewhere: what the candidate is judged against."""
    return BaselineRef.of(
        current.summary.metrics,
        vllm=current.engine.provenance.get("vllm"),
        effective_config=current.engine.effective_config,
        memory_peak_mib=current.summary.memory.peak_mib,
        trace=current.summary.trace.totals() if current.summary.trace else None,
    )


def reference_pairs(result: ScenarioResult | None, metric: str) -> PairedSamples | None:
    """A gate's no-SD result as its SD scenarios need it: one metric of both builds, pair by pair
    (None where the gate has no such reference, or it lacks the metric)."""
    if result is None or result.gate is None:
        return None
    current, candidate = result.gate.current.metrics.get(metric), result.metrics.get(metric)
    if current is None or candidate is None:
        return None
    return PairedSamples(
        current=current.samples, candidate=candidate.samples, clusters=[r.engine_instance for r in result.rounds]
    )


def gated_references(result: ScenarioResult | None) -> dict[str, PairedSamples | None]:
    """A gate's no-SD result as Gate records it for its SD scenarios, by the field of each ratio
    (judge/gate.RATIOS) that divides by it."""
    return {field: reference_pairs(result, metric) for metric, field, _ in RATIOS.values()}


def gate_record(
    current: SideSummary,
    candidate: SideSummary,
    measured: Measured,
    python: str,
    reference: ScenarioResult | None = None,
) -> Gate:
    """`reference`: the gated no-SD result the SD scenario's speedups are judged relative to."""
    side = Side(
        vllm=current.engine.provenance.get("vllm"),
        provenance=current.engine.provenance,
        effective_config=current.engine.effective_config,
        rounds=current.summary.rounds,
        metrics=current.summary.metrics,
        output_hashes=current.summary.output_hashes,
        validity=current.validity,
        request_acceptance=current.summary.request_acceptance,
    )
    return Gate(
        current=side,
        candidate_python=python,
        pairing=measured.pairing,
        **gated_references(reference),
        output_drift=output_drift(current.summary, candidate.summary),
        looks=measured.looks,
        config_diff=config_diff(current.engine.effective_config, candidate.engine.effective_config),
    )


def engines_wanted(scenario: Scenario, candidate_python: str | None) -> dict[Role, tuple[Scenario, str | None]]:
    """The engines a scenario runs on, by role: this build's (current), a gate's candidate (the
    interpreter `candidate_python`), and with paired_reference their no-SD references."""
    sides = {CURRENT: None, **({CANDIDATE: candidate_python} if candidate_python else {})}
    wanted = {Role(side): (scenario, python) for side, python in sides.items()}
    if scenario.paired_reference and not scenario.method.is_reference:
        reference = scenario.replace(method=REFERENCE_METHOD)
        wanted |= {Role(side, reference=True): (reference, python) for side, python in sides.items()}
    return wanted


def unsupported_by(environments: dict | None, scenario: Scenario) -> str | None:
    """Why a build of a gate (`environments`: run.builds.environments.describe by side) cannot run the
    scenario's method; None where both can, or outside a gate."""
    for side, facts in (environments or {}).items():
        reason = facts["methods"].get(scenario.method.name) if not scenario.method.is_reference else None
        if reason:
            return f"the {side} build (vLLM {facts['vllm']}): {reason}"
    return None


def look_samples(rounds: dict[Role, list[RoundResult]], side: str, reference: Reference | None) -> dict[str, list]:
    """One build's speed samples at a sequential gate's look, figured as its summary figures them;
    `reference`: its no-SD reference measured earlier (None: none, or a no-SD scenario)."""
    own = rounds[Role(side)]
    if (paired := Role(side, reference=True)) in rounds:
        reference = reference_from_alternating_rounds(rounds[paired])
    throughputs = [r.throughput for r in own]
    latencies = served_latencies(own)
    samples = {"throughput_tok_s": throughputs} | {name: metric.samples for name, metric in latencies.items()}
    ratios = {"speedup": speedups(throughputs, reference), "tpot_speedup": tpot_speedups(latencies, reference)}
    return samples | {name: values for name, values in ratios.items() if values}


def sequential_looks(
    scenario: Scenario,
    max_sets: int,
    references: dict[str, Reference | None],
    gated: ScenarioResult | None,
    rules: Rules,
) -> Looks:
    """A sequential gate's looks (--gate-max-sets): one more set while any speed metric is undecided.
    `references`: each build's no-SD reference measured earlier, by side; `gated`: the gate's no-SD
    result that speedups are judged relative to; `rules`: the gate's judge's (GateJudge.rules)."""
    pairs = gated_references(gated)
    if scenario.method.is_reference:
        references = {}

    def decided(rounds: dict, looks: list[float]) -> bool:
        current, candidate = (look_samples(rounds, side, references.get(side)) for side in (CURRENT, CANDIDATE))
        return look_decides(current, candidate, [r.instance for r in rounds[Role(CANDIDATE)]], looks, rules, pairs)

    return Looks(max_sets, decided)
