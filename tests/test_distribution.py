"""The distribution test of sampled SD (judge/distribution.py) on constructed draws."""

from __future__ import annotations

import random

from specperf.judge.distribution import distribution_match_p, position_p


def drawn(weights: dict[int, float], count: int, seed: int, length: int = 3) -> list[list[int]]:
    rng = random.Random(seed)
    tokens, chances = list(weights), list(weights.values())
    return [rng.choices(tokens, chances, k=length) for _ in range(count)]


def test_draws_of_one_distribution_match_and_of_another_do_not():
    target = {1: 0.5, 2: 0.3, 3: 0.15, 4: 0.05}
    same = [distribution_match_p([drawn(target, 200, s)], [drawn(target, 200, s + 1000)], 3) for s in range(300)]
    assert sum(p < 0.05 for p in same) <= 21  # at most 5% expected (1,000 such checks: 4.7%)
    favoured = {1: 0.65, 2: 0.22, 3: 0.1, 4: 0.03}  # the drafted token drawn more often than the target draws it
    moved = [distribution_match_p([drawn(favoured, 200, s)], [drawn(target, 200, s + 1000)], 3) for s in range(20)]
    assert sum(p < 0.05 for p in moved) >= 15


def test_rare_tokens_are_pooled_and_a_position_that_tells_nothing_is_left_out():
    assert position_p([7] * 50, [7] * 50) is None  # one column: nothing to compare
    assert position_p([], [1, 2]) is None
    rare = [1] * 40 + [2] * 40 + [3, 4, 5]  # 3, 4, 5: too rare alone, one pooled column together
    assert 0.05 < position_p(rare, [1] * 41 + [2] * 39 + [6, 7]) <= 1
    assert distribution_match_p([[[7, 7]] * 30], [[[7, 7]] * 30], 2) is None


def test_a_short_output_counts_at_the_positions_it_reached():
    short = [[1]] * 30 + [[2, 5]] * 30
    assert distribution_match_p([short], [[[1, 9]] * 30 + [[2]] * 30], 2) is not None
