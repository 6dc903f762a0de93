"""What an engine process has used: its peak memory (its tensor-parallel workers' where it has
them) and its CPU time, read in the engine process."""

from __future__ import annotations

import time


def process_peak_mib(_worker=None) -> tuple[float, bool]:
    """This process's peak memory in MiB, and whether it is allocated GPU memory (else resident
    memory on CPU).  Takes the worker that vLLM's collective_rpc passes, unused."""
    import resource

    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20, True
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, False


def peak_memory(llm, tensor_parallel_size: int) -> dict:
    """Peak memory of the engine: read in the engine process, which runs the model at tensor
    parallel size 1; else in each tensor-parallel worker (vLLM's collective_rpc), which holds its
    share of the model while the engine process holds none of it: the largest is the peak, and
    `per_worker_mib` has each worker's (one per GPU), in rank order."""
    if tensor_parallel_size == 1:
        peak, on_gpu = process_peak_mib()
        return {"peak_mib": peak, "source": "torch.cuda.max_memory_allocated" if on_gpu else "engine process max RSS"}
    per_worker = llm.collective_rpc(process_peak_mib)
    what = "torch.cuda.max_memory_allocated" if per_worker[0][1] else "max RSS"
    return {
        "peak_mib": max(peak for peak, _ in per_worker),
        "per_worker_mib": [peak for peak, _ in per_worker],
        "source": f"{what} in each of {len(per_worker)} tensor-parallel workers, the largest",
    }


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
