"""A profile's plan per shard and on N GPUs: the engines each shard starts and the scenarios they
run (costed by the planner), the shards `pytest --shard I/N` runs (run/sharding.py's split), and
their schedule on the GPUs, each shard holding as many as its largest TP size."""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field

from ..profiles.scenarios import Profile, Scenario
from ..run import sharding
from ..run.output_check import check_scenario
from .planner import Estimate, Figure, Planner


@dataclass
class EngineLine:
    label: str  # model / method
    scenarios: list[Estimate]
    start: Figure
    starts: int  # engines started (paired references start one more, a GPU's output check one more)
    engine_key: str = ""

    @property
    def seconds(self) -> float:
        return self.start.value * self.starts + math.fsum(e.seconds for e in self.scenarios)


@dataclass
class ShardPlan:
    index: int
    engines: list[EngineLine]
    run_s: float
    gpus: int
    start_at: float = 0.0  # minutes into the run, when scheduled on GPUs
    command: str = ""  # the pytest options that run this shard

    @property
    def scenarios(self) -> int:
        return sum(len(e.scenarios) for e in self.engines)

    @property
    def engine_starts(self) -> int:
        return sum(e.starts for e in self.engines)

    @property
    def seconds(self) -> float:
        return (self.run_s + math.fsum(e.seconds for e in self.engines)) if self.engines else 0.0


@dataclass
class Plan:
    profile: Profile
    planner: Planner
    shards: list[ShardPlan]
    skipped: list[Scenario] = field(default_factory=list)  # need more GPUs than --gpus gives
    gpus: int | None = None

    @property
    def wall_s(self) -> float:
        """Scheduled on the GPUs: the last shard's end; else every shard on a machine of its own."""
        return max((s.start_at * 60 + s.seconds for s in self.shards), default=0.0)

    @property
    def total_s(self) -> float:
        return math.fsum(s.seconds for s in self.shards)

    @property
    def gpu_hours(self) -> float:
        return math.fsum(s.seconds * s.gpus for s in self.shards) / 3600


def plan_shard(planner: Planner, index: int, scenarios: list[Scenario], command: str = "") -> ShardPlan:
    by_key: dict[str, list[Scenario]] = {}
    for s in scenarios:
        by_key.setdefault(s.engine_key, []).append(s)
    engines, checked = [], set()
    for key, members in by_key.items():
        first = members[0]
        paired = any(s.paired_reference and not s.method.is_reference for s in members)
        instances = max(s.gate_instances * s.gate_engine_sets for s in members) if paired else 1
        checker = check_scenario(first, batch_invariant=True).engine_key  # traced and served share one
        checks = planner.profile.tier == "gpu" and checker not in checked
        checked.add(checker)
        label = f"{first.model.name} / {first.method.label}" + (" (traced)" if first.trace else "")
        engines.append(
            EngineLine(
                label,
                [planner.estimate(s) for s in members],
                planner.engine_start(members),
                instances * (2 if paired else 1) + checks,
                key,
            )
        )
    gpus = max((s.model.tp for s in scenarios), default=0)
    return ShardPlan(index, engines, planner.machine.run_s, gpus, command=command)


def split(planner: Planner, scenarios: list[Scenario], count: int, selection: str = "") -> list[ShardPlan]:
    """The shards `pytest [selection] --shard I/count` runs (run/sharding.py's split), planned."""
    parts = sharding.assign(scenarios, count)
    return [
        plan_shard(planner, i + 1, part, f"{selection}--shard {i + 1}/{count}" if count > 1 else selection.strip())
        for i, part in enumerate(parts)
    ]


def schedule(shards: list[ShardPlan], gpus: int) -> None:
    """Start shards whenever GPUs are free: each time, the longest waiting shard that fits in the free
    GPUs (no GPU idles while a waiting shard fits); sets each shard's start_at."""
    waiting = sorted((s for s in shards if s.engines), key=lambda s: (-s.seconds, s.index))
    running: list[tuple[float, int]] = []  # (end in seconds, GPUs it holds)
    now, free = 0.0, gpus
    while waiting:
        fits = next((s for s in waiting if s.gpus <= free), None)
        if fits is not None:
            waiting.remove(fits)
            fits.start_at = now / 60
            free -= fits.gpus
            heapq.heappush(running, (now + fits.seconds, fits.gpus))
            continue
        now, held = heapq.heappop(running)
        free += held


def _by_tp(scenarios: list[Scenario]) -> dict[int, tuple[str, list[Scenario]]]:
    """The selection split by TP size, each part with the `-m` expression of its models."""
    from ..suite.selection import model_marker

    groups: dict[int, list[Scenario]] = {}
    for s in scenarios:
        groups.setdefault(s.model.tp, []).append(s)
    return {
        tp: ('-m "' + " or ".join(sorted({model_marker(s.model.name) for s in members})) + '" ', members)
        for tp, members in sorted(groups.items())
    }


def make_plan(
    profile: Profile, scenarios: list[Scenario], planner: Planner, shards: int | None = None, gpus: int | None = None
) -> Plan:
    """The plan of `scenarios` (a profile's selection) in `shards` shards; with `gpus`, scheduled on
    that many GPUs (scenarios needing more are skipped, as a run there skips them) and, without
    `shards`, the split with the shortest wall time: `--shard I/N` of the whole selection for N in
    1..gpus, or, where TP sizes differ, each TP size's models (`-m`) sharded on their own, so that a
    shard of TP=1 engines does not hold four GPUs."""
    if (shards is not None and shards < 1) or (gpus is not None and gpus < 1):
        raise ValueError(f"--shards and --gpus must be at least 1, got {shards if gpus is None else gpus}")
    skipped = [s for s in scenarios if gpus is not None and s.model.tp > gpus]
    runnable = [s for s in scenarios if s not in skipped]
    options = [[("", runnable, count)] for count in ([shards] if shards is not None else range(1, (gpus or 1) + 1))]
    groups = _by_tp(runnable)
    if gpus is not None and shards is None and len(groups) > 1:
        for counts in itertools.product(*[range(1, gpus // tp + 1) for tp in groups]):
            options.append(
                [(selection, members, count) for (selection, members), count in zip(groups.values(), counts)]
            )
    best = None
    for option in options:
        parts = [shard for selection, members, count in option for shard in split(planner, members, count, selection)]
        for i, shard in enumerate(parts):
            shard.index = i + 1
        if gpus is not None:
            schedule(parts, gpus)
        candidate = Plan(profile, planner, parts, skipped, gpus)
        if best is None or candidate.wall_s < best.wall_s - 1e-6:
            best = candidate
    return best
