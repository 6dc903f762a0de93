"""The planner: what each scenario of a profile and each engine start will cost, before it runs
(shards.py adds them up per shard and on N GPUs).

A scenario costs its warm-up calls and its rounds: rounds x sequences x expected output tokens per
sequence / expected throughput; each engine key costs one engine start per shard it runs on (on a
GPU one more: its output-check engine, run/output_check.py; the check's few short calls are left
out), and each run a fixed start-up.  Every figure comes from the best source at hand, and says which:

- throughput: the history of the same scenario (content hash) on this hardware (median of its
  results' throughputs); else the study's H100 figures for GPU-tier profiles (plan/study.py); else
  a per-token cost fitted on this machine (the default model scaled by how the history of other
  scenarios compared with it); else the default model (analysis/cost.py: weight bytes over memory
  bandwidth per decode step, plus prefill FLOPs, with a tier's stated constants).
- output tokens per sequence: the same scenario's history; else the study's released traces for
  the workload, capped at output_len; else output_len (an upper bound: outputs stop at EOS).
- engine start and warm-up: the history of the engine key or scenario; else the same model's other
  engines on this machine; else a model-size-based default.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from ..analysis.cost import (
    CPU,
    DEFAULT_PROMPT_TOKENS,
    H100,
    Machine,
    default_throughput,
    engine_start_default,
    measuring_parts,
    sequences_per_call,
    target_size_b,
)
from ..history.queries import TimedResult
from ..profiles.scenarios import REFERENCE_METHOD, Profile, Scenario
from . import study

HISTORY, STUDY, FITTED, DEFAULT = "history", "study", "fitted", "default"
TRACES, OUTPUT_LEN = "study traces", "output_len"


@dataclass
class Figure:
    value: float
    source: str


@dataclass
class Estimate:
    """One scenario's predicted cost (engine start not included: that is the engine key's)."""

    scenario: Scenario
    tokens: Figure  # output tokens per sequence
    throughput: Figure  # output tokens/s
    warmup_s: Figure
    measure_s: float
    overhead_s: float

    @property
    def seconds(self) -> float:
        return self.warmup_s.value + self.measure_s + self.overhead_s

    @property
    def call_s(self) -> float:
        """One generate() call of the scenario."""
        return _call_s(self.scenario, self.tokens, self.throughput)


def _call_s(scenario: Scenario, tokens: Figure, throughput: Figure) -> float:
    """One generate() call: B sequences (a serve round: every request) of `tokens` each at
    `throughput` output tokens/s."""
    return sequences_per_call(scenario) * tokens.value / throughput.value


def _median(values: Iterable[float | None], positive: bool = False) -> float | None:
    found = [v for v in values if v is not None and math.isfinite(v) and (v > 0 or not positive)]
    return statistics.median(found) if found else None


class Planner:
    """Estimates from a history (TimedResult rows of one hardware key; none: defaults and the study)."""

    def __init__(self, profile: Profile, history: list[TimedResult] = (), machine: Machine | None = None):
        self.profile = profile
        self.machine = machine or (H100 if profile.tier == "gpu" else CPU)
        self.use_study = profile.tier == "gpu"
        self.history = list(history)
        self.by_hash: dict[str, list[TimedResult]] = {}
        for row in self.history:
            self.by_hash.setdefault(row.scenario_hash, []).append(row)
        self.scenario_s = Figure(*self._scenario_overhead())
        self._factors: dict[str, tuple[float, int, bool] | None] = {}
        self._estimates: dict[int, Estimate] = {}  # by id() of a scenario of the profile

    # ---------------------------------------------------------------- per scenario

    def estimate(self, scenario: Scenario) -> Estimate:
        if id(scenario) in self._estimates:
            return self._estimates[id(scenario)]
        own = self.by_hash.get(scenario.hash, [])
        tokens = self.tokens(scenario, own)
        throughput = self.throughput(scenario, own, tokens.value)
        reference_call_s = 0.0
        if scenario.paired_reference and not scenario.method.is_reference:
            reference_call_s = self.estimate(_reference_of(scenario)).call_s
        modelled_warmup_s, measure_s = measuring_parts(
            scenario, _call_s(scenario, tokens, throughput), reference_call_s
        )
        warmup = _median(r.warmup_s for r in own)
        warmup_s = Figure(warmup, HISTORY) if warmup is not None else Figure(modelled_warmup_s, throughput.source)
        estimate = Estimate(scenario, tokens, throughput, warmup_s, measure_s, self.scenario_s.value)
        self._estimates[id(scenario)] = estimate
        return estimate

    def tokens(self, scenario: Scenario, own: list[TimedResult]) -> Figure:
        measured = _median(
            r.output_tokens / r.rounds / r.sequences for r in own if r.output_tokens and r.rounds and r.sequences
        )
        if measured is not None:
            return Figure(measured, HISTORY)
        typical = study.expected_output_tokens(scenario.dataset, scenario.output_len)
        if typical is not None:
            return Figure(typical, TRACES)
        return Figure(float(scenario.output_len), OUTPUT_LEN)

    def throughput(self, scenario: Scenario, own: list[TimedResult], tokens: float) -> Figure:
        measured = _median((r.throughput for r in own), positive=True)
        if measured is not None:
            return Figure(measured, HISTORY)
        per_gpu = target_size_b(scenario)[1] / scenario.model.tp
        if self.use_study and (reference := study.throughput(scenario, per_gpu)) is not None:
            return Figure(reference, STUDY)
        prompt = study.prompt_tokens(scenario.dataset) or DEFAULT_PROMPT_TOKENS
        modelled = default_throughput(scenario, self.machine, tokens, prompt, self.speedup(scenario))
        factor = self.factor(scenario.model.name)
        if factor is not None:
            return Figure(modelled * factor[0], FITTED)
        return Figure(modelled, DEFAULT)

    def speedup(self, scenario: Scenario) -> float:
        """SD over no-SD: this model and method's history here (nearest batch size), else the study's, else 1."""
        if scenario.method.is_reference:
            return 1.0
        rows = [
            r
            for r in self.history
            if r.model == scenario.model.name and r.method == scenario.method.label and r.speedup and r.batch_size
        ]
        if rows:
            nearest = min(abs(math.log(r.batch_size / scenario.batch_size)) for r in rows)
            return _median(r.speedup for r in rows if abs(math.log(r.batch_size / scenario.batch_size)) == nearest)
        return (study.speedup(scenario) if self.use_study else None) or 1.0

    def factor(self, model: str) -> tuple[float, int, bool] | None:
        """Measured over modelled throughput on this machine: the median over the history of this model's
        results (any model's where it has none), each SD result taken at its speedup; with the count of
        results and whether they were the model's own."""
        if model not in self._factors:
            own = [r for r in self.history if r.model == model]
            rows = own or self.history
            ratios = []
            for row in rows:
                if not (row.throughput and row.batch_size and row.output_tokens and row.rounds and row.sequences):
                    continue
                like = _like(row, self.profile)
                if like is None:
                    continue
                tokens = row.output_tokens / row.rounds / row.sequences
                prompt = row.prompt_tokens or study.prompt_tokens(row.dataset) or DEFAULT_PROMPT_TOKENS
                modelled = default_throughput(like, self.machine, tokens, prompt, row.speedup or 1.0)
                ratios.append(row.throughput / modelled)
            self._factors[model] = (statistics.median(ratios), len(ratios), bool(own)) if ratios else None
        return self._factors[model]

    def _scenario_overhead(self) -> tuple[float, str]:
        """Per scenario, what a run took beyond its engine starts, warm-ups and rounds (median over runs)."""
        runs: dict[str, list[TimedResult]] = {}
        for row in self.history:
            runs.setdefault(row.run_id, []).append(row)
        rest = []
        for rows in runs.values():
            first = rows[0]
            if first.run_started_at and first.run_finished_at and all(r.measure_s is not None for r in rows):
                spent = math.fsum((r.engine_start_s or 0) + (r.warmup_s or 0) + r.measure_s for r in rows)
                rest.append(((first.run_finished_at - first.run_started_at).total_seconds() - spent) / len(rows))
        measured = _median(rest)
        return (max(measured, 0.0), HISTORY) if measured is not None else (self.machine.scenario_s, DEFAULT)

    # ---------------------------------------------------------------- per engine key

    def engine_start(self, scenarios: list[Scenario]) -> Figure:
        """One start of the engine these scenarios share."""
        hashes = {s.hash for s in scenarios}
        measured = _median((r.engine_start_s for h in hashes for r in self.by_hash.get(h, [])), positive=True)
        if measured is not None:
            return Figure(measured, HISTORY)
        model = scenarios[0].model.name
        same_model = _median((r.engine_start_s for r in self.history if r.model == model), positive=True)
        if same_model is not None:
            return Figure(same_model, FITTED)
        return Figure(engine_start_default(scenarios[0], self.machine), DEFAULT)


def _reference_of(scenario: Scenario) -> Scenario:
    return scenario.replace(method=REFERENCE_METHOD, paired_reference=False)


def _like(row: TimedResult, profile: Profile) -> Scenario | None:
    """A scenario of the profile with the row's model, method label and batch size (its model size,
    dtype and method), to model the row's throughput with; None when the profile has no such model."""
    model = [s for s in profile.scenarios if s.model.name == row.model]
    if not model:
        return None
    same = [s for s in model if s.method.label == row.method] or [s for s in model if s.method.is_reference] or model
    return same[0].replace(batch_size=row.batch_size)
