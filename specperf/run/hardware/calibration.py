"""How fast this CPU is, in one figure: the seconds of a fixed single-threaded workload.

A CPU's hardware key (`cpu-amd-epyc-2c`) names its model and cores, not its speed: two virtual
machines of one key measured the same build's throughput up to twice apart.  The calibration is
measured once per process, stored with every CPU result and speed baseline, and a speed baseline
judges only a machine whose calibration is within judge.baselines.SPEED_MATCH of its own
(docs/judging.md).  It counts CPU time, not wall time, and takes the best of several short
repeats: with more processes computing than cores (a CI job's other tests, the run's own workers
starting together), wall time doubled where CPU time moved by a few percent.  And it runs on every
core at once, one process each, as the suite's engines run: a core computed about a fifth faster
while the other one idled (a CPU's boost), which would make one machine two speeds.
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import sys
import time

REPEATS = 60
#: The workload's size: about 2 ms a repeat on the CPU tier's 2-core VMs, within one time slice of the scheduler.
STEPS = 30_000


def _workload() -> float:
    """Integer and float arithmetic and list indexing, the interpreter's and the core's speed alike."""
    values = [float(i % 97) for i in range(256)]
    total = 0.0
    for i in range(STEPS):
        total += values[i & 255] * 1.0001 + (i % 7)
    return total


def best_cpu_s() -> float:
    """The best of REPEATS timings of the workload in this process, in seconds of its CPU time."""
    best = float("inf")
    for _ in range(REPEATS):
        start = time.process_time()
        _workload()
        best = min(best, time.process_time() - start)
    return best


@functools.cache
def calibration_s(cores: int | None = None) -> float:
    """The median over `cores` processes (default: every core this process may use), started
    together, of each one's best_cpu_s(), in seconds; measured once per process."""
    count = cores or len(os.sched_getaffinity(0))
    code = f"from {__name__} import best_cpu_s; print(best_cpu_s())"
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(count)]
    found = [float(run.communicate(timeout=60)[0]) for run in runs]
    return round(statistics.median(found), 5)
