"""Constructed scenarios and result records for the unit tests.

A record is the typed ScenarioResult a run session writes (the fields the pure modules read:
scenario, status, device, provenance, metrics, validity, finished_at), without running an engine.
"""

from __future__ import annotations

import copy
import statistics
from pathlib import Path

from specperf.judge import metrics
from specperf.profiles.scenarios import REFERENCE_METHOD, Method, Model, Scenario, scenario
from specperf.records import Counters, ScenarioResult
from specperf.storage import write_result

HARDWARE_KEY = "cpu-test-xeon-2c"
THROUGHPUT = [100.0, 101.0, 99.0, 100.5, 99.5]
REFERENCE_THROUGHPUT = 50.0
# per round: 3 draft positions, 100 drafts -> mean acceptance length 2.5, rate 0.5, per position .7/.5/.3
COUNTERS = {"drafts": 100, "draft_tokens": 300, "accepted": 150, "accepted_per_pos": [70, 50, 30]}

TINY = Model(name="tiny-llama", path="builtin:tiny-llama")
EAGLE3 = Method(
    label="eagle3-k3", name="eagle3", params={"model": "builtin:tiny-llama-eagle3", "num_speculative_tokens": 3}
)


def make_scenario(
    method: Method = EAGLE3,
    *,
    batch_size: int = 4,
    dataset: str = "gsm8k",
    output_len: int = 32,
    rounds: int = 5,
    tolerances: dict | None = None,
) -> Scenario:
    return scenario(
        profile="unit",
        model=TINY,
        method=method,
        batch_size=batch_size,
        dataset=dataset,
        num_requests=2,
        output_len=output_len,
        rounds=rounds,
        warmup=1,
        seed=42,
        batching="replicate",
        engine_args={"enforce_eager": True},
        tolerances=tolerances or {},
    )


def reference_scenario(**kwargs) -> Scenario:
    return make_scenario(REFERENCE_METHOD, **kwargs)


def make_record(
    scenario: Scenario | None = None,
    *,
    throughput: list[float] | None = None,
    counters: list[dict] | None = None,
    reference_throughput: float | None = REFERENCE_THROUGHPUT,
    lossless: float = 1.0,
    hardware_key: str = HARDWARE_KEY,
    status: str = "ok",
    error: str | None = None,
    reasons: list[str] | None = None,
) -> ScenarioResult:
    """A finished result record; SD scenarios get acceptance, speedup and lossless metrics."""
    scenario = scenario or make_scenario()
    throughput = list(THROUGHPUT if throughput is None else throughput)
    counters = [copy.deepcopy(COUNTERS) for _ in throughput] if counters is None else counters
    reasons = list(reasons or [])
    record = {
        "scenario": scenario.to_json(),
        "status": status,
        "error": error,
        "started_at": "2025-01-01T00:00:00+00:00",
        "finished_at": "2025-01-01T00:01:00+00:00",
        "device": {
            "kind": "cpu",
            "name": "Test Xeon",
            "count": 2,
            "memory_gib": 8,
            "driver": None,
            "hardware_key": hardware_key,
            "calibration_s": 0.04,
        },
        "provenance": {"suite_version": "0.1.0", "vllm": "0.32.0", "git_commit": None},
        "effective_config": {"max_num_seqs": 256},
    }
    if status != "ok":
        return ScenarioResult.model_validate(record)
    record["rounds"] = [
        {"wall_s": 100 / t, "output_tokens": 100, "throughput": t, "counters": c} for t, c in zip(throughput, counters)
    ]
    total = metrics.sum_counters([Counters(**c) for c in counters])
    record["counters"] = total.to_json()
    values = {"throughput_tok_s": {"value": statistics.median(throughput), "samples": throughput}}
    if not scenario.method.is_reference:
        per_round = [metrics.acceptance(Counters(**c)) for c in counters]
        overall = metrics.acceptance(total)
        for name in ("mean_acceptance_length", "draft_acceptance_rate", "per_position_acceptance"):
            values[name] = {"value": overall[name], "samples": [a[name] for a in per_round]}
        if reference_throughput:
            speedups = [t / reference_throughput for t in throughput]
            values["speedup"] = {"value": statistics.median(speedups), "samples": speedups}
            values["lossless_fraction"] = {"value": lossless, "samples": [lossless]}
    record["metrics"] = values
    record["validity"] = {"valid": not reasons, "reasons": reasons}
    return ScenarioResult.model_validate(record)


def scaled_counters(factor: float, rounds: int = 5) -> list[dict]:
    """COUNTERS with accepted tokens scaled by factor (acceptance metrics scale with it)."""
    return [
        {
            "drafts": COUNTERS["drafts"],
            "draft_tokens": COUNTERS["draft_tokens"],
            "accepted": round(COUNTERS["accepted"] * factor),
            "accepted_per_pos": [round(a * factor) for a in COUNTERS["accepted_per_pos"]],
        }
        for _ in range(rounds)
    ]


def write_run(run_dir: Path, records: list[ScenarioResult]) -> Path:
    for record in records:
        write_result(run_dir, record)
    return run_dir


def write_run_file(run_dir: Path, profile: str) -> Path:
    """run.json of a run of `profile` on the test hardware."""
    from specperf.records import RunFile
    from specperf.storage import write_record

    return write_record(
        run_dir / "run.json",
        RunFile(run_id=run_dir.name, profile=profile, device={"kind": "cpu", "hardware_key": HARDWARE_KEY}),
    )


def gpu_device(*, count: int = 1, throttle_reasons: list[str] | None = None, max_sm_clock_mhz: int = 1980) -> dict:
    """A record["device"] of an H100 box as hardware.describe_device gives it, one entry per GPU."""
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-{i:04d}",
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_mib": 81559,
            "ecc_mode": True,
            "ecc_uncorrected_errors": 0,
            "persistence_mode": True,
            "mig_mode": False,
            "sm_clock_mhz": max_sm_clock_mhz,
            "max_sm_clock_mhz": max_sm_clock_mhz,
            "mem_clock_mhz": 2619,
            "temperature_c": 35,
            "power_w": 70.0,
            "power_limit_w": 700.0,
            "throttle_reasons": list(throttle_reasons or []),
        }
        for i in range(count)
    ]
    return {
        "kind": "gpu",
        "name": "NVIDIA H100 80GB HBM3",
        "count": count,
        "memory_gib": 80,
        "driver": "550.54.15",
        "cuda_driver_version": "12.4",
        "hardware_key": "gpu-nvidia-h100-80gb-hbm3-80g",
        "gpus": gpus,
    }


def gpu_telemetry(
    *, sm_clock_median: float = 1980.0, throttle_reasons: list[str] | None = None, foreign_pids: list[int] | None = None
) -> dict:
    """A record["gpu_telemetry"]: what the GPU did while a scenario was measured."""
    return {
        "samples": 40,
        "interval_s": 0.25,
        "sm_clock_mhz": {"min": sm_clock_median - 15, "median": sm_clock_median, "max": 1980.0},
        "mem_clock_mhz": {"min": 2619.0, "median": 2619.0, "max": 2619.0},
        "temperature_c": {"min": 41.0, "median": 55.0, "max": 63.0},
        "power_w": {"min": 180.0, "median": 420.5, "max": 612.0},
        "throttle_reasons": list(throttle_reasons or []),
        "memory_used_mib": {"start": 70123.0, "peak": 71002.0},
        "foreign_pids": list(foreign_pids or []),
    }
