"""A scenario's rounds on the engines it needs: one engine, or several alternating round by round.

Several engines are alive together when a run pairs them (a gate's current and candidate build, an
SD engine and its no-SD reference).  Two fresh engines of one build differ by a few percent on a
small CPU (where each lands in memory and on the cores), and every pair of rounds on the same two
engines shares that offset, so a paired verdict needs many engine pairs (clusters), not only many
pairs: with `instances` > 1 each side runs that many engines side by side, pair j on the j-th of
them in turn, and with `sets` > 1 the pairs are split over that many sets of engines started
anew.  Nothing about a side's place may favour it: the engines of a pair of rounds run in one of
a few orders (`orders`: one, its sides swapped, and with no-SD references beside the SD engines
both reversed), taken in turn from pair to pair, from engine pair to engine pair and from set to
set, and the engines start and warm up in the order of their engine pair's first pair.  So each
side starts, warms up and runs first (in a set and in a pair), follows its own build and follows
itself as often as the other (tests/test_schedule_balance.py counts it).  Where two engines do not
fit in memory together, `blocks` alternates blocks of that many rounds instead, with only one
engine alive, each block's engines fresh: a block of pairs is an engine pair of its own, sharing
no engine with its neighbours.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from ..profiles.scenarios import Scenario
from .engines.engine import EngineError
from .hardware.telemetry import TelemetrySampler
from .loop import Label, RoundResult, measure, run_rounds, warm_up
from .pool import EnginePool


class Instance(NamedTuple):
    """One of the engines of a label alive side by side: the label's engine in engine pair `cluster`."""

    label: Label
    cluster: int


@dataclass
class EngineFacts:
    provenance: dict
    effective_config: dict
    env: dict


@dataclass
class Measured:
    rounds: dict[Label, list[RoundResult]]
    engines: dict[Label, EngineFacts]
    pairing: str = ""
    start_s: float = 0.0
    warmup_s: float = 0.0
    measure_s: float = 0.0
    telemetry: list[dict] = field(default_factory=list)
    looks: list[float] = field(default_factory=list)  # a sequential gate's, as fractions of its most sets


@dataclass(frozen=True)
class Looks:
    """A sequential gate (judge/sequential.py): after the profile's sets, one more set at a time, up
    to `max_sets`, until `decided(rounds so far, the looks' fractions)` or the time runs short."""

    max_sets: int
    decided: Callable[[dict[Label, list[RoundResult]], list[float]], bool]


def _facts(engine) -> EngineFacts:
    return EngineFacts(engine.provenance, engine.effective_config, engine.config.env)


def orders(labels: list[Label]) -> list[list[Label]]:
    """The orders the engines of one pair of rounds run in, taken in turn: the labels' own (current
    then candidate; with references, the references after the SD engines in the other order), that
    order with the sides swapped, and both reversed, each once."""
    first = labels if len(labels) != 4 else [labels[0], labels[1], labels[3], labels[2]]
    swapped = [labels[labels.index(x) ^ 1] for x in first]  # current <-> candidate (labels alternate sides)
    found: list[list[Label]] = []
    for order in (first, swapped, first[::-1], swapped[::-1]):
        if order not in found:
            found.append(order)
    return found


def phases(wanted: dict, rounds: int, blocks: int | None, instances: int, sets: int, extra_sets: int = 0):
    """(engines alive: label -> (scenario, python[, instance]), schedule, cluster of each round) in turn;
    `extra_sets`: sets a sequential gate may add, each of the first set's pairs."""
    labels = list(wanted)
    if len(labels) == 1:
        yield wanted, labels * rounds, [0] * rounds
        return
    turns = orders(labels)
    if blocks is not None:
        done, block = 0, 0
        while done < rounds:
            size = min(blocks, rounds - done)
            for label in turns[block % len(turns)]:
                yield {Instance(label, block): (*wanted[label], block)}, [Instance(label, block)] * size, [block] * size
            done, block = done + size, block + 1
        return
    first, planned = 0, _split(rounds, sets)
    for set_number, pairs in enumerate(planned + planned[:1] * extra_sets):
        clusters = list(range(first, first + min(instances, pairs)))  # no engine that would run no pair
        turn_of = {c: set_number + i for i, c in enumerate(clusters)}  # the first set's turns, one on per set
        alive = {}
        for c in clusters:  # started (and warmed up) in the order of the cluster's first pair
            alive |= {Instance(label, c): (*wanted[label], c) for label in turns[turn_of[c] % len(turns)]}
        order, of_round = _cluster_schedule(turns, pairs, clusters, turn_of)
        yield alive, order, of_round
        first += instances


