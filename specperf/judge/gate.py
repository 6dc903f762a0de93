"""The upgrade gate's verdict: the candidate build against the current one, measured in one run.

Speed (throughput, speedup) is judged pair by pair (paired.py): alternating rounds cancel the
machine's drift, so in a gate speed gates even where a profile keeps it informational across runs.
Deterministic metrics (acceptance, per-position rates, lossless) are judged on their thresholds,
as against a baseline.  Stored baselines play no part.
"""

from __future__ import annotations

from ..records import ScenarioResult, Verdict
from ..status import ERROR, FAILING, INVALID, worst
from .metrics import metric_samples
from .paired import compare_paired
from .verdicts import compare_metric, spec_for, tolerance_for


def judge_gate(result: ScenarioResult) -> Verdict:
    scenario = result.scenario
    if not result.ok or result.gate is None:
        return Verdict(scenario_id=scenario.id, status=ERROR, note=result.error or "no result")
    current = metric_samples(result.gate.current.metrics)
    verdicts = []
    for name, samples in metric_samples(result.metrics).items():
        if spec_for(name).deterministic:
            verdict = compare_metric(name, current.get(name, []), samples, tolerance_for(name, scenario.tolerances))
            verdict.judged_by = "current build"
        else:
            verdict = compare_paired(name, current.get(name, []), samples, scenario.gate_tolerance)
        verdicts.append(verdict)
    status = worst(v.status for v in verdicts)
    reasons = [*(result.validity.reasons if result.validity else []),
               *(f"current build: {r}" for r in (result.gate.current.validity.reasons
                                                  if result.gate.current.validity else []))]
    if reasons and status not in FAILING:
        status = INVALID
    notes = reasons + ([f"greedy output differs from the current build for {result.gate.output_drift} "
                        "request(s) (output drift)"] if result.gate.output_drift else [])
    return Verdict(scenario_id=scenario.id, status=status, metrics=verdicts, note="; ".join(notes))
