"""Drawing the same prompts many times on an SD engine and on its no-SD reference, for the test
that SD's sampled tokens follow the target's distribution (judge/distribution.py.distribution_match_p
of the two sides' draws, each side drawn from seeds of its own).

Each prompt is drawn `draws` times in one call, each draw with a seed of its own, `tokens` tokens
long: the first output positions, where the check looks.  A seed repeats its draws, with SD and
without, and an SD draw shares a no-SD draw's tokens up to the first draft, so each side draws
from seeds of its own (docs/methodology/sampled.md).
"""

from __future__ import annotations

from ..records import Sampling
from .engines.protocol import Batch
from .loop import Generator

DRAWS = 64  # draws of each prompt per side
POSITIONS = 16  # output positions compared
SEED = 7_000_000  # the draws' seeds start here: apart from the timing rounds' (records.Sampling.params)
TIMEOUT_S = 600.0  # one prompt's draws
OTHER_SEEDS = 1_000_000  # apart between sides: each side's draws independent of the others'


def draws(
    engine: Generator,
    prompts: list[list[int]],
    sampling: Sampling,
    count: int = DRAWS,
    tokens: int = POSITIONS,
    seed: int = SEED,
) -> list[list[list[int]]]:
    """Per prompt, `count` draws of its first `tokens` output tokens on `engine`, seeded from `seed` on."""
    seeded = sampling.model_copy(update={"seed": seed})
    return [
        engine.generate(Batch([prompt] * count, [seeded.params(i) for i in range(count)]), tokens, TIMEOUT_S).token_ids
        for prompt in prompts
    ]
