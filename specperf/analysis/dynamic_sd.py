"""A dynamic SD scenario (a method with `num_speculative_tokens_per_batch_size`) against the fixed
k of its sweep: at the same model, method parameters, dataset and batch size (behind the server:
concurrency and request rate; analysis/best_k.py says which speedup), the ratio of its
speedup to the best fixed k's and to the fixed k its schedule runs there, each with its 95%
interval (the two paired speedups' log errors in quadrature).

The schedule is shown slower than the best fixed k where the ratio is beyond the gate's tolerance
below 1 and its interval excludes 1: the gate's own rule (judge/paired.py) for a paired change.
That fails the run (a tuned schedule that loses to a fixed k, or collapses where it switches, is a
regression), except in a profile that lists DYNAMIC_VS_BEST_K among its informational names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..judge.metrics import DYNAMIC_VS_BEST_K
from ..judge.paired import PairedChange
from ..methods import K_FIELD
from ..records import Scenario, ScenarioResult
from ..records.scenario import GATE_TOLERANCE
from ..schedule import FIELD as SCHEDULE_FIELD
from ..schedule import k_at
from .best_k import KChoice, KSpeedup, RatioInterval, batch_axis, best_k_table, k_speedup, where_of


@dataclass(frozen=True)
class Ratio(RatioInterval):
    """Dynamic over fixed speedup: the log difference of the two, with its 95% interval."""

    against_k: int
    change: PairedChange

    @property
    def value(self) -> float:
        return math.exp(self.change.log_change)

    @property
    def shown_slower(self) -> bool:
        return self.value < 1 - GATE_TOLERANCE and self.high < 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.against_k,
            "ratio": self.value,
            "interval": [self.low, self.high],
            "slower": self.shown_slower,
        }


@dataclass(frozen=True)
class DynamicAgainstFixed:
    scenario_id: str
    model: str
    method: str  # the dynamic method's label
    dataset: str
    batch_size: int  # served: the concurrency
    schedule: list[list[int]]
    k_run: int  # the k the schedule runs at this batch size
    speedup: KSpeedup
    best: Ratio  # against the best fixed k (k 0: against no SD)
    same_k: Ratio | None  # against the fixed k the schedule runs here, where the sweep measured it
    served: bool = False  # behind the server: batch_size is the concurrency

    @property
    def load(self) -> str:
        return f"concurrency {self.batch_size}" if self.served else f"batch {self.batch_size}"

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "model": self.model,
            "method": self.method,
            "dataset": self.dataset,
            "batch_size": self.batch_size,
            "served": self.served,
            "schedule": self.schedule,
            "k_run": self.k_run,
            "speedup": self.speedup.to_json(),
            "against_best": self.best.to_json(),
            "against_same_k": self.same_k.to_json() if self.same_k else None,
        }


def _ratio(dynamic: KSpeedup, fixed: KSpeedup) -> Ratio:
    return Ratio(fixed.k, dynamic.change.minus(fixed.change))


def _matches(row: KChoice, result: ScenarioResult) -> bool:
    s = result.scenario
    params = {k: v for k, v in s.method.params.items() if k not in (K_FIELD, SCHEDULE_FIELD)}
    return row.where == where_of(s) and row.config == {"method": s.method.name, **params}


def dynamic_against_fixed(results: list[ScenarioResult]) -> list[DynamicAgainstFixed]:
    """Every usable dynamic result whose sweep was measured at its batch size (served: at its
    concurrency and request rate), in id order."""
    table = best_k_table(results)
    compared = []
    for result in sorted(results, key=lambda r: r.id):
        s = result.scenario
        if not (result.ok and result.valid and SCHEDULE_FIELD in s.method.params):
            continue
        speedup = k_speedup(result)
        row = next((row for row in table if _matches(row, result)), None)
        if speedup is None or row is None:
            continue
        schedule = s.method.params[SCHEDULE_FIELD]
        k_run = min(k_at([tuple(r) for r in schedule], batch_axis(s)), s.method.params[K_FIELD])
        best = next(fixed for fixed in row.ks if fixed.k == row.best)
        same = row.speedup_of(k_run)
        compared.append(
            DynamicAgainstFixed(
                result.id,
                s.model.name,
                s.method.label,
                s.dataset,
                batch_axis(s),
                schedule,
                k_run,
                speedup,
                _ratio(speedup, best),
                _ratio(speedup, same) if same is not None else None,
                s.serves,
            )
        )
    return compared


def slower_than_fixed(rows: list[DynamicAgainstFixed], profile_scenarios: dict[str, Scenario]) -> list[str]:
    """One line per dynamic scenario shown slower than the best fixed k, except where the profile in
    force (its scenarios by id; never the result file's own) keeps DYNAMIC_VS_BEST_K informational."""
    return [
        f"dynamic SD slower than the best fixed k: {row.scenario_id} runs k {row.k_run} at {row.load}, "
        f"{row.best.value:.3f}x [{row.best.low:.3f}, {row.best.high:.3f}] of k {row.best.against_k}"
        for row in rows
        if row.best.shown_slower
        and DYNAMIC_VS_BEST_K not in getattr(profile_scenarios.get(row.scenario_id), "informational", ())
    ]