def _split(rounds: int, sets: int) -> list[int]:
    """`rounds` pairs over `sets` sets as evenly as they go (no empty set)."""
    sets = max(1, min(sets, rounds))
    return [rounds // sets + (1 if s < rounds % sets else 0) for s in range(sets)]


def _cluster_schedule(
    turns: list[list[Label]], pairs: int, clusters: list[int], turn_of: dict[int, int]
) -> tuple[list[Instance], list[int]]:
    """Pair j on cluster clusters[j % n], its engines in the cluster's next order: the first pair
    of a cluster in the order its engines started in."""
    order, of_round = [], []
    for j in range(pairs):
        cluster = clusters[j % len(clusters)]
        pair = [Instance(label, cluster) for label in turns[(turn_of[cluster] + j // len(clusters)) % len(turns)]]
        order += pair
        of_round += [cluster] * len(pair)
    return order, of_round


def _label(engine: Label) -> Label:
    """The label an engine of the schedule measures for: an Instance's own, else itself."""
    return engine.label if isinstance(engine, Instance) else engine


def measure_rounds(
    pool: EnginePool,
    wanted: dict[Label, tuple[Scenario, str | None]],
    calls: list,
    max_tokens: int,
    warmup: int,
    rounds: int,
    *,
    deadline: float = float("inf"),
    blocks: int | None = None,
    instances: int = 1,
    sets: int = 1,
    gpus: list[int] | None = None,
    rounds_runner: Callable[[Callable[[], None], int], None] = run_rounds,
    looks: Looks | None = None,
) -> Measured:
    """`rounds` rounds per engine of `wanted` (label -> (scenario, python)), in a balanced order; each
    round's `instance` names the cluster (engine pair) it ran on, the same for every side of a pair.
    `rounds_runner` runs the rounds where they are one phase (pytest-benchmark times one call only);
    `looks`: add sets while the gate cannot decide (sets side by side only, not blocks)."""
    labels = list(wanted)
    paired = len(labels) > 1
    blocked = blocks is not None and paired
    extra = max(0, looks.max_sets - sets) if looks is not None and paired and not blocked else 0
    planned = list(phases(wanted, rounds, blocks if blocked else None, instances, sets, extra))
    measured = Measured({label: [] for label in labels}, {})
    one_phase = len(planned) == 1
    try:
        for done, (alive, schedule, of_round) in enumerate(planned, start=1):
            if done > sets and _no_time_for_another(measured, done - 1, deadline):
                break
            engines, start_s = pool.engines_for(alive)
            measured.engines |= {
                _label(label): _facts(engine)
                for label, engine in engines.items()
                if _label(label) not in measured.engines
            }
            measured.start_s += start_s
            deadline += start_s  # the limit is the warm-up's and the rounds'; starts have their own
            measured.warmup_s += warm_up(engines, calls, max_tokens, warmup, deadline)
            t0 = time.monotonic()
            with TelemetrySampler(gpus) as sampler:
                phase = measure(
                    engines,
                    calls,
                    max_tokens,
                    schedule=schedule,
                    deadline=deadline,
                    rounds_runner=rounds_runner if one_phase else run_rounds,
                )
            measured.measure_s += time.monotonic() - t0
            measured.telemetry.append(sampler.summary())
            for label, cluster in zip(schedule, of_round):  # each side's rounds in pair order
                result = phase[label].pop(0)
                result.instance = cluster
                measured.rounds[_label(label)].append(result)
            if extra and done >= sets:
                measured.looks.append(done / len(planned))
                if looks is not None and looks.decided(measured.rounds, measured.looks):
                    break
    except EngineError as err:  # a failure names the label, not the instance
        err.engine = _label(err.engine) if err.engine is not None else None
        raise
    for label in labels:
        for r in measured.rounds[label]:
            r.engine = label
    measured.pairing = _pairing(measured, blocks if blocked else None, instances)
    return measured


def _no_time_for_another(measured: Measured, sets_done: int, deadline: float) -> bool:
    """Whether one more set, as long as the average set so far, would overrun the deadline."""
    per_set = (measured.start_s + measured.warmup_s + measured.measure_s) / sets_done
    return time.monotonic() + per_set > deadline


def _pairing(measured: Measured, blocks: int | None, instances: int) -> str:
    paired = len(measured.rounds) > 1
    clusters = len({r.instance for rounds in measured.rounds.values() for r in rounds})
    if blocks is not None:
        return f"blocks of {blocks} rounds"
    if clusters > 1:
        return f"interleaved, {clusters} engine pairs ({instances} per side alive, {len(measured.telemetry)} set(s))"
    return "interleaved" if paired else "single"
