"""NVML plumbing (package `nvidia-ml-py`, module `pynvml`) shared by gpus.py and telemetry.py.

Opening NVML, optional queries that give None where a GPU or driver lacks them, the readings that
change while a GPU works, and which GPUs and processes belong to this process.  pynvml is imported
inside `open_nvml`, so this module imports fine where it is not installed.

GPU indices here are NVML's (PCI bus order).  CUDA numbers GPUs fastest-first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID; on a box of identical GPUs the two orders agree.
"""

from __future__ import annotations

import os

import psutil

MIB = 2**20

# NVML's clocks-event (formerly "throttle") reasons: (our name, NVML constant suffix, bit value).
# The constants were renamed nvmlClocksThrottleReason* -> nvmlClocksEventReason*; the bits did not change.
REASONS = (
    ("gpu_idle", "GpuIdle", 0x1),
    ("applications_clocks", "ApplicationsClocksSetting", 0x2),
    ("sw_power_cap", "SwPowerCap", 0x4),
    ("hw_slowdown", "HwSlowdown", 0x8),
    ("sync_boost", "SyncBoost", 0x10),
    ("sw_thermal", "SwThermalSlowdown", 0x20),
    ("hw_thermal", "HwThermalSlowdown", 0x40),
    ("hw_power_brake", "HwPowerBrakeSlowdown", 0x80),
    ("display_clocks", "DisplayClockSetting", 0x100),
)


def open_nvml():
    """The initialised pynvml module, or None without the package, a driver or a GPU.

    Every module it returns must be closed with `close_nvml(nvml)`."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return None
    return pynvml


def close_nvml(nvml) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass


def query(nvml, function: str, *args):
    """One optional NVML query; None when the GPU or driver does not support it."""
    try:
        return getattr(nvml, function)(*args)
    except (nvml.NVMLError, AttributeError):
        return None


def text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def constant(nvml, name: str, documented: int) -> int:
    """An NVML constant, or its documented value where this pynvml lacks the name."""
    return getattr(nvml, name, documented)


def watts(milliwatts) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000, 1)


def decode_throttle_reasons(mask: int | None, nvml=None) -> list[str]:
    """Names of the clocks-event reasons set in NVML's bitmask, in bit order."""
    if not mask:
        return []
    names = []
    for name, suffix, bit in REASONS:
        bit = getattr(nvml, f"nvmlClocksEventReason{suffix}", getattr(nvml, f"nvmlClocksThrottleReason{suffix}", bit))
        if mask & bit:
            names.append(name)
    return names


def _throttle_mask(nvml, handle) -> int | None:
    for function in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        if hasattr(nvml, function):
            return query(nvml, function, handle)
    return None


def readings(nvml, handle) -> dict:
    """What changes while a GPU works: clocks, temperature, power and throttle reasons (None: unsupported)."""
    sm, mem = constant(nvml, "NVML_CLOCK_SM", 1), constant(nvml, "NVML_CLOCK_MEM", 2)
    return {
        "sm_clock_mhz": query(nvml, "nvmlDeviceGetClockInfo", handle, sm),
        "mem_clock_mhz": query(nvml, "nvmlDeviceGetClockInfo", handle, mem),
        "temperature_c": query(nvml, "nvmlDeviceGetTemperature", handle, constant(nvml, "NVML_TEMPERATURE_GPU", 0)),
        "power_w": watts(query(nvml, "nvmlDeviceGetPowerUsage", handle)),
        "throttle_reasons": decode_throttle_reasons(_throttle_mask(nvml, handle), nvml),
    }


# ------------------------------------------------------------------ which GPUs and processes are ours


def visible_indices(uuids: list[str], cuda_visible_devices: str | None) -> list[int]:
    """NVML indices of the GPUs CUDA_VISIBLE_DEVICES lets this process use (NVML ignores the variable).

    Entries are indices or GPU UUIDs (a unique prefix such as "GPU-8f3a" is enough).  Like CUDA,
    the list ends at the first entry that names no GPU; an empty variable hides every GPU."""
    if cuda_visible_devices is None:
        return list(range(len(uuids)))
    chosen: list[int] = []
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        if entry.isdigit() and int(entry) < len(uuids):
            index = int(entry)
        else:
            matches = [i for i, u in enumerate(uuids) if entry.startswith("GPU-") and u.startswith(entry)]
            if len(matches) != 1:
                break
            index = matches[0]
        if index not in chosen:
            chosen.append(index)
    return chosen


def visible_nvml_indices(nvml) -> list[int]:
    """visible_indices() of this machine's GPUs under this process's CUDA_VISIBLE_DEVICES."""
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    return visible_indices([text(nvml.nvmlDeviceGetUUID(h)) for h in handles], os.environ.get("CUDA_VISIBLE_DEVICES"))


def own_pids() -> set[int]:
    """This process and all its descendants (vLLM's engine core and TP workers are children)."""
    me = psutil.Process()
    try:
        return {me.pid} | {child.pid for child in me.children(recursive=True)}
    except psutil.Error:
        return {me.pid}


class Ownership:
    """Decides whether a pid is ours, re-reading the process tree only when an unknown pid shows up."""

    def __init__(self):
        self.pids = own_pids()
        self.foreign: set[int] = set()

    def is_foreign(self, pid: int) -> bool:
        if pid not in self.pids and pid not in self.foreign:
            self.pids = own_pids()
            if pid not in self.pids:
                self.foreign.add(pid)
        return pid not in self.pids


def compute_processes(nvml, handle) -> list:
    """The processes computing on a GPU ([] where NVML does not say)."""
    return query(nvml, "nvmlDeviceGetComputeRunningProcesses", handle) or []
