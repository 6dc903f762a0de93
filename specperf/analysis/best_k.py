"""The measured best k: per model, method, dataset and batch size, each k's speedup with its interval.

Each k of a sweep (profiles: a cell's `num_speculative_tokens` list) runs paired with its no-SD
reference, rounds alternating, so each k's speedup is a ratio per pair of rounds and drift of the
machine cancels out of it; its estimate and 95% interval come from judge/paired.py, as a gate's do.
No SD (k = 0) is a candidate too, with speedup 1 exactly.  Behind the server (serve scenarios) the
concurrency is the batch axis, and sweeps at a Poisson request rate are judged on TPOT speedup: their
throughput follows the arrivals.

Two answers per group, both asking what the rounds show, so that a k is never picked on the
strength of its noise (a few disturbed rounds on a shared machine can put a k's point estimate
above what its acceptance allows: k 1 on code editing once measured 1.94x [1.39, 2.70] in the main
job, with a mean acceptance length of 1.83):
- `best`: the k whose speedup is best shown, the highest lower bound of its interval (no SD's is 1:
  where no k is shown to beat no SD, k = 0 is best).
- `chosen`: the smallest k shown to be within the gate's tolerance (GATE_TOLERANCE, 3%: a paired
  change the gate never calls a regression) of the best: the 95% interval of its log speedup less
  the best's (errors in quadrature) lies above log(1 - tolerance).  Among k that measure alike the
  smallest is the one to run: it verifies fewer rejected drafts, so it loses least where the batch
  grows past what was measured (the study's finding), and costs the least compute and memory.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..judge.paired import PairedChange, paired_change
from ..methods import K_FIELD, label_stem
from ..records import ScenarioResult
from ..records.scenario import GATE_TOLERANCE
from ..schedule import FIELD as SCHEDULE_FIELD

SweepKey = tuple[str, str, str, str, str, int, str, bool, bool, float, str]  # what the k of one sweep share
Series = tuple[str, str, str, str, bool, bool, float, str]  # what one schedule's rows share: all but the batch size
NO_SD = PairedChange(0.0, 0.0, 1.0, None, None, 1, 1)  # k = 0: no SD, speedup 1 exactly


class RatioInterval:
    """The 95% interval of a ratio held as its log change (`change`, a PairedChange)."""

    change: PairedChange

    @property
    def low(self) -> float:
        return math.exp(self.change.interval()[0])

    @property
    def high(self) -> float:
        return math.exp(self.change.interval()[1])


@dataclass(frozen=True)
class KSpeedup(RatioInterval):
    """One k's measured speedup (its log change over no SD), whether its rounds were paired."""

    k: int
    change: PairedChange
    paired: bool
    scenario_id: str | None  # None: k = 0, no SD, or a mix of datasets

    @property
    def speedup(self) -> float:
        return math.exp(self.change.log_change)

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "speedup": self.speedup,
            "interval": [self.low, self.high],
            "paired": self.paired,
            "scenario_id": self.scenario_id,
        }


NO_SD_SPEEDUP = KSpeedup(0, NO_SD, True, None)


@dataclass(frozen=True)
class KChoice:
    """The k measured for one model, method, dataset and batch size, and the two answers."""

    model: str
    method: str  # the label without its -kN ("ngram")
    dataset: str
    batch_size: int  # served: the concurrency
    ks: list[KSpeedup]  # k = 0 first, then ascending
    best: int
    chosen: int
    batching: str = "replicate"
    traced: bool = False
    config: dict[str, Any] = field(default_factory=dict)  # the speculative config but k ({"method": "ngram", ...})
    reference_id: str = ""  # the no-SD scenario the speedups divide by
    served: bool = False  # behind the server, at concurrency batch_size
    request_rate: float = 0.0  # served: Poisson arrivals per second; 0: all at once
    sampling: str = ""  # how its requests drew tokens, as the scenario id says it ("-t0.8-p0.95"); "": greedy

    @property
    def where(self) -> tuple:
        """Where its k were measured, as where_of gives it for a scenario."""
        where = (self.model, self.dataset, self.batch_size, self.batching, self.traced, self.served, self.request_rate)
        return (*where, self.sampling)

    @property
    def series(self) -> Series:
        """What the rows of one schedule share: all but the batch size."""
        series = (self.model, self.method, self.dataset, self.batching, self.traced, self.served, self.request_rate)
        return (*series, self.sampling)

    @property
    def load(self) -> str:
        """Where it was measured: "bs4", "served c4", "served c4 at 2 req/s", "bs4 t0.8-p0.95" (sampled)."""
        sampled = f" {self.sampling.lstrip('-')}" if self.sampling else ""
        if not self.served:
            return f"bs{self.batch_size}{sampled}"
        rate = f" at {self.request_rate:g} req/s" if self.request_rate else ""
        return f"served c{self.batch_size}{rate}{sampled}"

    def speedup_of(self, k: int) -> KSpeedup | None:
        return next((s for s in self.ks if s.k == k), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "method": self.method,
            "dataset": self.dataset,
            "batch_size": self.batch_size,
            "batching": self.batching,
            "traced": self.traced,
            "served": self.served,
            "request_rate": self.request_rate or None,
            "sampling": self.sampling or None,
            "best_k": self.best,
            "chosen_k": self.chosen,
            "ks": [s.to_json() for s in self.ks if s.k > 0],
        }


