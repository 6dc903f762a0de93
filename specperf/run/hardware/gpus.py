"""The GPUs this process may use: their description, a test's GPU requirements, and which GPUs
each pytest-xdist worker gets.

`preflight` describes the GPUs before a run, through NVML (see nvml.py); `unmet_requirement`
checks a test's requires_gpu mark against that description; `process_gpus` gives each xdist
worker its own GPUs.  Without pynvml, a driver or GPUs `preflight()` returns None.  Watching the
GPUs during a measurement is telemetry.py's job.
"""

from __future__ import annotations

import os
import re

# Oldest/smallest to newest/largest serving GPU; "H100" as a minimum means H100 or a later entry.
from ...profiles.registry import GPU_CLASSES
from .nvml import (
    MIB,
    Device,
    close_nvml,
    compute_processes,
    constant,
    cuda_devices,
    open_nvml,
    query,
    readings,
    text,
    watts,
)
from .ownership import Ownership

# ------------------------------------------------------------------ preflight


def preflight() -> dict | None:
    """Description of the GPUs (or the MIG slice) this process may use, or None without pynvml, a
    driver or GPUs.  `foreign_processes` are those already computing on them (ownership.py).

    The hardware key is device.describe_device()'s to add."""
    nvml = open_nvml()
    if nvml is None:
        return None
    try:
        return _describe(nvml)
    except nvml.NVMLError:
        return None
    finally:
        close_nvml(nvml)


def _describe(nvml) -> dict | None:
    devices = cuda_devices(nvml)
    if not devices:
        return None
    gpus = [_gpu_facts(nvml, device) for device in devices]
    first = gpus[0]
    cuda = query(nvml, "nvmlSystemGetCudaDriverVersion")
    ownership = Ownership()
    foreign = [
        process
        for device in devices
        for process in ownership.foreign_on(
            device.index, device.minor(nvml), compute_processes(nvml, device.handle)
        ).foreign
    ]
    return {
        "kind": "gpu",
        "name": first["name"],
        "count": len(gpus),
        "memory_gib": round(first["memory_total_mib"] / 1024),
        "driver": text(nvml.nvmlSystemGetDriverVersion()),
        "cuda_driver_version": None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",
        "gpus": gpus,
        "foreign_processes": foreign,
    }


