"""Drawing the same prompts many times on an SD engine and on its no-SD reference, for the test
that SD's sampled tokens follow the target's distribution (judge/distribution.py.distribution_match_p
of the two sides' draws, each side drawn from seeds of its own).  A run checks each sampled SD
scenario measured offline so (DistributionChecks), after its timed rounds, on the same build's
engines: the result's `distribution_match_p`, judged on its value alone (judge/metrics.py).

Each prompt is drawn `draws` times in one call, each draw with a seed of its own, `tokens` tokens
long: the first output positions, where the check looks.  A seed repeats its draws, with SD and
without, and an SD draw shares a no-SD draw's tokens up to the first draft, so each side draws
from seeds of its own (docs/methodology/sampled.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..judge.distribution import distribution_match_p
from ..records import Metric, Sampling
from ..records.scenario import CHECK_DRAWS, REFERENCE_METHOD, Scenario
from ..status import ERROR_ENGINE
from .calls import Calls
from .engines.engine import EngineError
from .engines.protocol import Batch
from .loop import Generator
from .pool import EnginePool

POSITIONS = 16  # output positions compared
SEED = 7_000_000  # the draws' seeds start here: apart from the timing rounds' (records.Sampling.params)
TIMEOUT_S = 600.0  # one prompt's draws
OTHER_SEEDS = 1_000_000  # apart between sides: each side's draws independent of the others'
PROMPTS = 2  # a scenario's first distinct prompts are drawn


def draws(
    engine: Generator,
    prompts: list[list[int]],
    sampling: Sampling,
    count: int = CHECK_DRAWS,
    tokens: int = POSITIONS,
    seed: int = SEED,
) -> list[list[list[int]]]:
    """Per prompt, `count` draws of its first `tokens` output tokens on `engine`, seeded from `seed` on."""
    seeded = sampling.model_copy(update={"seed": seed})
    return [
        engine.generate(Batch([prompt] * count, [seeded.params(i) for i in range(count)]), tokens, TIMEOUT_S).token_ids
        for prompt in prompts
    ]


def applies(scenario: Scenario) -> bool:
    """Whether a scenario's outputs are checked by their distribution: a sampled SD scenario run offline."""
    sampling = scenario.sampling
    return not sampling.greedy and sampling.check_draws > 0 and not scenario.is_reference and not scenario.serves


def first_prompts(calls: Calls, count: int = PROMPTS) -> list[list[int]]:
    """The first `count` distinct prompts of a round's calls."""
    distinct = {tuple(ids): None for call in calls.calls for ids in call}
    return [list(ids) for ids in list(distinct)[:count]]


class DistributionChecks:
    """The distribution checks of a run: a scenario's first prompts drawn on its SD engine, then on
    the no-SD engine of the same build, whose draws are kept for the run's other scenarios."""

    def __init__(self, pool: EnginePool, log: Callable[[str], None] = print):
        self.pool, self.log = pool, log
        self._references: dict[tuple, list[list[list[int]]]] = {}  # (python, engine key, prompts, sampling)

    def of(self, scenario: Scenario, python: str | None, calls: Calls) -> Metric | None:
        """`scenario`'s distribution_match_p on the build of `python` (None: this one); None where it
        is not checked or no position told anything."""
        if not applies(scenario):
            return None
        started, prompts = time.monotonic(), first_prompts(calls)
        reference = scenario.replace(method=REFERENCE_METHOD)
        # the check's draws are seeded from SEED, not the scenario's seed
        kept = (python, reference.engine_key, str(prompts), scenario.sampling.model_dump_json(exclude={"seed"}))
        count, drawing = scenario.sampling.check_draws, scenario
        try:  # one engine at a time (two may not fit in a GPU's memory): the SD engine, alive after the rounds, first
            engine = self.pool.engines_for({"sd": (scenario, python)})[0]["sd"]
            sd = draws(engine, prompts, scenario.sampling, count, seed=SEED + OTHER_SEEDS)
            if kept not in self._references:
                drawing = reference
                engine = self.pool.engines_for({"no-SD": (reference, python)})[0]["no-SD"]
                self._references[kept] = draws(engine, prompts, scenario.sampling, count)
        except EngineError as err:  # that engine's slot fails; the scenario keeps its rounds, without the check
            self.pool.fail((python, drawing.engine_key), str(err), ERROR_ENGINE)
            self.log(f"distribution check: {scenario.id} not checked: its {drawing.method.label} engine failed: {err}")
            return None
        found = distribution_match_p(sd, self._references[kept], POSITIONS)
        self.log(f"distribution check: {scenario.id} p={found} in {time.monotonic() - started:.0f} s")
        return None if found is None else Metric(value=found, samples=[found])
