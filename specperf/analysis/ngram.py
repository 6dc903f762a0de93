"""What n-gram speculation would accept at every output position, computed from the prompt and
the greedy output: the oracle simulator's input (analysis/simulate.py) for n-gram, exact wherever n-gram
did not run.

The proposal is vLLM's (v1/spec_decode/ngram_proposer.py, `_find_longest_matched_ngram_and_propose_tokens`,
v0.10 to v0.33): the longest n-gram, n in [min_n, max_n], that ends the context and occurred earlier
in it; of its occurrences the earliest; the k tokens that followed it, as far as the context goes.
At greedy decoding a draft token is accepted while it equals the output's next token.
"""

from __future__ import annotations

import numpy as np

STUDY_WINDOW = (3, 7)  # the study's n-gram lookup (prompt_lookup_min, prompt_lookup_max)
STUDY_MAX_DRAFT = 20  # the longest draft its acceptance traces count (acceptance length <= 21)


def proposal(context: np.ndarray, min_n: int, max_n: int, k: int) -> np.ndarray:
    """vLLM's n-gram draft for `context` (empty when no n-gram of the window recurs)."""
    total = len(context)
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        suffix = context[total - n :]
        windows = np.lib.stride_tricks.sliding_window_view(context[: total - 1], n)
        hits = np.flatnonzero((windows == suffix).all(axis=1))
        if hits.size:
            start = int(hits[0]) + n
            return context[start : start + min(k, total - start)]
    return context[:0]


def acceptance_lengths(
    prompt: list[int], output: list[int], window: tuple[int, int] = STUDY_WINDOW, max_draft: int = STUDY_MAX_DRAFT
) -> list[int]:
    """For each output position p (p tokens generated; the first comes from the prefill), the tokens
    a step starting there would produce: accepted drafts + 1, or 0 where n-gram proposes nothing
    (the step then produces one token, and vLLM counts no draft).  One value per output token."""
    tokens = np.array(list(prompt) + list(output), dtype=np.int64)
    lengths = []
    for p in range(1, len(output) + 1):
        end = len(prompt) + p
        draft = proposal(tokens[:end], window[0], window[1], max_draft)
        if not len(draft):
            lengths.append(0)
            continue
        actual = tokens[end : end + len(draft)]
        matched = np.flatnonzero(draft[: len(actual)] != actual)
        lengths.append(1 + int(matched[0] if matched.size else len(actual)))
    return lengths
