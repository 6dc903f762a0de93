"""GPU clocks and throttling over a run's scenarios: the lowest median SM clock, the throttle
reasons seen, and the scenarios measured while a clock-lowering one was active."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...records import Device, ScenarioResult
from ...run.hardware.telemetry import BAD_THROTTLE_REASONS
from ..format import distinct

CPU_CLOCKS = "no GPU: clocks and throttling not measured (CPU tier)"


@dataclass(frozen=True)
class Clocks:
    """GPU clocks and throttling over the scenarios: the lowest median SM clock, the union of throttle reasons."""

    measured: bool
    line: str
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    throttle_reasons: list[str] = field(default_factory=list)  # clock-lowering ones first
    bad_reasons: list[str] = field(default_factory=list)
    bad_scenarios: list[str] = field(default_factory=list)


def clock_summary(results: list[ScenarioResult], devices: list[Device]) -> Clocks:
    # gpu_telemetry is run.hardware.telemetry.TelemetrySampler.summary(): a dict whose spreads may be None
    sampled = [(r.id, r.gpu_telemetry) for r in results if r.gpu_telemetry]
    if not sampled:
        kinds = {d.kind for d in devices}
        return Clocks(
            False,
            "GPU clocks and throttling not recorded"
            if "gpu" in kinds
            else CPU_CLOCKS
            if "cpu" in kinds
            else "clocks and throttling unknown",
        )
    medians = [m for _, t in sampled if (m := (t.get("sm_clock_mhz") or {}).get("median")) is not None]
    maxima = [
        m
        for d in devices
        for g in (d.model_extra or {}).get("gpus") or []
        if (m := g.get("max_sm_clock_mhz")) is not None
    ]
    reasons = sorted(
        distinct(name for _, t in sampled for name in t.get("throttle_reasons") or []),
        key=lambda name: name not in BAD_THROTTLE_REASONS,
    )
    clock = f"SM clock {min(medians):.0f} MHz" if medians else "SM clock not sampled"
    if maxima:
        clock += f" (max {max(maxima):.0f})"
    return Clocks(
        True,
        f"{clock}, throttling: {', '.join(reasons) or 'none seen'}",
        min(medians) if medians else None,
        max(maxima) if maxima else None,
        reasons,
        [x for x in reasons if x in BAD_THROTTLE_REASONS],
        [sid for sid, t in sampled if BAD_THROTTLE_REASONS.intersection(t.get("throttle_reasons") or [])],
    )