def _gpu_facts(nvml, device: Device) -> dict:
    """One device's facts: its name, UUID and memory are the slice's for a MIG slice (with a "mig"
    entry naming its GPU); the rest is always the GPU's."""
    gpu, enabled = device.gpu, constant(nvml, "NVML_FEATURE_ENABLED", 1)
    facts = {
        "index": device.index,
        "uuid": text(nvml.nvmlDeviceGetUUID(device.handle)),
        "name": text(nvml.nvmlDeviceGetName(device.handle)),
        "memory_total_mib": nvml.nvmlDeviceGetMemoryInfo(device.handle).total // MIB,
        "ecc_mode": _enabled(query(nvml, "nvmlDeviceGetEccMode", gpu), enabled),
        "ecc_uncorrected_errors": query(
            nvml,
            "nvmlDeviceGetTotalEccErrors",
            gpu,
            constant(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
            constant(nvml, "NVML_VOLATILE_ECC", 0),
        ),
        "persistence_mode": _enabled(query(nvml, "nvmlDeviceGetPersistenceMode", gpu), enabled),
        "mig_mode": _enabled(query(nvml, "nvmlDeviceGetMigMode", gpu), constant(nvml, "NVML_DEVICE_MIG_ENABLE", 1)),
        "max_sm_clock_mhz": query(nvml, "nvmlDeviceGetMaxClockInfo", gpu, constant(nvml, "NVML_CLOCK_SM", 1)),
        "power_limit_w": watts(query(nvml, "nvmlDeviceGetEnforcedPowerLimit", gpu)),
        **readings(nvml, gpu),
    }
    if device.mig_index is not None:
        if "MIG" not in facts["name"]:  # the hardware key must tell a slice from its whole GPU
            facts["name"] += " MIG"
        facts["mig"] = {
            "index": device.mig_index,
            "gpu_instance_id": query(nvml, "nvmlDeviceGetGpuInstanceId", device.handle),
            "compute_instance_id": query(nvml, "nvmlDeviceGetComputeInstanceId", device.handle),
            "gpu_uuid": text(nvml.nvmlDeviceGetUUID(gpu)),
            "gpu_name": text(nvml.nvmlDeviceGetName(gpu)),
            "gpu_memory_total_mib": nvml.nvmlDeviceGetMemoryInfo(gpu).total // MIB,
        }
    return facts


def _enabled(state, on: int) -> bool | None:
    """NVML returns [current, pending] for ECC and MIG modes, a plain value for persistence."""
    if state is None:
        return None
    current = state[0] if isinstance(state, (list, tuple)) else state
    return current == on


# ------------------------------------------------------------------ requirements


def _class_rank(name: str) -> int | None:
    """Rank in GPU_CLASSES of the newest class named as a word in a GPU name, e.g. "NVIDIA H100 80GB HBM3"."""
    ranks = [
        rank
        for rank, cls in enumerate(GPU_CLASSES)
        if re.search(rf"(?<![a-z0-9]){cls.lower()}(?![a-z0-9])", name.lower())
    ]
    return max(ranks) if ranks else None


def unmet_requirement(
    device: dict, min_class: str | None = None, count: int = 1, min_memory_gib: int | None = None
) -> str | None:
    """Why `device` (device.describe_device()) cannot run a test, as a one-line skip reason; None if it can."""
    wanted = None
    if min_class is not None:
        wanted = next((r for r, cls in enumerate(GPU_CLASSES) if cls.lower() == min_class.lower()), None)
        if wanted is None:
            raise ValueError(f"unknown GPU class {min_class!r} (known, oldest first: {', '.join(GPU_CLASSES)})")
    name = device.get("name", "?")
    if device.get("kind") != "gpu":
        return f"needs an NVIDIA GPU (this machine: {name})"
    if wanted is not None:
        rank = _class_rank(name)
        if rank is None or rank < wanted:
            return f"needs GPU class {GPU_CLASSES[wanted]} or newer (this machine: {name})"
    if device.get("count", 0) < count:
        return f"needs {count} GPUs (this machine: {device.get('count', 0)}x {name})"
    if min_memory_gib is not None and (device.get("memory_gib") or 0) < min_memory_gib:
        return f"needs {min_memory_gib} GiB per GPU (this machine: {device.get('memory_gib')} GiB, {name})"
    return None


# ------------------------------------------------------------------ GPUs per pytest-xdist worker
#
# The rule: each xdist worker of a run owns a block of GPUs as large as the largest TP size among
# the selected scenarios; worker gwI gets the I-th block of the visible GPUs.  Blocks never overlap,
# so workers never measure on the same GPU, and a run needs workers x max TP GPUs.


def allocate_gpus(worker_index: int, worker_count: int, gpu_ids: list[str], tp_size: int) -> list[str]:
    """The GPUs (entries of `gpu_ids`) that xdist worker `worker_index` (0-based) owns."""
    if tp_size < 1 or worker_count < 1 or not 0 <= worker_index < worker_count:
        raise ValueError(
            f"worker {worker_index} of {worker_count} with TP {tp_size}: need 0 <= worker < workers and TP >= 1"
        )
    needed = worker_count * tp_size
    if needed > len(gpu_ids):
        raise ValueError(
            f"{worker_count} workers x TP {tp_size} need {needed} GPUs, "
            f"but only {len(gpu_ids)} are visible ({','.join(gpu_ids) or 'none'}); "
            "run fewer workers (-n) or select fewer TP scenarios"
        )
    return list(gpu_ids[worker_index * tp_size : (worker_index + 1) * tp_size])


def process_gpus(visible: list[str], max_tp: int, worker_id: str | None = None, worker_count: int = 1) -> str:
    """CUDA_VISIBLE_DEVICES for a process that runs engines: xdist worker "gwI" gets its own block of
    max_tp GPUs; a run without xdist keeps the first max_tp (all there are, if fewer: scenarios
    with a larger TP are then skipped by their requires_gpu mark)."""
    if worker_id is None:
        return ",".join(visible[: max(1, min(max_tp, len(visible)))])
    match = re.fullmatch(r"gw(\d+)", worker_id)
    if match is None:
        raise ValueError(f"not a pytest-xdist worker id: {worker_id!r} (expected gw0, gw1, ...)")
    return ",".join(allocate_gpus(int(match.group(1)), worker_count, visible, max_tp))


def visible_gpu_ids() -> list[str]:
    """CUDA_VISIBLE_DEVICES as a list, or every GPU's index when it is unset ([] without NVML)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [e.strip() for e in env.split(",") if e.strip()]
    nvml = open_nvml()
    if nvml is None:
        return []
    try:
        return [str(i) for i in range(nvml.nvmlDeviceGetCount())]
    except nvml.NVMLError:
        return []
    finally:
        close_nvml(nvml)
