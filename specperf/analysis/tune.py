"""What `specperf tune` recommends: vLLM's dynamic SD schedule per model, method and dataset (or a
mix of datasets), built from the measured best k (analysis/best_k.py).

At each measured batch size the schedule runs the `chosen` k (the smallest k the measurement cannot
tell from the best); between measured sizes it follows schedule.from_points's rule.  The engine's
`num_speculative_tokens` is the largest k the schedule runs.

A mix of workloads is weighted by the share of output tokens each contributes.  Its speedup at one
k and batch size is the ratio of the mix's time without SD to its time with it, each dataset's time
being its share over its no-SD throughput (and over its speedup, with SD); its log-scale error is
the datasets' errors weighted by their share of the SD time, in quadrature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..judge.paired import PairedChange
from ..records import ScenarioResult
from ..schedule import FIELD, Schedule, as_config, from_points
from .best_k import NO_SD_SPEEDUP, KChoice, KSpeedup, Series, best_k_table, choose


@dataclass(frozen=True)
class Tuned:
    """One schedule: for `dataset` (or a mix, named by its weights), the k run at each measured size."""

    model: str
    method: str
    dataset: str
    rows: list[KChoice]  # one per measured batch size, ascending
    schedule: Schedule
    config: dict[str, Any]  # the speculative config but k

    @property
    def pays(self) -> bool:
        """False where no k is shown to beat no SD at any measured size (the schedule is all zeros)."""
        return any(k > 0 for _, _, k in self.schedule)

    def speculative_config(self) -> dict[str, Any]:
        """What `vllm serve --speculative-config` takes."""
        k_max = max(k for _, _, k in self.schedule)
        return {**self.config, "num_speculative_tokens": k_max, FIELD: as_config(self.schedule)}

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "method": self.method,
            "dataset": self.dataset,
            "schedule": as_config(self.schedule),
            "speculative_config": self.speculative_config() if self.pays else None,
            "measured": [row.to_json() for row in self.rows],
        }


def tune(results: list[ScenarioResult], mix: dict[str, float] | None = None) -> list[Tuned]:
    """A schedule per series of measured batch sizes; with `mix` (dataset -> weight), one per model
    and method over the mix's datasets instead."""
    table = best_k_table(results)
    series: dict[Series, list[KChoice]] = {}
    for row in table:
        series.setdefault(row.series, []).append(row)
    if mix:
        return _mixes(series, mix, _reference_throughputs(results))
    return [_tuned(rows[0].dataset, rows) for rows in series.values()]


def _tuned(dataset: str, rows: list[KChoice]) -> Tuned:
    rows = sorted(rows, key=lambda r: r.batch_size)
    schedule = from_points({r.batch_size: r.chosen for r in rows})
    return Tuned(rows[0].model, rows[0].method, dataset, rows, schedule, rows[0].config)


def _reference_throughputs(results: list[ScenarioResult]) -> dict[str, float]:
    return {
        r.id: value
        for r in results
        if r.ok and r.scenario.is_reference and isinstance(value := r.value("throughput_tok_s"), float) and value > 0
    }


def mix_name(mix: dict[str, float]) -> str:
    total = sum(mix.values())
    return "mix " + ", ".join(f"{d} {w / total:.0%}" for d, w in mix.items())


def _mixes(series: dict[Series, list[KChoice]], mix: dict[str, float], throughputs: dict[str, float]) -> list[Tuned]:
    """Per model and method, the mix's rows at every batch size measured on all its datasets."""
    by_method: dict[tuple, dict[str, list[KChoice]]] = {}
    for (model, method, dataset, *rest), rows in series.items():
        if dataset in mix:
            by_method.setdefault((model, method, *rest), {})[dataset] = rows
    tuned = []
    for datasets in by_method.values():
        if set(datasets) != set(mix):
            continue
        sizes = set.intersection(*({r.batch_size for r in rows} for rows in datasets.values()))
        rows = []
        for size in sorted(sizes):
            at_size = {d: next(r for r in rows_ if r.batch_size == size) for d, rows_ in datasets.items()}
            if row := _mix_row(at_size, mix, throughputs):
                rows.append(row)
        if rows:
            tuned.append(_tuned(mix_name(mix), rows))
    return tuned


def _mix_row(at_size: dict[str, KChoice], mix: dict[str, float], throughputs: dict[str, float]) -> KChoice | None:
    """The mix at one batch size, over the k measured on every dataset; None without each dataset's
    no-SD throughput."""
    if any(row.reference_id not in throughputs for row in at_size.values()):
        return None
    reference = {d: throughputs[row.reference_id] for d, row in at_size.items()}
    total = sum(mix.values())
    weights = {d: mix[d] / total for d in at_size}
    plain = sum(weights[d] / reference[d] for d in at_size)  # the mix's time per token without SD
    measured_on_all = set.intersection(*({s.k for s in row.ks if s.k > 0} for row in at_size.values()))
    speedups = [NO_SD_SPEEDUP]
    for k in sorted(measured_on_all):
        per = {d: s for d, row in at_size.items() if (s := row.speedup_of(k)) is not None}
        times = {d: weights[d] / (reference[d] * per[d].speedup) for d in at_size}
        spent = sum(times.values())
        se = math.sqrt(sum((times[d] / spent * per[d].change.se) ** 2 for d in at_size))
        change = PairedChange(math.log(plain / spent), se, min(p.change.df for p in per.values()), None, None, 0, 0)
        speedups.append(KSpeedup(k, change, all(p.paired for p in per.values()), None))
    best, chosen = choose(speedups)
    first = next(iter(at_size.values()))
    return KChoice(
        first.model, first.method, mix_name(mix), first.batch_size, speedups, best, chosen,
        first.batching, first.traced, first.config, "", first.served, first.request_rate, first.sampling,
    )  # fmt: skip
