"""How fast this CPU is, in one figure: the seconds of a fixed single-threaded workload.

A CPU's hardware key (`cpu-amd-epyc-2c`) names its model and cores, not its speed: two virtual
machines of one key measured the same build's throughput up to twice apart.  The calibration is
measured once per process, stored with every CPU result and speed baseline, and a speed baseline
judges only a machine whose calibration is within judge.baselines.SPEED_MATCH of its own
(docs/judging.md).  It counts the process's CPU time, not wall time, and takes the best of several
short repeats: with more processes computing than cores (a CI job's other tests, the run's own
workers starting together), wall time doubled where CPU time moved by a few percent.
"""

from __future__ import annotations

import functools
import time

REPEATS = 15
#: The workload's size: about 13 ms a repeat on the CPU tier's 2-core VMs.
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
    """The best of REPEATS timings of the workload, in seconds of this process's CPU time (this
    process measures it once)."""
    best = float("inf")
    for _ in range(REPEATS):
        start = time.process_time()
        _workload()
        best = min(best, time.process_time() - start)
    return round(best, 5)
