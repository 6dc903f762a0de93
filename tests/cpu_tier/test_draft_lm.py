"""The suite's own run of a draft model (run/engines/draft_lm.py) on SmolLM2's builtin draft: drafts from a
reused key-value cache equal drafts from scratch, and the acceptance computed in one pass over a
known output equals what drafting at each position would accept (no engine starts)."""

import numpy as np
import pytest

from specperf import checkpoints
from specperf.run.engines.draft_lm import DraftLM

pytestmark = pytest.mark.cpu_tier


@pytest.fixture(scope="module")
def draft():
    return DraftLM(checkpoints.resolve("builtin:smollm2-135m-draft"))


def greedy(draft: DraftLM, tokens: list[int], n: int) -> list[int]:
    out = list(tokens)
    for _ in range(n):
        out.append(int(draft.predictions(out)[-1]))
    return out[len(tokens) :]


def test_cached_drafts_equal_drafts_from_scratch(draft):
    rng = np.random.default_rng(0)
    context = rng.integers(100, 5000, 40).astype(np.int64)
    assert draft.propose(0, context, 3) == greedy(draft, list(context), 3)
    # the same row grows by two accepted tokens and one of its own: the cache is cropped and reused
    grown = np.concatenate([context, rng.integers(100, 5000, 3)])
    assert draft.propose(0, grown, 3) == greedy(draft, list(grown), 3)
    # another request takes the row: nothing of the cache is shared
    other = rng.integers(100, 5000, 25).astype(np.int64)
    assert draft.propose(0, other, 4) == greedy(draft, list(other), 4)


def test_acceptance_in_one_pass_equals_drafting_at_each_position(draft):
    rng = np.random.default_rng(1)
    prompt = [int(t) for t in rng.integers(100, 5000, 30)]
    # an output the draft partly agrees with: its own greedy continuation, with a few tokens changed
    output = greedy(draft, prompt, 24)
    for i in (5, 13, 19):
        output[i] = int(rng.integers(100, 5000))
    lengths = draft.acceptance_lengths(prompt, output, max_draft=4)
    assert len(lengths) == len(output) and max(lengths) > 2
    for p in range(1, len(output)):
        proposed = draft.propose(1, np.array(prompt + output[:p], dtype=np.int64), 4)
        actual = output[p : p + 4]
        agree = next((i for i, (a, b) in enumerate(zip(proposed, actual)) if a != b), len(actual))
        assert lengths[p - 1] == 1 + agree, p
