"""GPU facts and hygiene through NVML (package `nvidia-ml-py`, module `pynvml`).

A measurement on a GPU is only worth comparing when nothing else disturbed it: no thermal or
power-brake throttling, and no other process computing on the same GPU.  This module describes
the GPUs before a run (`preflight`), samples them while a measurement runs (`TelemetrySampler`),
turns what it saw into reasons a measurement is invalid (`telemetry_problems`), checks a test's
GPU requirements (`unmet_requirement`) and gives each pytest-xdist worker its own GPUs
(`process_gpus`).

Everything degrades to nothing without `pynvml`, an NVIDIA driver or GPUs: `preflight()` returns
None and a sampler's `summary()` is None.  pynvml is imported inside the functions, so this module
imports fine where it is not installed.

GPU indices here are NVML's (PCI bus order).  CUDA numbers GPUs fastest-first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID; on a box of identical GPUs the two orders agree.
"""

from __future__ import annotations

import os
import re
import statistics
import threading

from .device import slug

# NVML's clocks-event (formerly "throttle") reasons: (our name, NVML constant suffix, bit value).
# The constants were renamed nvmlClocksThrottleReason* -> nvmlClocksEventReason*; the bits did not change.
_REASONS = (
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
# Reasons that make a measurement invalid.  sw_power_cap is left out: a busy GPU at its power
# limit is the normal state of a throughput benchmark.
BAD_THROTTLE_REASONS = frozenset({"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"})

# Oldest/smallest to newest/largest serving GPU; "H100" as a minimum means H100 or a later entry.
from ..profiles.registry import GPU_CLASSES

_MIB = 2**20


# ------------------------------------------------------------------ NVML access

def _nvml():
    """The initialised pynvml module, or None without the package, a driver or a GPU.

    Every successful call must be paired with `_shutdown(nvml)`."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return None
    return pynvml


def _shutdown(nvml) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass


def _query(nvml, function: str, *args):
    """One optional NVML query; None when the GPU or driver does not support it."""
    try:
        return getattr(nvml, function)(*args)
    except (nvml.NVMLError, AttributeError):
        return None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _const(nvml, name: str, documented: int) -> int:
    return getattr(nvml, name, documented)


def _enabled(state, on: int = 1) -> bool | None:
    """NVML returns [current, pending] for ECC and MIG modes, a plain value for persistence."""
    if state is None:
        return None
    current = state[0] if isinstance(state, (list, tuple)) else state
    return current == on


def _watts(milliwatts) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000, 1)


def decode_throttle_reasons(mask: int | None, nvml=None) -> list[str]:
    """Names of the clocks-event reasons set in NVML's bitmask, in bit order."""
    if not mask:
        return []
    names = []
    for name, suffix, bit in _REASONS:
        bit = getattr(nvml, f"nvmlClocksEventReason{suffix}",
                      getattr(nvml, f"nvmlClocksThrottleReason{suffix}", bit))
        if mask & bit:
            names.append(name)
    return names


def _throttle_mask(nvml, handle) -> int | None:
    for function in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        if hasattr(nvml, function):
            return _query(nvml, function, handle)
    return None


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


def own_pids() -> set[int]:
    """This process and all its descendants (vLLM's engine core and TP workers are children)."""
    me = os.getpid()
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {me}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()   # the name may hold spaces and ")"
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    family, todo = {me}, [me]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in family:
                family.add(child)
                todo.append(child)
    return family


class _Ownership:
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


def _compute_processes(nvml, handle) -> list:
    return _query(nvml, "nvmlDeviceGetComputeRunningProcesses", handle) or []


# ------------------------------------------------------------------ preflight

def preflight() -> dict | None:
    """Description of the GPUs this process may use, or None without pynvml, a driver or GPUs."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        return _describe(nvml)
    except nvml.NVMLError:
        return None
    finally:
        _shutdown(nvml)


def _describe(nvml) -> dict | None:
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    uuids = [_text(nvml.nvmlDeviceGetUUID(h)) for h in handles]
    indices = visible_indices(uuids, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if not indices:
        return None
    gpus = [_gpu_facts(nvml, i, handles[i], uuids[i]) for i in indices]
    first = gpus[0]
    memory_gib = round(first["memory_total_mib"] / 1024)
    cuda = _query(nvml, "nvmlSystemGetCudaDriverVersion")
    ownership = _Ownership()
    foreign = [
        {"gpu_index": i, "pid": p.pid,
         "used_memory_mib": None if p.usedGpuMemory is None else p.usedGpuMemory // _MIB}
        for i in indices for p in _compute_processes(nvml, handles[i]) if ownership.is_foreign(p.pid)
    ]
    return {
        "kind": "gpu", "name": first["name"], "count": len(gpus), "memory_gib": memory_gib,
        "driver": _text(nvml.nvmlSystemGetDriverVersion()),
        "cuda_driver_version": None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",
        "hardware_key": f"gpu-{slug(first['name'])}-{memory_gib}g-x{len(gpus)}",
        "gpus": gpus,
        "foreign_processes": foreign,
    }


def _gpu_facts(nvml, index: int, handle, uuid: str) -> dict:
    sm, mem = _const(nvml, "NVML_CLOCK_SM", 1), _const(nvml, "NVML_CLOCK_MEM", 2)
    return {
        "index": index,
        "uuid": uuid,
        "name": _text(nvml.nvmlDeviceGetName(handle)),
        "memory_total_mib": nvml.nvmlDeviceGetMemoryInfo(handle).total // _MIB,
        "ecc_mode": _enabled(_query(nvml, "nvmlDeviceGetEccMode", handle),
                             _const(nvml, "NVML_FEATURE_ENABLED", 1)),
        "ecc_uncorrected_errors": _query(nvml, "nvmlDeviceGetTotalEccErrors", handle,
                                         _const(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                                         _const(nvml, "NVML_VOLATILE_ECC", 0)),
        "persistence_mode": _enabled(_query(nvml, "nvmlDeviceGetPersistenceMode", handle),
                                     _const(nvml, "NVML_FEATURE_ENABLED", 1)),
        "mig_mode": _enabled(_query(nvml, "nvmlDeviceGetMigMode", handle),
                             _const(nvml, "NVML_DEVICE_MIG_ENABLE", 1)),
        "sm_clock_mhz": _query(nvml, "nvmlDeviceGetClockInfo", handle, sm),
        "max_sm_clock_mhz": _query(nvml, "nvmlDeviceGetMaxClockInfo", handle, sm),
        "mem_clock_mhz": _query(nvml, "nvmlDeviceGetClockInfo", handle, mem),
        "temperature_c": _query(nvml, "nvmlDeviceGetTemperature", handle,
                                _const(nvml, "NVML_TEMPERATURE_GPU", 0)),
        "power_w": _watts(_query(nvml, "nvmlDeviceGetPowerUsage", handle)),
        "power_limit_w": _watts(_query(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle)),
        "throttle_reasons": decode_throttle_reasons(_throttle_mask(nvml, handle), nvml),
    }


# ------------------------------------------------------------------ sampling during a measurement

_SAMPLED = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w")


class TelemetrySampler:
    """Polls NVML in a background thread while a measurement runs.

        with TelemetrySampler([0]) as sampler:
            measure()
        record["telemetry"] = sampler.summary()

    `indices` are NVML indices (preflight's "index"); None means the GPUs CUDA_VISIBLE_DEVICES
    allows.  One sample is taken on entry, one every `interval_s`, and one on exit, so even a
    short measurement has two.  A failing sample is dropped; nothing is ever raised to the caller.
    """

    def __init__(self, indices: list[int] | None = None, interval_s: float = 0.1):
        self.indices = indices
        self.interval_s = interval_s
        self._nvml = None
        self._handles: list = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._samples = 0
        self._values: dict[str, list[float]] = {name: [] for name in _SAMPLED}
        self._reasons: set[str] = set()
        self._memory_used: list[int] = []
        self._foreign: set[int] = set()
        self._ownership: _Ownership | None = None

    def __enter__(self) -> TelemetrySampler:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._nvml = _nvml()
        if self._nvml is None:
            return
        try:
            indices = self.indices
            if indices is None:
                count = self._nvml.nvmlDeviceGetCount()
                uuids = [_text(self._nvml.nvmlDeviceGetUUID(self._nvml.nvmlDeviceGetHandleByIndex(i)))
                         for i in range(count)]
                indices = visible_indices(uuids, os.environ.get("CUDA_VISIBLE_DEVICES"))
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            if not self._handles:
                raise LookupError("no GPU to sample")
        except Exception:
            _shutdown(self._nvml)
            self._nvml = None
            return
        self._ownership = _Ownership()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="specperf-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=max(5.0, 2 * self.interval_s))
        self._thread = None
        self._sample_safely()
        _shutdown(self._nvml)

    def _run(self) -> None:
        while True:
            self._sample_safely()
            if self._stop.wait(self.interval_s):
                return

    def _sample_safely(self) -> None:
        try:
            self._sample()
        except Exception:      # a sampler must never break the measurement it watches
            pass

    def _sample(self) -> None:
        nvml = self._nvml
        sm, mem = _const(nvml, "NVML_CLOCK_SM", 1), _const(nvml, "NVML_CLOCK_MEM", 2)
        values = {name: [] for name in _SAMPLED}
        reasons: set[str] = set()
        used: int | None = 0          # over all sampled GPUs; None when one does not say
        foreign: set[int] = set()
        for handle in self._handles:
            values["sm_clock_mhz"].append(_query(nvml, "nvmlDeviceGetClockInfo", handle, sm))
            values["mem_clock_mhz"].append(_query(nvml, "nvmlDeviceGetClockInfo", handle, mem))
            values["temperature_c"].append(_query(nvml, "nvmlDeviceGetTemperature", handle,
                                                  _const(nvml, "NVML_TEMPERATURE_GPU", 0)))
            values["power_w"].append(_watts(_query(nvml, "nvmlDeviceGetPowerUsage", handle)))
            reasons.update(decode_throttle_reasons(_throttle_mask(nvml, handle), nvml))
            memory = _query(nvml, "nvmlDeviceGetMemoryInfo", handle)
            used = None if memory is None or used is None else used + memory.used // _MIB
            foreign.update(p.pid for p in _compute_processes(nvml, handle)
                           if self._ownership.is_foreign(p.pid))
        with self._lock:
            self._samples += 1
            for name, seen in values.items():
                self._values[name].extend(v for v in seen if v is not None)
            self._reasons |= reasons
            if used is not None:
                self._memory_used.append(used)
            self._foreign |= foreign

    def summary(self) -> dict | None:
        """What the GPUs did during the measurement (all sampled GPUs pooled), or None without NVML.

        memory_used_mib is the total over the sampled GPUs: at the first sample and its peak."""
        if self._ownership is None:
            return None
        with self._lock:
            return {
                "samples": self._samples,
                "interval_s": self.interval_s,
                **{name: _spread(values) for name, values in self._values.items()},
                "throttle_reasons": sorted(self._reasons),
                "memory_used_mib": ({"start": self._memory_used[0], "peak": max(self._memory_used)}
                                    if self._memory_used else None),
                "foreign_pids": sorted(self._foreign),
            }


def _spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def telemetry_problems(telemetry: dict | None, preflight_foreign_pids=()) -> list[str]:
    """One short reason per thing that makes a measurement invalid; [] when all is well or unknown."""
    if not telemetry:
        return []
    problems = []
    bad = sorted(BAD_THROTTLE_REASONS.intersection(telemetry.get("throttle_reasons", ())))
    if bad:
        problems.append(f"GPU throttled: {', '.join(bad)}")
    known = set(preflight_foreign_pids)
    problems += [f"foreign process {pid} used the GPU"
                 for pid in telemetry.get("foreign_pids", ()) if pid not in known]
    return problems


# ------------------------------------------------------------------ requirements

def _class_rank(name: str) -> int | None:
    """Rank in GPU_CLASSES of the newest class named as a word in a GPU name, e.g. "NVIDIA H100 80GB HBM3"."""
    ranks = [rank for rank, cls in enumerate(GPU_CLASSES)
             if re.search(rf"(?<![a-z0-9]){cls.lower()}(?![a-z0-9])", name.lower())]
    return max(ranks) if ranks else None


def unmet_requirement(device: dict, min_class: str | None = None, count: int = 1,
                      min_memory_gib: int | None = None) -> str | None:
    """Why `device` (hardware.describe_device()) cannot run a test, as a one-line skip reason; None if it can."""
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
        raise ValueError(f"worker {worker_index} of {worker_count} with TP {tp_size}: "
                         "need 0 <= worker < workers and TP >= 1")
    needed = worker_count * tp_size
    if needed > len(gpu_ids):
        raise ValueError(f"{worker_count} workers x TP {tp_size} need {needed} GPUs, "
                         f"but only {len(gpu_ids)} are visible ({','.join(gpu_ids) or 'none'}); "
                         "run fewer workers (-n) or select fewer TP scenarios")
    return list(gpu_ids[worker_index * tp_size:(worker_index + 1) * tp_size])


def process_gpus(visible: list[str], max_tp: int, worker_id: str | None = None, worker_count: int = 1) -> str:
    """CUDA_VISIBLE_DEVICES for a process that runs engines: xdist worker "gwI" gets its own block of
    max_tp GPUs; a run without xdist keeps the first max_tp (all there are, if fewer: scenarios
    with a larger TP are then skipped by their requires_gpu mark)."""
    if worker_id is None:
        return ",".join(visible[:max(1, min(max_tp, len(visible)))])
    match = re.fullmatch(r"gw(\d+)", worker_id)
    if match is None:
        raise ValueError(f"not a pytest-xdist worker id: {worker_id!r} (expected gw0, gw1, ...)")
    return ",".join(allocate_gpus(int(match.group(1)), worker_count, visible, max_tp))


def visible_gpu_ids() -> list[str]:
    """CUDA_VISIBLE_DEVICES as a list, or every GPU's index when it is unset ([] without NVML)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [e.strip() for e in env.split(",") if e.strip()]
    nvml = _nvml()
    if nvml is None:
        return []
    try:
        return [str(i) for i in range(nvml.nvmlDeviceGetCount())]
    except nvml.NVMLError:
        return []
    finally:
        _shutdown(nvml)
