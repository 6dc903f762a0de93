"""The suite's n-gram proposal (analysis/ngram.py) is the installed vLLM's: the same draft for random
contexts, many with repeats, for several windows and draft lengths (no engine starts)."""

import numpy as np
import pytest

from specperf.analysis import ngram

pytestmark = pytest.mark.cpu_tier


def test_the_proposal_is_vllms():
    from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens as vllms

    rng = np.random.default_rng(0)
    checked = 0
    for trial in range(600):
        vocabulary = int(rng.integers(2, 12))  # small vocabularies: n-grams recur often
        context = rng.integers(0, vocabulary, int(rng.integers(1, 120))).astype(np.int32)
        min_n = int(rng.integers(1, 4))
        max_n, k = min_n + int(rng.integers(0, 5)), int(rng.integers(1, 21))
        theirs = vllms(context, min_n, max_n, 4096, k)
        ours = ngram.proposal(context, min_n, max_n, k)
        assert list(ours) == list(theirs), (trial, list(context), min_n, max_n, k)
        checked += len(theirs) > 0
    assert checked > 300  # most contexts had a draft to compare
