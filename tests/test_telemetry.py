"""The telemetry sampler and the problems it finds, against a fake pynvml (no GPU needed)."""

import itertools
import os
import time

from fake_nvml import FOREIGN_PID, MIB, box, install, no_nvml  # noqa: F401 (fixtures)

from specperf.run import telemetry


def test_sampler_summarises_changing_values(install):
    gpu_list = box(2)
    state = {"hot": False, "intruder": False}
    for gpu in gpu_list:
        gpu.sm = itertools.cycle([1980, 1410, 1755]).__next__
        gpu.temp = itertools.count(40).__next__
        gpu.used_mib = itertools.count(1000, 100).__next__
        gpu.reasons = lambda: 0x40 if state["hot"] else 0x1
    gpu_list[1].processes = lambda: [(os.getpid(), MIB)] + ([(FOREIGN_PID, MIB)] if state["intruder"] else [])
    nvml = install(gpu_list)

    def wait_for_samples(n):
        deadline = time.monotonic() + 5
        while sampler.summary()["samples"] < n and time.monotonic() < deadline:
            time.sleep(0.002)

    with telemetry.TelemetrySampler([0, 1], interval_s=0.01) as sampler:
        wait_for_samples(2)
        state.update(hot=True, intruder=True)
        wait_for_samples(4)
    summary = sampler.summary()
    assert nvml.calls["init"] == nvml.calls["shutdown"] == 1
    assert summary["samples"] >= 5 and summary["interval_s"] == 0.01
    assert summary["sm_clock_mhz"]["min"] == 1410 and summary["sm_clock_mhz"]["max"] == 1980
    assert summary["temperature_c"]["min"] == 40
    assert summary["temperature_c"]["max"] >= 40 + summary["samples"] - 1
    assert summary["mem_clock_mhz"] == {"min": 2619, "median": 2619, "max": 2619}
    assert summary["power_w"] == {"min": 70.5, "median": 70.5, "max": 70.5}
    assert summary["throttle_reasons"] == ["gpu_idle", "hw_thermal"]
    assert summary["memory_used_mib"]["start"] == 1000 + 1000  # both GPUs, first sample
    assert summary["memory_used_mib"]["peak"] > summary["memory_used_mib"]["start"]
    assert summary["foreign_pids"] == [FOREIGN_PID]
    assert telemetry.telemetry_problems(summary) == [
        "GPU throttled: hw_thermal",
        f"foreign process {FOREIGN_PID} used the GPU",
    ]


def test_sampler_of_a_short_measurement_has_two_samples_and_stops_promptly(install):
    install(box(1))
    started = time.monotonic()
    with telemetry.TelemetrySampler(interval_s=30) as sampler:  # None: the visible GPUs
        pass
    assert time.monotonic() - started < 2
    assert sampler.summary()["samples"] == 2


def test_sampler_without_nvml_does_nothing(no_nvml):
    with telemetry.TelemetrySampler([0], interval_s=0.01) as sampler:
        time.sleep(0.02)
    assert sampler.summary() is None
    assert telemetry.telemetry_problems(sampler.summary()) == []


def test_sampler_never_raises_into_the_measurement(install):
    gpu_list = box(1)

    def broken():
        raise RuntimeError("driver fell over")

    gpu_list[0].used_mib = broken
    install(gpu_list)
    with telemetry.TelemetrySampler([0], interval_s=0.01) as sampler:
        time.sleep(0.03)
    summary = sampler.summary()
    assert summary["samples"] == 0 and summary["sm_clock_mhz"] is None and summary["memory_used_mib"] is None


def test_sampler_without_memory_facts_keeps_the_rest(install):
    gpu_list = box(1)
    gpu_list[0].unsupported = {"nvmlDeviceGetMemoryInfo"}
    install(gpu_list)
    with telemetry.TelemetrySampler([0], interval_s=30) as sampler:  # the entry and the exit sample
        pass
    summary = sampler.summary()
    assert summary["samples"] == 2 and summary["memory_used_mib"] is None
    assert summary["sm_clock_mhz"] == {"min": 1980, "median": 1980, "max": 1980}


def test_sampler_with_a_bad_index_does_nothing(install):
    install(box(1))
    with telemetry.TelemetrySampler([5], interval_s=0.01) as sampler:
        pass
    assert sampler.summary() is None
    with telemetry.TelemetrySampler([], interval_s=0.01) as sampler:
        pass
    assert sampler.summary() is None


def test_telemetry_problems():
    assert telemetry.telemetry_problems(None) == []
    clean = {"throttle_reasons": ["gpu_idle", "sw_power_cap"], "foreign_pids": []}
    assert telemetry.telemetry_problems(clean) == []
    bad = {"throttle_reasons": ["hw_power_brake", "hw_slowdown", "sw_power_cap"], "foreign_pids": [77, 1234]}
    assert telemetry.telemetry_problems(bad, preflight_foreign_pids=[77]) == [
        "GPU throttled: hw_power_brake, hw_slowdown",
        "foreign process 1234 used the GPU",
    ]
