"""What an engine process has used: its peak memory and its CPU time (read in the engine process)."""

from __future__ import annotations

import time


def peak_memory() -> dict:
    """Peak memory of this engine process: allocated GPU memory, or resident memory on CPU."""
    import resource

    import torch

    if torch.cuda.is_available():
        return {"peak_mib": torch.cuda.max_memory_allocated() / 2**20, "source": "torch.cuda.max_memory_allocated"}
    return {"peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "source": "engine process max RSS"}


def process_tree_cpu_s() -> float:
    """CPU seconds (user + system) this engine process and its children have used so far.  Time the
    hypervisor gave to other tenants is not in it, as it is in wall time.  This process's own
    figure has nanosecond resolution (all its threads); its children's (tensor-parallel workers),
    the kernel's clock ticks."""
    import psutil

    total = time.process_time()
    for process in psutil.Process().children(recursive=True):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total
