"""vLLM's dynamic SD schedule: `speculative_config.num_speculative_tokens_per_batch_size`.

A schedule is a list of inclusive batch-size ranges with the k vLLM's scheduler uses while the
running batch is in that range: ``[[1, 2, 5], [3, 8, 3]]``.  vLLM itself carries the previous k
over a gap and the last k past the end; the suite asks more of a schedule it runs or prints
(contiguous from batch 1, no overlaps, no k above the method's own `num_speculative_tokens`, which
vLLM would silently cap), so that what a profile says is what the engine does.

`from_points` turns a k per measured batch size into a schedule by one stated rule: a batch size
between two measured ones takes the k of the nearer one on a log2 scale (the study's axis: SD's
speedup changes about evenly per doubling of the batch), the smaller size on a tie.
"""

from __future__ import annotations

import math
from typing import Any

FIELD = "num_speculative_tokens_per_batch_size"

Schedule = list[tuple[int, int, int]]  # (first batch size, last batch size, k), ascending


def check_schedule(value: Any, max_k: int) -> Schedule:
    """The schedule `value` as (first, last, k) tuples; ValueError with one line saying what is wrong."""
    if not isinstance(value, list) or not value:
        raise ValueError("must be a non-empty list of [first batch size, last batch size, k] ranges")
    ranges = []
    for i, entry in enumerate(value):
        if not (isinstance(entry, list) and len(entry) == 3 and all(_is_int(x) for x in entry)):
            raise ValueError(f"range {i + 1}: must be [first batch size, last batch size, k], got {entry!r}")
        first, last, k = entry
        if not 1 <= first <= last:
            raise ValueError(f"range {i + 1}: batch sizes must satisfy 1 <= first <= last, got {entry!r}")
        if not 0 <= k <= max_k:
            raise ValueError(f"range {i + 1}: k {k} is outside 0..{max_k} (the method's num_speculative_tokens)")
        ranges.append((first, last, k))
    expected = 1
    for first, last, _ in ranges:
        if first != expected:
            kind = "a gap" if first > expected else "an overlap"
            raise ValueError(f"{kind} at batch size {min(first, expected)}: ranges must run on from 1 in order")
        expected = last + 1
    return ranges


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def k_at(schedule: Schedule, batch_size: int) -> int:
    """The k vLLM runs at `batch_size` (past the last range: the last range's k, as vLLM does)."""
    for first, last, k in schedule:
        if first <= batch_size <= last:
            return k
    return schedule[-1][2]


def switch_points(schedule: Schedule) -> list[int]:
    """The first batch size of every range after the first: where the schedule changes k."""
    return [first for first, _, _ in schedule[1:]]


def from_points(best: dict[int, int]) -> Schedule:
    """The schedule covering batch 1 to the largest measured size from `best` (batch size -> k),
    by the module's rule; neighbouring ranges of one k are merged."""
    if not best:
        raise ValueError("no measured batch size to build a schedule from")
    sizes = sorted(best)
    ranges: Schedule = []
    for i, size in enumerate(sizes):
        first = 1 if i == 0 else ranges[-1][1] + 1
        last = sizes[-1] if i == len(sizes) - 1 else _last_nearer(size, sizes[i + 1])
        if last < first:
            continue
        if ranges and ranges[-1][2] == best[size]:
            ranges[-1] = (ranges[-1][0], last, best[size])
        else:
            ranges.append((first, last, best[size]))
    return ranges


def _last_nearer(low: int, high: int) -> int:
    """The largest batch size no farther from `low` than from `high` on a log2 scale (ties to `low`)."""
    return max(low, math.floor(math.sqrt(low * high)))


def as_config(schedule: Schedule) -> list[list[int]]:
    """The schedule as vLLM's JSON speculative config takes it."""
    return [list(entry) for entry in schedule]
