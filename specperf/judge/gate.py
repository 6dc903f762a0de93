"""The upgrade gate's verdict: the candidate build against the current one, measured in one run.

Speed (throughput, latency, speedup) is judged pair by pair (paired.py), each pair's round knowing
the engine pair it ran on: alternating rounds cancel the machine's drift, so in a gate speed gates
even where a profile keeps it informational across runs.  A speedup (of throughput, or of a serve
scenario's TPOT) divides by the no-SD reference measured in another part of the gate, so its
change is the SD engines' change less the reference's, with both errors.  Deterministic metrics
(acceptance, per-position rates, lossless) are judged on their thresholds, as against a baseline.
Stored baselines play no part.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from ..records import MetricVerdict, PairedSamples, ScenarioResult, Verdict
from ..status import ERROR, FAILING, INCONCLUSIVE, INVALID, worst
from .paired import PRIOR_DF, RecordedOffset, compare_paired, usable_change
from .rules import DEFAULT_RULES, Judgement, Rules
from .sequential import look_confidence
from .verdicts import (
    compare_metric,
    judged_samples,
    mark_informational,
    on_interval,
    sampled_scenario_verdicts,
    spec_for,
    unknown_note,
)

# A ratio to the no-SD reference -> what it divides: the SD scenario's metric, the gate's reference
# pairs of it, and whether it is a latency (judged as its inverse, a rate, so that ratios subtract).
RATIOS = {
    "speedup": ("throughput_tok_s", "reference", False),
    "tpot_speedup": ("tpot_p50_ms", "reference_tpot", True),
}


def _rates(samples: list[float], inverse: bool) -> list[float]:
    return [1 / v if v > 0 else 0.0 for v in samples] if inverse else samples


def _relative(
    name: str,
    current: dict[str, list[float]],
    candidate: dict[str, list[float]],
    clusters: list[int] | None,
    rules: Rules,
    confidence: float,
    reference: PairedSamples | None,
) -> MetricVerdict | None:
    """A speedup judged as the SD engines' change relative to the reference's change (`reference`:
    the gated no-SD scenario's pairs of what the ratio divides); None without one."""
    metric, _, inverse = RATIOS[name]
    change = (
        None
        if reference is None
        else usable_change(
            _rates(reference.current, inverse),
            _rates(reference.candidate, inverse),
            reference.clusters,
            rules.gate_engine_offset,
        )
    )
    if change is None:
        return None
    verdict = compare_paired(
        name,
        _rates(current.get(metric, []), inverse),
        _rates(candidate.get(metric, []), inverse),
        rules.speed_tolerance(name),
        clusters,
        rules.gate_engine_offset,
        relative_to=change,
        confidence=confidence,
    )
    if verdict.status != INVALID:
        verdict.baseline = statistics.median(current[name]) if current.get(name) else None
        verdict.current = statistics.median(candidate[name]) if candidate.get(name) else None
    return verdict


def speed_verdict(
    name: str,
    current: dict[str, list[float]],
    candidate: dict[str, list[float]],
    clusters: list[int] | None,
    rules: Rules,
    confidence: float,
    references: dict[str, PairedSamples | None],
) -> MetricVerdict:
    """One speed metric of the candidate against the current build's, pair by pair (samples by metric
    name, aligned by round; `clusters`: each round's engine pair).  A ratio to the no-SD reference
    measured in another part of the gate (`references`, by RATIOS's field) is judged relative to
    the reference's change; one measured beside it divides pair by pair."""
    ratio = name in RATIOS and _relative(
        name, current, candidate, clusters, rules, confidence, references.get(RATIOS[name][1])
    )
    return ratio or compare_paired(
        name,
        current.get(name, []),
        candidate[name],
        rules.speed_tolerance(name),
        clusters if clusters is not None and len(clusters) == len(candidate[name]) else None,
        offset_floor(name, rules),
        confidence=confidence,
    )


def look_decides(
    current: dict[str, list[float]],
    candidate: dict[str, list[float]],
    clusters: list[int],
    looks: list[float],
    rules: Rules,
    references: dict[str, PairedSamples | None],
) -> bool:
    """Whether a sequential gate's look decides it: no gating speed metric of these samples (as
    speed_verdict takes them) is inconclusive at the look's confidence."""
    confidence = look_confidence(looks)
    return all(
        speed_verdict(name, current, candidate, clusters, rules, confidence, references).status != INCONCLUSIVE
        for name in candidate
        if not spec_for(name).deterministic and not rules.is_informational(name)
    )


def offset_floor(name: str, rules: Rules) -> float:
    """The floor on one cluster's offset for a metric judged pair by pair: a ratio to the no-SD
    reference measured beside it (paired_reference) spans two engine pairs, SD and no-SD, whose
    offsets add."""
    return rules.gate_engine_offset * (math.sqrt(2) if name in RATIOS else 1.0)


def judge_gate(result: ScenarioResult, rules: Rules = DEFAULT_RULES) -> Verdict:
    """rules: the profile's (never the result's own)."""
    scenario = result.scenario
    rules = rules.for_scenario(scenario)
    if not result.ok or result.gate is None:
        return Verdict(scenario_id=scenario.id, status=ERROR, note=result.error or "no result")
    current = judged_samples(result.gate.current.metrics)[0]
    clusters = [r.engine_instance for r in result.rounds]
    confidence = look_confidence(result.gate.looks)
    candidate, unknown = judged_samples(result.metrics)
    references = {field: getattr(result.gate, field) for _, field, _ in RATIOS.values()}
    sampled = [name for name in candidate if on_interval(scenario, name)]  # a sampled scenario's acceptance
    current_side = (result.gate.current.metrics, result.gate.current.request_acceptance)
    verdicts = sampled_scenario_verdicts(
        scenario, sampled, (result.metrics, result.request_acceptance), current_side, rules
    )
    for name, samples in candidate.items():
        if name in sampled:
            continue
        if spec_for(name).deterministic:
            verdict = compare_metric(name, current.get(name, []), samples, rules.tolerance(name))
        else:
            verdict = speed_verdict(name, current, candidate, clusters, rules, confidence, references)
        verdicts.append(verdict)
    for verdict in verdicts:
        if spec_for(verdict.metric).against_baseline:
            verdict.judged_by = "current build"
    mark_informational(verdicts, rules)
    status = worst(v.status for v in verdicts if not rules.is_informational(v.metric))
    reasons = [
        *(result.validity.reasons if result.validity else []),
        *(
            f"current build: {r}"
            for r in (result.gate.current.validity.reasons if result.gate.current.validity else [])
        ),
    ]
    if reasons and status not in FAILING:
        status = INVALID
    notes = (
        reasons
        + (
            [f"greedy output differs from the current build for {result.gate.output_drift} request(s) (output drift)"]
            if result.gate.output_drift and scenario.sampling.greedy
            else []
        )
        + list(filter(None, [unknown_note(unknown)]))
    )
    return Verdict(scenario_id=scenario.id, status=status, metrics=verdicts, note="; ".join(notes))


class GateJudge:
    """The paired gate as a judge (verdicts.Judge): the candidate's rounds against the current build's;
    `inconclusive_fails`: whether an inconclusive verdict fails the case (--inconclusive);
    `recorded`: the offset between fresh engines that the gates on record in the history estimate."""

    def __init__(self, inconclusive_fails: bool = True, recorded: RecordedOffset | None = None):
        self.inconclusive_fails = inconclusive_fails
        self.recorded = recorded

    def rules(self, rules: Rules) -> Rules:
        """The profile's rules, their engine-offset floor raised to the recorded offset where that is
        higher and its gates are worth the prior (PRIOR_DF degrees of freedom): the profile's floor
        is the minimum, so the history can only widen an interval."""
        recorded = self.recorded
        if recorded is None or recorded.df < PRIOR_DF or recorded.sd <= rules.gate_engine_offset:
            return rules
        return dataclasses.replace(rules, gate_engine_offset=recorded.sd)

    def floor_note(self, rules: Rules) -> str:
        """Where the floor came from, as the report states it beside each paired verdict."""
        used, recorded = self.rules(rules).gate_engine_offset, self.recorded
        if recorded is None:
            return f"engine-offset floor {used:.1%}, the profile's (no gates on record)"
        if used > rules.gate_engine_offset:
            return f"engine-offset floor {recorded.line()}, above the profile's {rules.gate_engine_offset:.1%}"
        worth = "" if recorded.df >= PRIOR_DF else f", too few to count (under {PRIOR_DF})"
        return f"engine-offset floor {used:.1%}, the profile's (the history says {recorded.line()}{worth})"

    def __call__(self, result: ScenarioResult, rules: Rules = DEFAULT_RULES) -> Judgement:
        verdict = judge_gate(result, self.rules(rules))
        verdict.inconclusive_fails = self.inconclusive_fails
        floor = self.floor_note(rules)
        for metric in verdict.metrics:
            if metric.judged_by == "paired":
                metric.note = f"{metric.note}; {floor}" if metric.note else floor
        return Judgement(verdict)
