"""What the GPUs did while a measurement ran, and whether that makes the measurement invalid.

A measurement on a GPU is only worth comparing when nothing disturbed it: no thermal, board-limit,
reliability or power-brake slowdown, and no other process computing on the same GPU.
`TelemetrySampler` watches the GPUs through NVML while a measurement runs: it polls clocks,
throttle reasons, memory and processes, and reads NVML's violation counters at the start and the
end, which catch a slowdown shorter than the polling interval.  `telemetry_problems` turns its
summary into reasons the measurement is invalid.  Without pynvml, a driver or GPUs a sampler's
`summary()` is None and there are no problems.
"""

from __future__ import annotations

import statistics
import threading

from .nvml import (
    MIB,
    close_nvml,
    compute_processes,
    cuda_devices,
    devices_at,
    open_nvml,
    query,
    readings,
    violation_times_ns,
)
from .ownership import BY_COUNT, BY_PID, Ownership

# Reasons that make a measurement invalid.  sw_power_cap is left out: a busy GPU at its power
# limit is the normal state of a throughput benchmark.
BAD_THROTTLE_REASONS = frozenset(
    {"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake", "board_limit", "reliability"}
)
# Violation counters whose growth during a measurement makes it invalid.  Power (the power cap),
# sync boost, low utilisation and the totals below application and base clocks stay informational.
SLOWDOWN_VIOLATIONS = frozenset({"thermal", "board_limit", "reliability"})

_SAMPLED = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w")


class TelemetrySampler:
    """Polls NVML in a background thread while a measurement runs.

        with TelemetrySampler([0]) as sampler:
            measure()
        record["telemetry"] = sampler.summary()

    `indices` are NVML indices (preflight's "index"); None means the devices CUDA_VISIBLE_DEVICES
    allows.  Where CUDA_VISIBLE_DEVICES names a MIG slice of a GPU, its memory and processes are
    the slice's; clocks, temperature, power and throttling are always the GPU's.  One sample is
    taken on entry, one every `interval_s`, and one on exit, so even a short measurement has two.
    A failing sample is dropped; nothing is ever raised to the caller.
    """

    def __init__(self, indices: list[int] | None = None, interval_s: float = 0.1):
        self.indices = indices
        self.interval_s = interval_s
        self._nvml = None
        self._devices: list = []
        self._minors: list[int | None] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._samples = 0
        self._values: dict[str, list[float]] = {name: [] for name in _SAMPLED}
        self._reasons: set[str] = set()
        self._memory_used: list[int] = []
        self._foreign: dict[tuple[int, int], dict] = {}  # (GPU index, pid) -> its entry, at its peak memory
        self._ownership_ways: set[str] = set()
        self._violations_at_start: list[dict[str, int]] = []
        self._violation_ms: dict[str, float] | None = None
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
            self._devices = cuda_devices(self._nvml) if self.indices is None else devices_at(self._nvml, self.indices)
            if not self._devices:
                raise LookupError("no GPU to sample")
            self._minors = [device.minor(self._nvml) for device in self._devices]
            self._violations_at_start = [violation_times_ns(self._nvml, d.gpu) for d in self._devices]
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
        try:
            at_end = [violation_times_ns(self._nvml, d.gpu) for d in self._devices]
            self._violation_ms = violation_growth_ms(self._violations_at_start, at_end)
        except Exception:
            pass
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
        used: int | None = 0  # over all sampled devices; None when one does not say
        foreign: list[dict] = []
        ways: set[str] = set()
        for device, minor in zip(self._devices, self._minors):
            now = readings(nvml, device.gpu)
            for name in _SAMPLED:
                values[name].append(now[name])
            reasons.update(now["throttle_reasons"])
            memory = query(nvml, "nvmlDeviceGetMemoryInfo", device.handle)
            used = None if memory is None or used is None else used + memory.used // MIB
            verdict = self._ownership.foreign_on(device.index, minor, compute_processes(nvml, device.handle))
            foreign += verdict.foreign
            ways |= {verdict.ownership} - {None}
        with self._lock:
            self._samples += 1
            for name, seen in values.items():
                self._values[name].extend(v for v in seen if v is not None)
            self._reasons |= reasons
            if used is not None:
                self._memory_used.append(used)
            for entry in foreign:
                key = (entry["gpu_index"], entry["pid"])
                kept = self._foreign.get(key)
                if kept is None or (entry["used_memory_mib"] or 0) > (kept["used_memory_mib"] or 0):
                    self._foreign[key] = entry
            self._ownership_ways |= ways

    def summary(self) -> dict | None:
        """What the GPUs did during the measurement (all sampled devices pooled), or None without NVML.

        memory_used_mib is the total over the sampled devices: at the first sample and its peak.
        foreign_processes are the processes the suite did not start, each at its peak memory
        (foreign_pids: their pids alone, all that older results keep); ownership says how they
        were told from the suite's own ("pids" matched, "counted" where NVML's pids are another
        PID namespace's, as in a container; None where NVML listed no process).  violation_ms is
        how much each of NVML's violation counters grew during the measurement, on the device
        where it grew most (None where the driver keeps none)."""
        if self._ownership is None:
            return None
        with self._lock:
            foreign = [self._foreign[key] for key in sorted(self._foreign)]
            return {
                "samples": self._samples,
                "interval_s": self.interval_s,
                **{name: _spread(values) for name, values in self._values.items()},
                "throttle_reasons": sorted(self._reasons),
                "memory_used_mib": (
                    {"start": self._memory_used[0], "peak": max(self._memory_used)} if self._memory_used else None
                ),
                "foreign_pids": sorted({entry["pid"] for entry in foreign}),
                "foreign_processes": foreign,
                "ownership": BY_COUNT if BY_COUNT in self._ownership_ways else BY_PID if self._ownership_ways else None,
                "violation_ms": self._violation_ms,
            }


