"""What the suite runs on, and the hardware key that baselines are filed under.

Only results with the same hardware key are ever compared.  On a machine with an NVIDIA driver
the description comes from NVML (`nvidia-ml-py`); elsewhere it describes the CPU.
"""

from __future__ import annotations

import os
import platform
import re


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
    name, cores = cpu_model(), usable_cores()
    return {
        "kind": "cpu", "name": name, "count": cores, "memory_gib": _host_memory_gib(),
        "driver": None, "hardware_key": f"cpu-{slug(name)}-{cores}c",
    }


def describe_gpus() -> dict | None:
    """NVML description of the visible GPUs, or None without a working driver."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            return None
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else name
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        memory_gib = round(pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30)
    finally:
        pynvml.nvmlShutdown()
    return {
        "kind": "gpu", "name": name, "count": count, "memory_gib": memory_gib, "driver": driver,
        "hardware_key": f"gpu-{slug(name)}-{memory_gib}g-x{count}",
    }


def describe_device() -> dict:
    device = describe_gpus() if has_nvidia_gpu() else None
    return device or describe_cpu()


def _host_memory_gib() -> int | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError, AttributeError):
        return None
