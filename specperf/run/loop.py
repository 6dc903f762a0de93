"""The measuring loop: warm-up, then timed rounds of a scenario's calls on one engine or several.

An engine here is anything with `generate(prompts, max_tokens, timeout_s) -> reply` (run.engines.engine's
Engine, or a fake in unit tests).  A schedule, the caller's, names the engine of each round: with
two engines, a balanced order (A B B A A B ...) lets slow drift of the machine cancel out of
per-pair ratios.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..judge import metrics
from ..records import CallTiming, Counters, Memory, RequestAcceptance
from .engines.engine import EngineError
from .engines.protocol import Batch, Reply
from .tracing import trace as tracing

Label = Hashable  # an engine's name in a measurement, the caller's choice


class Generator(Protocol):
    def generate(self, prompts: list[list[int]] | Batch, max_tokens: int, timeout_s: float) -> Reply: ...


@dataclass
class RoundResult:
    """One round: every call of the scenario once, on one engine."""

    engine: Label
    wall_s: float
    output_tokens: int
    counters: Counters  # the SD counters' change over the round's calls
    token_ids: list[list[int]]
    texts: list[str]
    memory: Memory = field(default_factory=Memory)  # peak memory after the round
    trace: dict | None = None  # run.tracing.trace's raw trace, from a traced engine
    calls: list[CallTiming] = field(default_factory=list)
    cpu_s: float | None = None  # CPU time of the engine's process tree over the round's calls
    instance: int = 0  # the engine pair (cluster) of a paired round
    latency: dict[str, float | None] | None = None  # a served round's latency percentiles
    errors: int = 0  # a served round's failed requests
    client_bound: bool = False  # a served round whose load generator may have set the pace
    # an SD round's counts per request, in order; None where the engine's vLLM gave none for one of them
    request_acceptance: list[RequestAcceptance] | None = None

    @property
    def throughput(self) -> float:
        """Output tokens per second of the round (0 for a round that took no time)."""
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0


def call_timing(reply: Reply) -> CallTiming:
    """One call's time and tokens, and whether its first request ended on EOS ("stop"): what the
    study's throughput averages (judge/metrics.study_throughput).  None where the engine did not say."""
    reasons = reply.finish_reasons
    return CallTiming(
        wall_s=reply.wall_s,
        output_tokens=reply.output_tokens,
        eos=reasons[0] == "stop" if reasons else None,
    )


def request_acceptance(replies: list[Reply]) -> list[RequestAcceptance] | None:
    """The round's per-request SD counts, its calls' requests in order (None: not all were counted)."""
    raw = [counts for r in replies for counts in (r.request_acceptance or [None])]
    if not raw or None in raw:
        return None
    return [RequestAcceptance.of_histogram(c["histogram"], c["drafted"]) for c in raw if c is not None]


def run_rounds(step: Callable[[], None], count: int) -> None:
    """The default way to run the rounds; the pytest plugin passes pytest-benchmark's instead."""
    for _ in range(count):
        step()


def _generate(
    engines: Mapping[Label, Generator], label: Label, prompts: list[list[int]], max_tokens: int, deadline: float
) -> Reply:
    """One call on engine `label`; an engine's failure says which (EngineError.engine)."""
    try:
        return engines[label].generate(prompts, max_tokens, max(0.0, deadline - time.monotonic()))
    except EngineError as err:
        err.engine = label
        raise


def warm_up(
    engines: Mapping[Label, Generator],
    calls: list[list[list[int]]],
    max_tokens: int,
    warmup: int,
    deadline: float = float("inf"),
) -> float:
    """Run the first call `warmup` times on every engine; returns the seconds it took."""
    t0 = time.monotonic()
    for label in engines:
        for _ in range(warmup):
            _generate(engines, label, calls[0], max_tokens, deadline)
    return time.monotonic() - t0


def measure(
    engines: Mapping[Label, Generator],
    calls: list[list[list[int]]],
    max_tokens: int,
    *,
    schedule: Sequence[Label],
    deadline: float = float("inf"),
    rounds_runner: Callable[[Callable[[], None], int], None] = run_rounds,
) -> dict[Label, list[RoundResult]]:
    """Run the schedule's rounds; returns each engine's rounds in order.

    deadline: a time.monotonic() value after which a call is given no more time (the engine times out).
    """
    results: dict[Label, list[RoundResult]] = {label: [] for label in engines}
    pending = iter(schedule)

    def step() -> None:
        label = next(pending)
        replies = [_generate(engines, label, c, max_tokens, deadline) for c in calls]
        results[label].append(
            RoundResult(
                engine=label,
                wall_s=sum(r.wall_s for r in replies),
                output_tokens=sum(r.output_tokens for r in replies),
                counters=metrics.sum_counters(
                    [metrics.counter_delta(r.counters_before, r.counters_after) for r in replies]
                ),
                token_ids=[ids for r in replies for ids in r.token_ids],
                texts=[t for r in replies for t in r.texts],
                memory=Memory(**replies[-1].memory),
                trace=tracing.merge_calls([r.trace for r in replies]),
                calls=[call_timing(r) for r in replies],
                cpu_s=sum(r.cpu_s for r in replies if r.cpu_s is not None)
                if all(r.cpu_s is not None for r in replies)
                else None,
                latency=replies[0].latency if len(replies) == 1 else None,  # a served round is one load
                errors=sum(r.errors for r in replies),
                client_bound=any(r.client_bound for r in replies),
                request_acceptance=request_acceptance(replies),
            )
        )

    rounds_runner(step, len(schedule))
    return results