def _spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def violation_growth_ms(at_start: list[dict[str, int]], at_end: list[dict[str, int]]) -> dict[str, float] | None:
    """How much each violation counter grew, in ms, on the device where it grew most; None without counters.

    A counter that went backwards (the driver reloaded) or was read at one end only is left out."""
    grown: dict[str, float] = {}
    for start, end in zip(at_start, at_end):
        for name in start.keys() & end.keys():
            if end[name] >= start[name]:
                grown[name] = max(grown.get(name, 0.0), (end[name] - start[name]) / 1e6)
    return {name: round(grown[name], 3) for name in sorted(grown)} or None


def telemetry_problems(
    telemetry: dict | None, preflight_foreign_pids=(), preflight_is_the_server: bool = False
) -> list[str]:
    """One short reason per thing that makes a measurement invalid; [] when all is well or unknown.

    A foreign process invalidates the measurement whether or not preflight saw it before the run
    started (the reason then says so), except in a --serve-url run (`preflight_is_the_server`):
    there the processes preflight saw are the measured server's own."""
    if not telemetry:
        return []
    problems = []
    bad = sorted(BAD_THROTTLE_REASONS.intersection(telemetry.get("throttle_reasons", ())))
    if bad:
        problems.append(f"GPU throttled: {', '.join(bad)}")
    slowed = {
        name: ms for name, ms in (telemetry.get("violation_ms") or {}).items() if name in SLOWDOWN_VIOLATIONS and ms > 0
    }
    if slowed:
        times = ", ".join(f"{name} {ms:.3g} ms" for name, ms in sorted(slowed.items()))
        problems.append(f"GPU slowed down (NVML violation counters): {times}")
    before = set(preflight_foreign_pids)
    for process in telemetry.get("foreign_processes", ()):
        if not (preflight_is_the_server and process["pid"] in before):
            problems.append("foreign process " + foreign_process_text(process, process["pid"] in before))
    return problems


def foreign_process_text(process: dict, before_the_run: bool = False) -> str:
    """One foreign process (ownership.py's entry) in words: "4242 on GPU 1 (512 MiB; there before the run started)"."""
    notes = [] if process.get("used_memory_mib") is None else [f"{process['used_memory_mib']} MiB"]
    if process.get("pid_namespace") == "other":
        notes.append("another PID namespace's pid, one more than the suite runs there")
    if before_the_run:
        notes.append("there before the run started")
    return f"{process['pid']} on GPU {process['gpu_index']}" + (f" ({'; '.join(notes)})" if notes else "")
