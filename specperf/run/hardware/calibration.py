"""How fast this CPU is, in one figure: the seconds of a fixed single-threaded workload.

A CPU's hardware key (`cpu-amd-epyc-2c`) names its model and cores, not its speed: two virtual
machines of one key measured the same build's throughput up to twice apart.  The calibration is
measured once per process (best of several short repeats, so a neighbour's burst costs one repeat),
stored with every CPU result and speed baseline, and a speed baseline judges only a machine whose
calibration is within judge.baselines.SPEED_MATCH of its own (docs/judging.md).
"""

from __future__ import annotations

import functools
import time

REPEATS = 7
#: The workload's size: about 40 ms a repeat on the CPU tier's 2-core VMs.
STEPS = 200_000


def _workload() -> float:
    """Integer and float arithmetic and list indexing, the interpreter's and the core's speed alike."""
    values = [float(i % 97) for i in range(256)]
    total = 0.0
    for i in range(STEPS):
        total += values[i & 255] * 1.0001 + (i % 7)
    return total


@functools.cache
def calibration_s() -> float:
    """The best of REPEATS timings of the workload, in seconds (this process measures it once)."""
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        _workload()
        best = min(best, time.perf_counter() - start)
    return round(best, 5)
