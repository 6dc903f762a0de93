"""A scenario's rounds on the engines it needs: one engine, or several alternating round by round.

Several engines are alive together when a run pairs them (a gate's current and candidate build, an
SD engine and its no-SD reference).  Where they do not fit in memory together, `blocks` alternates
blocks of that many rounds instead, with only one engine alive (started again for each block).
With `instances` > 1 each side runs that many engines of its build side by side, pair i on the
i-th of them in turn: two fresh engines of one build differ by a few percent on a small CPU (where
each lands in memory and on the cores), and a verdict over several instances per side averages
that offset instead of taking one draw of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..profiles.scenarios import Scenario
from .loop import RoundResult, balanced_schedule, measure, run_rounds, warm_up
from .pool import EnginePool
from .telemetry import TelemetrySampler


@dataclass
class EngineFacts:
    provenance: dict
    effective_config: dict
    env: dict


@dataclass
class Measured:
    rounds: dict[str, list[RoundResult]]
    engines: dict[str, EngineFacts]
    pairing: str
    start_s: float = 0.0
    warmup_s: float = 0.0
    measure_s: float = 0.0
    telemetry: list[dict] = field(default_factory=list)


def _facts(engine) -> EngineFacts:
    return EngineFacts(engine.provenance, engine.effective_config, engine.config.env)


def _phases(wanted: dict, rounds: int, blocks: int | None, instances: int):
    """(engines alive: label -> (scenario, python[, instance]), schedule) in turn: all engines alternating
    round by round (`instances` of each side, "label#i"), or blocks of `blocks` rounds with one engine
    alive, the order flipping each time (A B B A ...)."""
    labels = list(wanted)
    if blocks is None or len(labels) == 1:
        if instances > 1 and len(labels) > 1:
            yield ({f"{label}#{i}": (*wanted[label], i) for i in range(instances) for label in labels},
                   _instance_schedule(labels, rounds, instances))
        else:
            yield wanted, balanced_schedule(labels, rounds)
        return
    done, forward = 0, True
    while done < rounds:
        size = min(blocks, rounds - done)
        for label in (labels if forward else list(reversed(labels))):
            yield {label: wanted[label]}, [label] * size
        done, forward = done + size, not forward


def _instance_schedule(labels: list[str], rounds: int, instances: int) -> list[str]:
    """Pair j on instance j % instances ("label#i"), the order within a pair flipping every
    `instances` pairs, so each instance sees both orders (A B, then B A)."""
    order = []
    for j in range(rounds):
        pair = [f"{label}#{j % instances}" for label in labels]
        order += pair if (j // instances) % 2 == 0 else pair[::-1]
    return order


def _side(label: str) -> str:
    """The side an engine label belongs to: "current#1" is an instance of "current"."""
    return label.split("#")[0]


def measure_rounds(pool: EnginePool, wanted: dict[str, tuple[Scenario, str | None]], calls: list, max_tokens: int,
                   warmup: int, rounds: int, *, deadline: float = float("inf"), blocks: int | None = None,
                   instances: int = 1, gpus: list[int] | None = None,
                   rounds_runner: Callable[[Callable[[], None], int], None] = run_rounds) -> Measured:
    """`rounds` rounds per engine of `wanted` (label -> (scenario, python)), in a balanced order.
    `rounds_runner` runs the rounds where they are one phase (pytest-benchmark times one call only)."""
    labels = list(wanted)
    blocked = blocks is not None and len(labels) > 1
    paired_instances = instances > 1 and len(labels) > 1 and not blocked
    measured = Measured({label: [] for label in labels}, {},
                        f"blocks of {blocks} rounds" if blocked else
                        f"interleaved, {instances} engines per side" if paired_instances else
                        "interleaved" if len(labels) > 1 else "single")
    done: dict[str, list[RoundResult]] = {}
    try:
        for alive, schedule in _phases(wanted, rounds, blocks, instances if paired_instances else 1):
            engines, start_s = pool.engines_for(alive)
            measured.engines |= {_side(label): _facts(engine) for label, engine in engines.items()
                                 if _side(label) not in measured.engines}
            measured.start_s += start_s
            measured.warmup_s += warm_up(engines, calls, max_tokens, warmup, deadline)
            t0 = time.monotonic()
            with TelemetrySampler(gpus) as sampler:
                phase = measure(engines, calls, max_tokens, schedule=schedule, deadline=deadline,
                                rounds_runner=run_rounds if blocked else rounds_runner)
            measured.measure_s += time.monotonic() - t0
            measured.telemetry.append(sampler.summary())
            for label, results in phase.items():
                done.setdefault(label, []).extend(results)
    except Exception as err:            # a failure names the side, not the instance
        if hasattr(err, "engine_label"):
            err.engine_label = _side(err.engine_label)
        raise
    for label in labels:
        if paired_instances:            # back in pair order: pair j ran on instance j % instances
            measured.rounds[label] = [done[f"{label}#{j % instances}"][j // instances] for j in range(rounds)]
            for r in measured.rounds[label]:
                r.engine = label
        else:
            measured.rounds[label] = done.get(label, [])
    return measured
