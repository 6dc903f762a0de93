"""The simulator checked on what it did not see: fitted on one k of a traced sweep, its speedup for
every other k measured beside it.

For each traced k of a sweep (analysis/best_k.py's groups: one model, method, dataset and batch
size) the step cost is fitted on that scenario and its no-SD reference alone (analysis/cost_fit.py),
and the simulator (analysis/simulate.py), given the fitted scenario's own per-position acceptance,
predicts the speedup of each other k of the sweep at its batch size.  The error is the prediction
over the measured speedup, less 1.  Nothing of the predicted k's run enters its prediction: not its
steps, and not its acceptance (n-gram's and a draft model's per-position acceptance come from the
prompt and the output, the same for every k of a lossless sweep).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..methods import K_FIELD, method_of
from ..records import ScenarioResult
from . import simulate
from .best_k import sweep_key
from .cost_fit import fit_costs
from .traces import request_acceptance


@dataclass(frozen=True)
class HeldOut:
    scenario_id: str  # the predicted k's scenario
    fitted_on: str  # the scenario the cost was fitted on
    fit_k: int
    k: int
    measured: float
    simulated: float

    @property
    def error(self) -> float:
        return self.simulated / self.measured - 1

    def to_json(self) -> dict:
        return {
            "scenario_id": self.scenario_id,
            "fitted_on": self.fitted_on,
            "fit_k": self.fit_k,
            "k": self.k,
            "measured": self.measured,
            "simulated": self.simulated,
            "error": self.error,
        }


def measured_speedup(result: ScenarioResult) -> float | None:
    """The speedup a run measured, as a simulated one is set against it; None where it has none."""
    metric = result.metrics.get("speedup")
    return metric.value if metric is not None else None


def _measured(result: ScenarioResult) -> float | None:
    """A measured speedup a prediction can be divided by."""
    value = measured_speedup(result)
    return value if isinstance(value, float) and value > 0 else None


def held_out(results: list[ScenarioResult]) -> list[HeldOut]:
    """Every prediction of one traced k of a sweep from another, in id order."""
    by_id = {r.id: r for r in results}
    sweeps: dict[tuple, list[ScenarioResult]] = {}
    for result in results:
        s = result.scenario
        if result.ok and result.valid and s.trace and (key := sweep_key(result)) is not None:
            if method_of(s.method.name).simulated_as is not None and _measured(result) is not None:
                sweeps.setdefault(key, []).append(result)
    rows = []
    for members in sweeps.values():
        for fit in members:
            reference = by_id.get(fit.scenario.reference_id)
            requests = request_acceptance(fit)
            if reference is None or reference.trace is None or not requests:
                continue
            [cost] = fit_costs([fit, reference])
            step_cost = cost.step_cost(fit.scenario.method.name)
            proposer = method_of(fit.scenario.method.name).simulated_as
            size = fit.scenario.batch_size
            for other in members:
                if other is fit:
                    continue
                k = other.scenario.method.params[K_FIELD]
                value = simulate.speedups(
                    requests, proposer, f"k{k}", (size,), step_cost, fit.scenario.dataset, True, simulate.MEASURED_FORM
                )
                rows.append(
                    HeldOut(other.id, fit.id, fit.scenario.method.params[K_FIELD], k, _measured(other), value[size])  # type: ignore[arg-type]
                )
    return sorted(rows, key=lambda r: (r.scenario_id, r.fit_k))


def worst_error(rows: list[HeldOut], scenario_id: str) -> float | None:
    """The largest held-out error (by size) of one scenario's predictions; None where none was made."""
    errors = [row.error for row in rows if row.scenario_id == scenario_id]
    return max(errors, key=abs) if errors else None
