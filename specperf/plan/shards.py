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
    selection: str = ""  # the part of them its array's other shards share (-m of a TP size's models)

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
    max_shard_s: float | None = None  # --max-shard-hours: arrays of shards a scheduler places

    def arrays(self) -> list[tuple[int, int, str, float]]:
        """The job arrays a scheduler submits, one per selection (each TP size's models apart): GPUs a
        task (0 on the CPU tier: plan_shard), tasks, the pytest options every task shares (each adds --shard
        I/N), and the hours its longest shard is expected to run (a time limit's floor)."""
        cut = hours_option(self.max_shard_s)
        found: dict[str, tuple[int, int, str, float]] = {}
        for shard in self.shards:
            gpus, count, options, hours = found.get(shard.selection, (0, 0, (shard.selection + cut).strip(), 0.0))
            found[shard.selection] = (max(gpus, shard.gpus), count + 1, options, max(hours, shard.seconds / 3600))
        return list(found.values())

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
    gpus = max((s.model.tp for s in scenarios), default=0) if planner.profile.tier == "gpu" else 0
    return ShardPlan(index, engines, planner.machine.run_s, gpus, command=command)


def hours_option(max_s: float | None) -> str:
    """--max-shard-hours as the tasks must be given it: every digit the plan cut by."""
    return f"--max-shard-hours {max_s / 3600:.15g}" if max_s is not None else ""


def split(
    planner: Planner, scenarios: list[Scenario], count: int, selection: str = "", max_s: float | None = None
) -> list[ShardPlan]:
    """The shards `pytest [selection] --shard I/count [--max-shard-hours H]` runs (run/sharding.py's
    split), planned."""
    return planned(planner, sharding.assign(scenarios, count, max_s), selection, max_s)


def planned(planner: Planner, parts: list[list[Scenario]], selection: str, max_s: float | None) -> list[ShardPlan]:
    """The shards of a split, each planned, with the command that runs it."""
    count, cut = len(parts), f" {hours_option(max_s)}" if max_s is not None else ""
    shards = []
    for i, part in enumerate(parts):
        command = f"{selection}--shard {i + 1}/{count}{cut}" if count > 1 else selection.strip()
        shards.append(plan_shard(planner, i + 1, part, command))
        shards[-1].selection = selection
    return shards


def array(planner: Planner, scenarios: list[Scenario], max_s: float, selection: str = "") -> list[ShardPlan]:
    """Few shards of `scenarios` (cut as --max-shard-hours cuts them) in which each either runs
    within `max_s` by the planner's figures or holds a single piece (a scenario may alone be
    longer): the count found by bisection, as if more shards always fitted better (nearly so)."""
    if not scenarios:
        return []
    pieces = [piece for unit in sharding.units(scenarios) for piece in sharding.pieces(unit, max_s)]
    piece_of = {id(s): i for i, piece in enumerate(pieces) for s in piece.scenarios}
    seconds = [plan_shard(planner, 0, list(p.scenarios + p.references)).seconds for p in pieces]
    too_long = sum(1 for x in seconds if x > max_s)
    low = max(1, too_long + math.ceil(math.fsum(x for x in seconds if x <= max_s) / max_s))
    high = len(pieces)

    def fits(count: int) -> list[ShardPlan] | None:
        parts = sharding.assign(scenarios, count, max_s)
        shards = planned(planner, parts, selection, max_s)
        ok = all(
            shard.seconds <= max_s or len({piece_of[id(s)] for s in part if id(s) in piece_of}) <= 1
            for shard, part in zip(shards, parts)
        )
        return shards if ok or count == len(pieces) else None

    best = fits(high)  # a shard a piece always fits
    while low < high:  # the fewest that fit, by bisection
        middle = (low + high) // 2
        shards = fits(middle)
        if shards is None:
            low = middle + 1
        else:
            best, high = shards, middle
    assert best is not None
    return best


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


def _by_tp(scenarios: list[Scenario], keyword: str = "", markexpr: str = "") -> dict[int, tuple[str, list[Scenario]]]:
    """The selection split by TP size, each part with the options that select it: its models' `-m`,
    and-ed with the user's own -m (pytest keeps only the last), beside the user's -k."""
    from ..suite.selection import model_marker

    groups: dict[int, list[Scenario]] = {}
    for s in scenarios:
        groups.setdefault(s.model.tp, []).append(s)
    return {
        tp: (
            selection_options(keyword, markexpr, " or ".join(sorted({model_marker(s.model.name) for s in members}))),
            members,
        )
        for tp, members in sorted(groups.items())
    }


def selection_options(keyword: str = "", markexpr: str = "", models: str = "") -> str:
    """pytest's -k and -m options of a selection (each with its trailing space; '' for none)."""
    marks = f"({markexpr}) and ({models})" if markexpr and models else markexpr or models
    return "".join(f'{flag} "{expr}" ' for flag, expr in (("-k", keyword), ("-m", marks)) if expr)


def make_plan(
    profile: Profile,
    scenarios: list[Scenario],
    planner: Planner,
    shards: int | None = None,
    gpus: int | None = None,
    max_shard_s: float | None = None,
    keyword: str = "",
    markexpr: str = "",
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
    if max_shard_s is not None:
        return arrays_plan(profile, runnable, planner, max_shard_s, gpus, skipped, keyword, markexpr)
    # more shards than units leaves some empty: no shorter, so counts stop at the units
    most = max(1, len(sharding.units(runnable)))
    options = [
        [("", runnable, count)] for count in ([shards] if shards is not None else range(1, min(gpus or 1, most) + 1))
    ]
    groups = _by_tp(runnable)
    if gpus is not None and shards is None and len(groups) > 1:
        ranges = [range(1, min(gpus // tp, len(sharding.units(members))) + 1) for tp, (_, members) in groups.items()]
        for counts in itertools.product(*ranges):
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


def arrays_plan(
    profile: Profile,
    scenarios: list[Scenario],
    planner: Planner,
    max_shard_s: float,
    gpus: int | None,
    skipped: list[Scenario],
    keyword: str = "",
    markexpr: str = "",
) -> Plan:
    """Shards of at most `max_shard_s` for a cluster scheduler: an array per TP size (a task asks for
    that many GPUs), each of few shards that keep within it; with `gpus`, scheduled on that many.
    `keyword`, `markexpr`: the -k/-m the selection was made with, which every task repeats."""
    groups = _by_tp(scenarios, keyword, markexpr)
    several = len(groups) > 1 or bool(skipped)  # a task's selection must leave the skipped TP sizes out
    selections = groups.values() if several else [(selection_options(keyword, markexpr), scenarios)]
    parts = [shard for selection, members in selections for shard in array(planner, members, max_shard_s, selection)]
    for i, shard in enumerate(parts):
        shard.index = i + 1
    if gpus is not None:
        schedule(parts, gpus)
    return Plan(profile, planner, parts, skipped, gpus, max_shard_s)