def batch_axis(scenario) -> int:
    """The size a schedule picks k by: the batch size, or a served scenario's concurrency."""
    return scenario.concurrency if scenario.serves and scenario.concurrency else scenario.batch_size


def where_of(scenario) -> tuple:
    """Where a scenario measured, as a sweep's k and a schedule beside them share it: model, dataset,
    batch axis, batching, tracing, served, request rate and sampling (greedy and sampled k never mix)."""
    s = scenario
    load = (batch_axis(s), s.batching, s.trace, s.serves, s.request_rate or 0.0, s.sampling.label())
    return (s.model.name, s.dataset, *load)


def speedup_metric(scenario) -> str:
    """The speedup a sweep is judged on: TPOT's at a Poisson request rate, else throughput's."""
    return "tpot_speedup" if scenario.serves and scenario.request_rate else "speedup"


def k_speedup(result: ScenarioResult) -> KSpeedup | None:
    """A fixed-k SD result's speedup with its interval; None without usable speedup rounds."""
    metric = result.metrics.get(speedup_metric(result.scenario))
    samples = [s for s in metric.samples if isinstance(s, (int, float)) and s > 0] if metric is not None else []
    if len(samples) < 2 or len(samples) != len(metric.samples if metric is not None else []):
        return None
    scenario = result.scenario
    paired = scenario.paired_reference and len(result.rounds) == len(samples)
    clusters = [r.engine_instance for r in result.rounds] if paired else None
    change = paired_change([math.log(s) for s in samples], clusters, scenario.gate_engine_offset)
    return KSpeedup(scenario.method.params[K_FIELD], change, paired, result.id)


def sweep_key(result: ScenarioResult) -> SweepKey | None:
    """What the k of one sweep share (all but k); None for a result no sweep takes (no-SD, a dynamic
    schedule, a token tree)."""
    s = result.scenario
    params = dict(s.method.params)
    if s.is_reference or SCHEDULE_FIELD in params or "speculative_token_tree" in params:
        return None
    params.pop(K_FIELD, None)
    model, dataset, *load = where_of(s)
    return (model, label_stem(s.method.label), s.method.name, json.dumps(params, sort_keys=True), dataset, *load)


def choose(speedups: list[KSpeedup], tolerance: float = GATE_TOLERANCE) -> tuple[int, int]:
    """(best k, chosen k) among `speedups`, no SD included: the module's rule."""
    best = max(speedups, key=lambda s: (s.low, -s.k))
    for candidate in sorted(speedups, key=lambda s: s.k):
        low, _ = candidate.change.minus(best.change).interval()
        if candidate is best or low >= math.log(1 - tolerance):
            return best.k, candidate.k
    return best.k, best.k


def best_k_table(results: list[ScenarioResult]) -> list[KChoice]:
    """Every group of two or more measured k (ok, valid results with speedup rounds), in order."""
    groups: dict[SweepKey, list[KSpeedup]] = {}
    references: dict[SweepKey, str] = {}
    for result in results:
        key = sweep_key(result) if result.ok and result.valid else None
        if key is not None and (speedup := k_speedup(result)) is not None:
            groups.setdefault(key, []).append(speedup)
            references[key] = result.scenario.reference_id
    table = []
    for key, members in sorted(groups.items(), key=lambda item: item[0]):
        by_k: dict[int, KSpeedup] = {}
        for speedup in members:  # a k measured twice (run directories merged): the first
            by_k.setdefault(speedup.k, speedup)
        if len(by_k) < 2:
            continue
        ks = [NO_SD_SPEEDUP, *(by_k[k] for k in sorted(by_k))]
        best, chosen = choose(ks)
        model, method, name, params, dataset, batch_size, batching, traced, served, rate, sampling = key
        config = {"method": name, **json.loads(params)}
        table.append(
            KChoice(
                model,
                method,
                dataset,
                batch_size,
                ks,
                best,
                chosen,
                batching,
                traced,
                config,
                references[key],
                served,
                rate,
                sampling,
            )  # fmt: skip
        )
    return table
