"""What the suite runs on, and the hardware key that baselines are filed under.

Only results with the same hardware key are ever compared.  On a machine with an NVIDIA driver
the description comes from NVML (`nvidia-ml-py`, see gpus.py); elsewhere it describes the CPU.
This module names the hardware key of both.
"""

from __future__ import annotations

import os
import platform
import re

from . import gpus


def has_nvidia_gpu() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


def slug(text: str) -> str:
    text = re.sub(r"\((r|tm)\)|\bcpu\b|@.*$", " ", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def describe_cpu() -> dict:
    from .calibration import calibration_s

    name, cores = cpu_model(), usable_cores()
    return {
        "kind": "cpu",
        "name": name,
        "count": cores,
        "memory_gib": _host_memory_gib(),
        "driver": None,
        "hardware_key": f"cpu-{slug(name)}-{cores}c",
        "calibration_s": calibration_s(),
    }


def describe_device() -> dict:
    """The GPUs this process may use (gpus.preflight()), or the CPU when there are none.

    A GPU's key names its model and memory, not how many GPUs the process may use: a scenario runs
    on as many as its TP size, which its hash holds, and the GPUs reserved for a run follow its
    selection (suite/run.own_gpus), so counting them would file one scenario under several keys.
    A MIG slice's key names the slice ("gpu-nvidia-h100-80gb-hbm3-mig-3g-40gb-40g"), never its GPU's."""
    found = gpus.preflight()
    if found is None:
        return describe_cpu()
    return {**found, "hardware_key": f"gpu-{slug(found['name'])}-{found['memory_gib']}g"}


def _host_memory_gib() -> int | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError, AttributeError):
        return None
