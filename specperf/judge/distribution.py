"""Lossless under sampling: do SD's sampled tokens follow the target's distribution?

Rejection sampling promises the target's distribution, not its tokens, so greedy output equality
says nothing of a sampled run.  Here the same prompts are drawn many times with SD and without it
(run/distribution_check.py), and at each of the first output positions the tokens drawn by the two
are compared with a chi-square test of homogeneity (scipy.stats.chi2_contingency), per prompt:
tokens drawn fewer than MIN_COUNT times by both together are pooled into one column, and a position
every draw filled with one token tells nothing.  The tests of one check (prompts x positions) are
taken together by Bonferroni, so `distribution_match_p` is at most 5% for an unchanged vLLM in at
most 5% of checks however many positions it looks at.  A sampler that accepts every draft, or
drafts from another distribution, moves the tokens of the positions where it drafted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

MIN_COUNT = 5  # a token drawn fewer times than this (both sides together) joins the pooled column


def position_p(sd: Sequence[int], reference: Sequence[int]) -> float | None:
    """The chi-square test's p of one position's tokens, SD's against the reference's; None where
    the position tells nothing (one column left after pooling, or no draw reached it on a side)."""
    from scipy.stats import chi2_contingency

    if not sd or not reference:
        return None
    ours, theirs = Counter(sd), Counter(reference)
    common = [t for t in ours.keys() | theirs.keys() if ours[t] + theirs[t] >= MIN_COUNT]
    pooled = (len(sd) - sum(ours[t] for t in common), len(reference) - sum(theirs[t] for t in common))
    columns = [(ours[t], theirs[t]) for t in sorted(common)] + ([pooled] if sum(pooled) else [])
    if len(columns) < 2:
        return None
    return float(chi2_contingency(list(zip(*columns)), correction=False).pvalue)


def distribution_match_p(sd: list[list[list[int]]], reference: list[list[list[int]]], positions: int) -> float | None:
    """Per prompt, each draw's output tokens (`sd[p][d]`, `reference[p][d]`): the Bonferroni p of
    the position tests over the first `positions` output positions of every prompt; None where no
    position of any prompt tells anything."""
    tests = [
        found
        for ours, theirs in zip(sd, reference, strict=True)
        for j in range(positions)
        if (found := position_p([d[j] for d in ours if len(d) > j], [d[j] for d in theirs if len(d) > j])) is not None
    ]
    return min(1.0, len(tests) * min(tests)) if tests else None
