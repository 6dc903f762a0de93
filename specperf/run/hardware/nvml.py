"""NVML plumbing (package `nvidia-ml-py`, module `pynvml`) shared by gpus.py and telemetry.py.

Opening NVML, optional queries that give None where a GPU or driver lacks them, the readings that
change while a GPU works, and which devices CUDA_VISIBLE_DEVICES lets this process use (whole GPUs
or MIG slices).  pynvml is imported inside `open_nvml`, so this module imports fine where it is
not installed.  Which processes on a GPU are ours is ownership.py's job.

GPU indices here are NVML's (PCI bus order).  CUDA numbers GPUs fastest-first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID; on a box of identical GPUs the two orders agree.

A recent pynvml names calls an older driver lacks: such a call raises NVMLError_FunctionNotFound
(or, for unversioned process listings, NVMLLibraryMismatchError), which `query` takes as "not
supported" and `first_answer` as the cue to try the older call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

MIB = 2**20

# NVML's clocks-event (formerly "throttle") reasons: (our name, NVML constant suffix, bit value).
# The constants were renamed nvmlClocksThrottleReason* -> nvmlClocksEventReason*; the bits did not
# change.  pynvml names the last two under the old prefix only.
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
    ("board_limit", "BoardLimit", 0x200),
    ("reliability", "Reliability", 0x400),
)

# NVML's violation counters (nvmlDeviceGetViolationStatus): (our name, NVML constant, its value).
# Each counts, in ns since the driver loaded, how long the policy held the clocks down.
VIOLATION_POLICIES = (
    ("power", "NVML_PERF_POLICY_POWER", 0),
    ("thermal", "NVML_PERF_POLICY_THERMAL", 1),
    ("sync_boost", "NVML_PERF_POLICY_SYNC_BOOST", 2),
    ("board_limit", "NVML_PERF_POLICY_BOARD_LIMIT", 3),
    ("low_utilization", "NVML_PERF_POLICY_LOW_UTILIZATION", 4),
    ("reliability", "NVML_PERF_POLICY_RELIABILITY", 5),
    ("total_app_clocks", "NVML_PERF_POLICY_TOTAL_APP_CLOCKS", 10),
    ("total_base_clocks", "NVML_PERF_POLICY_TOTAL_BASE_CLOCKS", 11),
)

# Newest first: the versioned listings, then the unversioned one of an older pynvml.
PROCESS_LISTINGS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)
THROTTLE_MASKS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


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
    """One optional NVML query; None when the GPU, the driver or this pynvml does not support it."""
    lacking = (nvml.NVMLError, AttributeError, getattr(nvml, "NVMLLibraryMismatchError", AttributeError))
    try:
        return getattr(nvml, function)(*args)
    except lacking:
        return None


def first_answer(nvml, functions: tuple[str, ...], *args):
    """The answer of the first of `functions` that gives one (a newer call first, an older driver's next)."""
    for function in functions:
        answer = query(nvml, function, *args)
        if answer is not None:
            return answer
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


def readings(nvml, handle) -> dict:
    """What changes while a GPU works: clocks, temperature, power and throttle reasons (None: unsupported)."""
    sm, mem = constant(nvml, "NVML_CLOCK_SM", 1), constant(nvml, "NVML_CLOCK_MEM", 2)
    return {
        "sm_clock_mhz": query(nvml, "nvmlDeviceGetClockInfo", handle, sm),
        "mem_clock_mhz": query(nvml, "nvmlDeviceGetClockInfo", handle, mem),
        "temperature_c": query(nvml, "nvmlDeviceGetTemperature", handle, constant(nvml, "NVML_TEMPERATURE_GPU", 0)),
        "power_w": watts(query(nvml, "nvmlDeviceGetPowerUsage", handle)),
        "throttle_reasons": decode_throttle_reasons(first_answer(nvml, THROTTLE_MASKS, handle), nvml),
    }


def violation_times_ns(nvml, handle) -> dict[str, int]:
    """Each violation counter this GPU keeps: ns the policy has held its clocks down since the driver loaded."""
    counters = {}
    for name, constant_name, value in VIOLATION_POLICIES:
        status = query(nvml, "nvmlDeviceGetViolationStatus", handle, constant(nvml, constant_name, value))
        if status is not None:
            counters[name] = status.violationTime
    return counters


def compute_processes(nvml, handle) -> list:
    """The processes computing on a GPU or MIG device ([] where NVML does not say)."""
    return first_answer(nvml, PROCESS_LISTINGS, handle) or []


# ------------------------------------------------------------------ which devices are ours


@dataclass(frozen=True)
class MigIds:
    """What names a MIG device in CUDA_VISIBLE_DEVICES: its UUID, or (older drivers) its GPU
    instance and compute instance on its GPU."""

    index: int  # the MIG device's index on its GPU
    uuid: str
    gpu_instance: int | None = None
    compute_instance: int | None = None


@dataclass(frozen=True)
class GpuIds:
    uuid: str
    migs: tuple[MigIds, ...] = ()


def visible_devices(gpus: list[GpuIds], cuda_visible_devices: str | None) -> list[tuple[int, int | None]]:
    """(NVML index, MIG index or None for the whole GPU) of each device CUDA_VISIBLE_DEVICES lets this
    process use (NVML ignores the variable).

    Entries are GPU indices, GPU UUIDs (a unique prefix such as "GPU-8f3a" is enough), MIG device
    UUIDs ("MIG-<uuid>", a unique prefix too) or the older "MIG-GPU-<gpu uuid>/<gpu instance>/<compute
    instance>".  Like CUDA, the list ends at the first entry that names no device; an empty variable
    hides every GPU.  A MIG entry that names no MIG device NVML lists (a typo, or a pynvml too old to
    list them) is a ValueError: the run would otherwise describe, and file its results under, the CPU."""
    if cuda_visible_devices is None:
        return [(i, None) for i in range(len(gpus))]
    chosen: list[tuple[int, int | None]] = []
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        device = _named_device(gpus, entry)
        if device is None and entry.startswith("MIG-"):
            listed = ", ".join(m.uuid for g in gpus for m in g.migs) or "none"
            raise ValueError(f"CUDA_VISIBLE_DEVICES: {entry!r} names no MIG device NVML lists (MIG devices: {listed})")
        if device is None:
            break
        if device not in chosen:
            chosen.append(device)
    return chosen


def _named_device(gpus: list[GpuIds], entry: str) -> tuple[int, int | None] | None:
    if entry.isdigit():
        return (int(entry), None) if int(entry) < len(gpus) else None
    if entry.startswith("MIG-GPU-"):
        gpu_uuid, *instances = entry.removeprefix("MIG-").split("/")
        if len(instances) != 2 or not all(i.isdigit() for i in instances):
            return None
        wanted = (int(instances[0]), int(instances[1]))
        matches = [
            (i, m.index)
            for i, g in enumerate(gpus)
            if g.uuid == gpu_uuid
            for m in g.migs
            if (m.gpu_instance, m.compute_instance) == wanted
        ]
    elif entry.startswith("MIG-"):
        matches = [(i, m.index) for i, g in enumerate(gpus) for m in g.migs if m.uuid.startswith(entry)]
    elif entry.startswith("GPU-"):
        matches = [(i, None) for i, g in enumerate(gpus) if g.uuid.startswith(entry)]
    else:
        matches = []
    return matches[0] if len(matches) == 1 else None


@dataclass(frozen=True)
class Device:
    """A device CUDA may use, as NVML sees it: a whole GPU, or a MIG slice of one."""

    index: int  # NVML index of the GPU (of the slice's GPU)
    gpu: Any  # the GPU's handle: clocks, temperature, power, throttle reasons, violation counters
    handle: Any  # the device's own handle: its name, memory and processes (the MIG device's, for a slice)
    mig_index: int | None = None

    def minor(self, nvml) -> int | None:
        """The N of the GPU's /dev/nvidiaN (a slice's processes hold its GPU's)."""
        return query(nvml, "nvmlDeviceGetMinorNumber", self.gpu)


def cuda_devices(nvml) -> list[Device]:
    """The devices this process's CUDA_VISIBLE_DEVICES names, in its order."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    wants_mig = env is not None and "MIG-" in env
    ids = [GpuIds(text(nvml.nvmlDeviceGetUUID(h)), _mig_ids(nvml, h) if wants_mig else ()) for h in handles]
    return [
        Device(i, handles[i], handles[i])
        if mig is None
        else Device(i, handles[i], nvml.nvmlDeviceGetMigDeviceHandleByIndex(handles[i], mig), mig)
        for i, mig in visible_devices(ids, env)
    ]


def devices_at(nvml, indices: list[int]) -> list[Device]:
    """The devices at these NVML indices: the MIG slice CUDA_VISIBLE_DEVICES names on a GPU, else the GPU."""
    named = {device.index: device for device in cuda_devices(nvml)}
    wholes = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in indices if i not in named}
    return [named.get(i) or Device(i, wholes[i], wholes[i]) for i in indices]


def visible_nvml_indices(nvml) -> list[int]:
    """NVML indices of the GPUs of cuda_devices() (a slice's GPU for a MIG slice)."""
    return [device.index for device in cuda_devices(nvml)]


def _mig_ids(nvml, gpu) -> tuple[MigIds, ...]:
    """The MIG devices of a GPU in MIG mode (none where MIG is off or the driver cannot say)."""
    mode = query(nvml, "nvmlDeviceGetMigMode", gpu)
    if not mode or mode[0] != constant(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        return ()
    found = []
    for index in range(query(nvml, "nvmlDeviceGetMaxMigDeviceCount", gpu) or 0):
        mig = query(nvml, "nvmlDeviceGetMigDeviceHandleByIndex", gpu, index)
        if mig is not None:  # NVML_ERROR_NOT_FOUND: no MIG device at this index
            found.append(
                MigIds(
                    index,
                    text(nvml.nvmlDeviceGetUUID(mig)),
                    query(nvml, "nvmlDeviceGetGpuInstanceId", mig),
                    query(nvml, "nvmlDeviceGetComputeInstanceId", mig),
                )
            )
    return tuple(found)
