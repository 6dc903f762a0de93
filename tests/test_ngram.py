"""n-gram acceptance at every output position (analysis/ngram.py), from the prompt and the output.
tests/cpu_tier/test_ngram_rule.py checks the proposal against vLLM's own function."""

from __future__ import annotations

import numpy as np

from specperf.analysis import ngram


def propose(context, window=(2, 3), k=4):
    return list(ngram.proposal(np.array(context), *window, k))


def test_the_longest_recurring_ngram_wins_and_of_its_occurrences_the_earliest():
    assert propose([3, 4, 7, 1, 2, 3, 4, 9, 2, 3, 4]) == [9, 2, 3, 4]  # 3-gram [2, 3, 4], not [3, 4]
    assert propose([5, 1, 2, 7, 1, 2, 8, 1, 2]) == [7, 1, 2, 8]  # [1, 2] first at 1
    assert propose([1, 2, 3, 9, 1, 2, 3], k=10) == [9, 1, 2, 3]  # only as far as the context goes
    assert propose([1, 2, 3, 4, 5]) == [] and propose([1]) == []


def test_acceptance_counts_drafts_equal_to_the_output():
    prompt = [10, 11, 12, 13, 14, 15]
    output = [12, 13, 14, 15, 99, 12, 13]
    lengths = ngram.acceptance_lengths(prompt, output, window=(2, 3))
    assert len(lengths) == len(output)
    # after [.., 15, 12, 13] (p = 2): [12, 13] recurs at 2 and proposes 14, 15, 12, 13 .. : 14, 15 accepted, 12 != 99
    assert lengths[1] == 3
    # after [.., 12, 13, 14, 15, 99] (p = 5) nothing recurs: no draft
    assert lengths[4] == 0
    # at the end [.., 99, 12, 13]: [12, 13] proposes 14, 15, ..: nothing left to verify, one token
    assert lengths[-1] == 1


def test_drafts_are_capped_at_the_studys_longest():
    prompt = list(range(40))
    lengths = ngram.acceptance_lengths(prompt, list(range(40)), window=(3, 7))
    assert max(lengths) == ngram.STUDY_MAX_DRAFT + 1
