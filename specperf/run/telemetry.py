"""What the GPUs did while a measurement ran, and whether that makes the measurement invalid.

A measurement on a GPU is only worth comparing when nothing disturbed it: no thermal or
power-brake throttling, and no other process computing on the same GPU.  `TelemetrySampler`
watches the GPUs through NVML while a measurement runs; `telemetry_problems` turns its summary
into reasons the measurement is invalid.  Without pynvml, a driver or GPUs a sampler's `summary()`
is None and there are no problems.
"""

from __future__ import annotations

import statistics
import threading

from .nvml import MIB, Ownership, close_nvml, compute_processes, open_nvml, query, readings, visible_nvml_indices

# Reasons that make a measurement invalid.  sw_power_cap is left out: a busy GPU at its power
# limit is the normal state of a throughput benchmark.
BAD_THROTTLE_REASONS = frozenset({"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"})

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
        self._ownership: Ownership | None = None

    def __enter__(self) -> TelemetrySampler:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._nvml = open_nvml()
        if self._nvml is None:
            return
        try:
            indices = visible_nvml_indices(self._nvml) if self.indices is None else self.indices
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            if not self._handles:
                raise LookupError("no GPU to sample")
        except Exception:
            close_nvml(self._nvml)
            self._nvml = None
            return
        self._ownership = Ownership()
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
        close_nvml(self._nvml)

    def _run(self) -> None:
        while True:
            self._sample_safely()
            if self._stop.wait(self.interval_s):
                return

    def _sample_safely(self) -> None:
        try:
            self._sample()
        except Exception:  # a sampler must never break the measurement it watches
            pass

    def _sample(self) -> None:
        nvml = self._nvml
        values = {name: [] for name in _SAMPLED}
        reasons: set[str] = set()
        used: int | None = 0  # over all sampled GPUs; None when one does not say
        foreign: set[int] = set()
        for handle in self._handles:
            now = readings(nvml, handle)
            for name in _SAMPLED:
                values[name].append(now[name])
            reasons.update(now["throttle_reasons"])
            memory = query(nvml, "nvmlDeviceGetMemoryInfo", handle)
            used = None if memory is None or used is None else used + memory.used // MIB
            foreign.update(p.pid for p in compute_processes(nvml, handle) if self._ownership.is_foreign(p.pid))
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
                "memory_used_mib": (
                    {"start": self._memory_used[0], "peak": max(self._memory_used)} if self._memory_used else None
                ),
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
    problems += [f"foreign process {pid} used the GPU" for pid in telemetry.get("foreign_pids", ()) if pid not in known]
    return problems
