"""The telemetry sampler and the problems it finds, against a fake pynvml (no GPU needed)."""

import itertools
import os
import time

from fake_nvml import FOREIGN_PID, MIB, FakeMig, box, engine, install, no_nvml  # noqa: F401 (fixtures)

from specperf.run.hardware import telemetry

THERMAL, POWER, LOW_UTILIZATION = 1, 0, 4  # NVML_PERF_POLICY_*


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
    # no process here has that pid: another namespace's, counted against the suite's (none there)
    assert summary["foreign_processes"] == [
        {"gpu_index": 1, "pid": FOREIGN_PID, "used_memory_mib": 1, "pid_namespace": "other"}
    ]
    assert summary["ownership"] == "counted"
    assert summary["violation_ms"] is None  # the fake GPUs keep no violation counters
    assert telemetry.telemetry_problems(summary) == [
        "GPU throttled: hw_thermal",
        f"foreign process {FOREIGN_PID} on GPU 1 (1 MiB; another PID namespace's pid, one more than the suite "
        "runs there)",
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
    clean = {"throttle_reasons": ["gpu_idle", "sw_power_cap"], "foreign_processes": []}
    assert telemetry.telemetry_problems(clean) == []
    bad = {
        "throttle_reasons": ["hw_power_brake", "hw_slowdown", "sw_power_cap"],
        "foreign_processes": [
            {"gpu_index": 0, "pid": 77, "used_memory_mib": 512, "pid_namespace": "this"},
            {"gpu_index": 1, "pid": 1234, "used_memory_mib": None, "pid_namespace": "this"},
        ],
    }
    # a process there before the run started is no excuse: it computed during the measurement
    assert telemetry.telemetry_problems(bad, preflight_foreign_pids=[77]) == [
        "GPU throttled: hw_power_brake, hw_slowdown",
        "foreign process 77 on GPU 0 (512 MiB; there before the run started)",
        "foreign process 1234 on GPU 1",
    ]
    # measuring a running server (--serve-url): what preflight saw is that server
    assert telemetry.telemetry_problems(bad, [77], preflight_is_the_server=True)[1:] == [
        "foreign process 1234 on GPU 1"
    ]


def test_violation_counters_catch_a_slowdown_no_poll_saw(install):
    gpu_list = box(2)
    counters = {"thermal": 0, "power": 0}

    def read():
        return {THERMAL: counters["thermal"], POWER: counters["power"], LOW_UTILIZATION: 5_000_000}

    for gpu in gpu_list:
        gpu.violations_ns = read
    install(gpu_list)
    with telemetry.TelemetrySampler([0, 1], interval_s=30) as sampler:
        counters["thermal"] += 2_500_000  # 2.5 ms of thermal slowdown between two polls
        counters["power"] += 40_000_000
    summary = sampler.summary()
    assert summary["throttle_reasons"] == []  # no poll saw it
    assert summary["violation_ms"] == {"low_utilization": 0.0, "power": 40.0, "thermal": 2.5}
    # the power cap is the normal state of a busy GPU: informational, as its throttle reason is
    assert telemetry.telemetry_problems(summary) == ["GPU slowed down (NVML violation counters): thermal 2.5 ms"]


def test_violation_growth_per_device():
    start = [{"thermal": 10, "power": 5}, {"thermal": 0, "reliability": 7}]
    end = [{"thermal": 3_000_010, "power": 4}, {"thermal": 1_000_000, "reliability": 7}]
    # the largest growth over the devices; a counter that went back (a driver reload) is left out
    assert telemetry.violation_growth_ms(start, end) == {"reliability": 0.0, "thermal": 3.0}
    assert telemetry.violation_growth_ms([{}], [{}]) is None


def test_sampler_in_a_container_keeps_our_engine(install, engine):
    gpu_list = box(1)
    gpu_list[0].processes = [(engine, 70_000 * MIB)]
    install(gpu_list, container=True)  # NVML lists the engine by its host pid
    with telemetry.TelemetrySampler([0], interval_s=30) as sampler:
        pass
    summary = sampler.summary()
    assert summary["foreign_processes"] == [] and summary["foreign_pids"] == []
    assert summary["ownership"] == "counted"
    assert telemetry.telemetry_problems(summary) == []


def test_sampler_matches_pids_outside_a_container(install, engine):
    gpu_list = box(1)
    gpu_list[0].processes = [(engine, 70_000 * MIB)]
    install(gpu_list)
    with telemetry.TelemetrySampler([0], interval_s=30) as sampler:
        pass
    assert sampler.summary()["ownership"] == "pids" and sampler.summary()["foreign_processes"] == []


def test_sampler_reads_throttle_reasons_on_a_driver_without_the_clocks_event_call(install):
    install(box(1, reasons=0x20), driver_lacks={"nvmlDeviceGetCurrentClocksEventReasons"})
    with telemetry.TelemetrySampler([0], interval_s=30) as sampler:
        pass
    assert telemetry.telemetry_problems(sampler.summary()) == ["GPU throttled: sw_thermal"]


def test_sampler_on_a_mig_slice(install, monkeypatch):
    gpu_list = box(2)
    gpu_list[1].mig = [1, 1]
    gpu_list[1].sm = 1410
    gpu_list[1].processes = [(FOREIGN_PID, 9000 * MIB)]  # on another slice
    gpu_list[1].migs = [FakeMig("MIG-aaaa1111-0000-0000-0000-000000000000", used_mib=700)]
    install(gpu_list)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-aaaa1111-0000-0000-0000-000000000000")
    with telemetry.TelemetrySampler([1], interval_s=30) as sampler:  # preflight's index: the slice's GPU
        pass
    summary = sampler.summary()
    assert summary["memory_used_mib"] == {"start": 700, "peak": 700}  # the slice's memory
    assert summary["sm_clock_mhz"]["median"] == 1410  # the GPU's clocks
    assert summary["foreign_processes"] == [] and summary["ownership"] is None  # the slice's processes: none
