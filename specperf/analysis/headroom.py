"""Headroom of a run's traced scenarios: the study's oracle analysis on the suite's own traces.

Per traced SD scenario whose acceptance is known at every output position (n-gram's from the prompt
and the output, analysis/ngram.py; a draft model's from one pass over the output, run/engines/draft_lm.py): the
speedup it measured; the speedup the simulator (analysis/simulate.py) gives for the same method and k
under the step cost fitted on this run's traced steps (analysis/cost_fit.py), which checks the cost
model; the method's oracle bound; the combined oracle (per step, the better of n-gram and the draft
model); the adaptive proposer's rule simulated; and the k from 1 to 5 the simulator finds fastest
for the method at the scenario's batch size, a recommendation beside the k it ran.  Speedups are
simulated in the form the suite measures them (simulate.MEASURED_FORM), and where the scenario's k
is one of a traced sweep, with the simulator's held-out error on it (held_out.py).  The suite's
traces mark where n-gram proposed nothing, so nothing is drawn at random.  EAGLE and MTP heads
draft from the target's hidden states, which a finished request does not give back: their
acceptance is known only where they drafted, so they get no headroom (said in a note).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..methods import HEAD, method_of
from ..records import ScenarioResult
from . import simulate
from .cost_fit import FittedCost, decode_steps, fit_costs
from .held_out import held_out, measured_speedup, worst_error
from .traces import request_acceptance


@dataclass
class Headroom:
    scenario_id: str
    batch_size: int
    measured: float | None  # the run's speedup
    simulated: float | None = None  # the same method and k, simulated
    oracle: float | None = None  # the method's oracle bound
    combined: float | None = None  # per step the better of n-gram and the draft model
    adaptive: float | None = None  # the adaptive proposer's rule, simulated
    k: int | None = None  # the k it ran with
    best_k: simulate.BestK | None = None  # the fastest k from 1 to 5 the simulator finds at this batch size
    held_out: float | None = None  # the worst error on this k, fitted on another k of its sweep (held_out.py)
    step_error: float | None = None  # the cost model's RMS relative error on this scenario's steps
    reference_error: float | None = None  # ... and on its no-SD reference's steps
    curve: dict[int, dict[str, float]] = field(default_factory=dict)  # batch size -> the simulated values
    note: str = ""

    @property
    def speedup_error(self) -> float | None:
        """The cost model's error on a simulated speedup, a ratio of two scenarios' times: its errors on
        both scenarios' steps added (biases in opposite directions add up in the ratio).  On the CPU
        tier they do: the target's forward ran ~6% faster right after a draft model's pass than the
        fit says, and ~10% slower between the steps of a no-SD engine."""
        if self.step_error is None or self.reference_error is None:
            return None
        return self.step_error + self.reference_error

    @property
    def within_error(self) -> bool | None:
        """Whether simulated and measured speedup agree within the cost model's error on the speedup."""
        if self.measured is None or self.simulated is None or self.speedup_error is None:
            return None
        return abs(self.simulated / self.measured - 1) <= self.speedup_error


def step_error(result: ScenarioResult, cost: simulate.StepCost) -> float | None:
    """RMS relative error of the cost model's step time over this scenario's decode steps."""
    steps = decode_steps(result)
    if steps is None:
        return None
    forward = cost.forward(steps["kv_tokens"], steps["tokens"])
    method = method_of(result.scenario.method.name)
    if method.is_reference:
        draft = 0.0
    elif method.drafting_fit == "share":
        draft = np.where(steps["per_request"] > 1, forward * cost.ngram_share, 0.0)  # drafted: verified more than one
    elif method.drafting_fit == "learned":
        draft = cost.learned_draft(steps["kv_tokens"], steps["per_request"])
    else:
        return None  # mixed steps (the adaptive proposer): which drafted with the model is not recorded
    predicted = forward + draft + cost.rest(steps["tokens"])
    return float(np.sqrt(np.mean(((predicted - steps["total"]) / steps["total"]) ** 2)))


def headroom(results: list[ScenarioResult]) -> list[Headroom]:
    """Headroom of every traced SD scenario among `results` (one run, or several of one machine)."""
    costs: dict[str, FittedCost] = {c.model: c for c in fit_costs(results)}
    batch_sizes: dict[tuple, set[int]] = {}
    for r in results:
        s = r.scenario
        batch_sizes.setdefault((s.model.name, s.method.label, s.dataset), set()).add(s.batch_size)
    by_id = {r.id: r for r in results}
    rows = []
    for result in results:
        s = result.scenario
        if result.trace is None or s.is_reference:
            continue
        row = Headroom(s.id, s.batch_size, measured_speedup(result))
        rows.append(row)
        requests = request_acceptance(result)
        method = method_of(s.method.name)
        proposer = method.simulated_as
        if proposer is None:
            row.note = (
                f"{s.method.name} drafts from the target's hidden states: its acceptance is known only "
                "where it drafted, so no bound is simulated"
                if method.proposer == HEAD
                else f"{s.method.name}: the simulator has no model of its drafts"
            )
            continue
        if s.model.name not in costs or not requests:
            row.note = "no fitted step cost or no per-position acceptance in the trace"
            continue
        has_draft = all(simulate.DRAFT in r.acc_len for r in requests)
        if proposer != simulate.NGRAM and not has_draft:
            row.note = "the draft model's per-position acceptance is missing from the trace"
            continue
        cost = costs[s.model.name].step_cost(s.method.name)
        k = row.k = int(s.method.params.get("num_speculative_tokens", 1))
        sizes = sorted(batch_sizes[(s.model.name, s.method.label, s.dataset)] | {s.batch_size})
        modes = {"simulated": (proposer, f"k{k}"), "oracle": (proposer, "oracle")}
        if has_draft:
            modes |= {"combined": (simulate.COMBINED, "oracle"), "adaptive": (simulate.ADAPTIVE, f"k{k}")}
        for name, (which, mode) in modes.items():
            values = simulate.speedups(requests, which, mode, sizes, cost, s.dataset, True, simulate.MEASURED_FORM)
            for size, value in values.items():
                row.curve.setdefault(size, {})[name] = value
            setattr(row, name, values[s.batch_size])
        row.best_k = simulate.best_k(
            requests, proposer, (s.batch_size,), cost, s.dataset, True, simulate.MEASURED_FORM
        )[s.batch_size]
        row.step_error = step_error(result, cost)
        reference = by_id.get(s.reference_id)
        if reference is not None and reference.trace is not None:
            row.reference_error = step_error(reference, costs[s.model.name].step_cost(reference.scenario.method.name))
    checks = held_out(results)
    for row in rows:
        row.held_out = worst_error(checks, row.scenario_id)
    return rows
