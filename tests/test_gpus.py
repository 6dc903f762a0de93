"""GPU facts, telemetry, requirements and allocation, against a fake pynvml (no GPU needed)."""

import itertools
import os
import subprocess
import sys
import time
import types
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from specperf.run import gpus

from specperf.run import device as hardware

MIB = 2**20
FOREIGN_PID = 4_194_304          # pid_max is at most 2**22, so no process has this pid


class NVMLError(Exception):
    def __init__(self, value=3):   # 3: NVML_ERROR_NOT_SUPPORTED
        super().__init__(value)
        self.value = value


@dataclass
class FakeGPU:
    """One GPU; a field may be a zero-argument callable whose value changes per call."""
    uuid: str
    name: object = b"NVIDIA H100 80GB HBM3"
    total_mib: int = 81559
    used_mib: object = 1000
    ecc: list = field(default_factory=lambda: [1, 1])
    ecc_errors: int = 0
    persistence: int = 1
    mig: list = field(default_factory=lambda: [0, 0])
    sm: object = 1980
    max_sm: int = 1980
    mem: int = 2619
    temp: object = 35
    power_mw: object = 70_500
    limit_mw: int = 700_000
    reasons: object = 0
    processes: object = field(default_factory=list)
    unsupported: set = field(default_factory=set)


def _value(v):
    return v() if callable(v) else v


def fake_nvml(gpu_list, driver_works=True, old_api=False):
    """A module with the pynvml functions gpus.py calls; counts init/shutdown to check pairing."""
    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = NVMLError
    nvml.calls = {"init": 0, "shutdown": 0}
    for constant, value in dict(NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
                                NVML_FEATURE_ENABLED=1, NVML_DEVICE_MIG_ENABLE=1,
                                NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_VOLATILE_ECC=0).items():
        setattr(nvml, constant, value)
    prefix = "nvmlClocksThrottleReason" if old_api else "nvmlClocksEventReason"
    for _, suffix, bit in gpus._REASONS:
        setattr(nvml, prefix + suffix, bit)

    def api(function_name):
        def wrap(fn):
            def call(handle, *args):
                if function_name in handle.unsupported:
                    raise NVMLError(3)
                return fn(handle, *args)
            setattr(nvml, function_name, call)
            return call
        return wrap

    def init():
        if not driver_works:
            raise NVMLError(12)   # NVML_ERROR_LIBRARY_NOT_FOUND
        nvml.calls["init"] += 1

    def shutdown():
        nvml.calls["shutdown"] += 1

    nvml.nvmlInit = init
    nvml.nvmlShutdown = shutdown
    nvml.nvmlDeviceGetCount = lambda: len(gpu_list)
    nvml.nvmlDeviceGetHandleByIndex = lambda i: gpu_list[i]
    nvml.nvmlSystemGetDriverVersion = lambda: b"570.124.06"
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 12080
    nvml.nvmlDeviceGetUUID = lambda h: h.uuid.encode()
    api("nvmlDeviceGetName")(lambda h: h.name)
    api("nvmlDeviceGetMemoryInfo")(lambda h: SimpleNamespace(total=h.total_mib * MIB,
                                                             used=_value(h.used_mib) * MIB))
    api("nvmlDeviceGetEccMode")(lambda h: h.ecc)
    api("nvmlDeviceGetTotalEccErrors")(lambda h, kind, counter: h.ecc_errors if (kind, counter) == (1, 0) else -1)
    api("nvmlDeviceGetPersistenceMode")(lambda h: h.persistence)
    api("nvmlDeviceGetMigMode")(lambda h: h.mig)
    api("nvmlDeviceGetClockInfo")(lambda h, clock: _value(h.sm) if clock == 1 else h.mem)
    api("nvmlDeviceGetMaxClockInfo")(lambda h, clock: h.max_sm if clock == 1 else h.mem)
    api("nvmlDeviceGetTemperature")(lambda h, sensor: _value(h.temp))
    api("nvmlDeviceGetPowerUsage")(lambda h: _value(h.power_mw))
    api("nvmlDeviceGetEnforcedPowerLimit")(lambda h: h.limit_mw)
    api("nvmlDeviceGetComputeRunningProcesses")(lambda h: [SimpleNamespace(pid=p, usedGpuMemory=m)
                                                           for p, m in _value(h.processes)])
    reasons = "nvmlDeviceGetCurrentClocksThrottleReasons" if old_api else "nvmlDeviceGetCurrentClocksEventReasons"
    api(reasons)(lambda h: _value(h.reasons))
    return nvml


def box(n=4, **fields):
    return [FakeGPU(uuid=f"GPU-{i}{i}{i}{i}aaaa-0000-0000-0000-00000000000{i}", **fields) for i in range(n)]


@pytest.fixture
def install(monkeypatch):
    """Installs a fake pynvml for the test; CUDA_VISIBLE_DEVICES starts unset."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install_(gpu_list, **kwargs):
        nvml = fake_nvml(gpu_list, **kwargs)
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
        return nvml
    return install_


@pytest.fixture
def no_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)   # `import pynvml` raises ImportError


# ------------------------------------------------------------------ preflight

def test_preflight_describes_the_gpus(install):
    gpu_list = box(2)
    gpu_list[1].processes = [(os.getpid(), 2048 * MIB), (FOREIGN_PID, 512 * MIB)]
    nvml = install(gpu_list)
    device = gpus.preflight()
    assert nvml.calls == {"init": 1, "shutdown": 1}
    assert {k: v for k, v in device.items() if k not in ("gpus", "foreign_processes")} == {
        "kind": "gpu", "name": "NVIDIA H100 80GB HBM3", "count": 2, "memory_gib": 80,
        "driver": "570.124.06", "cuda_driver_version": "12.8",
        "hardware_key": "gpu-nvidia-h100-80gb-hbm3-80g-x2",
    }
    assert device["gpus"][0] == {
        "index": 0, "uuid": gpu_list[0].uuid, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
        "ecc_mode": True, "ecc_uncorrected_errors": 0, "persistence_mode": True, "mig_mode": False,
        "sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "temperature_c": 35,
        "power_w": 70.5, "power_limit_w": 700.0, "throttle_reasons": [],
    }
    assert device["gpus"][1]["index"] == 1
    # our own process is not foreign; the other one is, with its memory in MiB
    assert device["foreign_processes"] == [{"gpu_index": 1, "pid": FOREIGN_PID, "used_memory_mib": 512}]


def test_unsupported_queries_give_none(install):
    gpu_list = box(1, name="NVIDIA GeForce RTX 4090", total_mib=24564)
    gpu_list[0].unsupported = {"nvmlDeviceGetEccMode", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetMigMode",
                               "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetPowerUsage",
                               "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetCurrentClocksEventReasons",
                               "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetTemperature"}
    nvml = install(gpu_list)
    del nvml.nvmlSystemGetCudaDriverVersion          # an old pynvml without the call
    device = gpus.preflight()
    gpu = device["gpus"][0]
    for key in ("ecc_mode", "ecc_uncorrected_errors", "mig_mode", "persistence_mode", "power_w",
                "power_limit_w", "temperature_c"):
        assert gpu[key] is None, key
    assert gpu["throttle_reasons"] == [] and gpu["sm_clock_mhz"] == 1980
    assert device["cuda_driver_version"] is None and device["foreign_processes"] == []
    assert device["hardware_key"] == "gpu-nvidia-geforce-rtx-4090-24g-x1"


def test_preflight_without_pynvml_driver_or_gpus(no_nvml, monkeypatch):
    assert gpus.preflight() is None
    nvml = fake_nvml(box(2), driver_works=False)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert gpus.preflight() is None
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([]))
    assert gpus.preflight() is None


def test_describe_device_uses_preflight_or_the_cpu(install, monkeypatch):
    install(box(1))
    assert hardware.describe_device()["hardware_key"] == "gpu-nvidia-h100-80gb-hbm3-80g-x1"
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert hardware.describe_device() == hardware.describe_cpu()


@pytest.mark.parametrize("env, expected", [
    ("2,3", [2, 3]),
    ("3,0", [3, 0]),
    ("GPU-2222aaaa-0000-0000-0000-000000000002,GPU-0000", [2, 0]),   # full UUID and a unique prefix
    ("1,7,2", [1]),            # like CUDA, the list ends at an entry that names no GPU
    ("GPU-", []),              # a prefix that matches every GPU names none
    ("-1", []),
    ("", []),
])
def test_visible_indices(env, expected):
    uuids = [g.uuid for g in box(4)]
    assert gpus.visible_indices(uuids, env) == expected
    assert gpus.visible_indices(uuids, None) == [0, 1, 2, 3]


def test_preflight_respects_cuda_visible_devices(install, monkeypatch):
    gpu_list = box(4)
    gpu_list[0].processes = [(FOREIGN_PID, MIB)]          # on a GPU we may not use: not our business
    install(gpu_list)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{gpu_list[3].uuid},1")
    device = gpus.preflight()
    assert [g["index"] for g in device["gpus"]] == [3, 1]
    assert device["count"] == 2 and device["hardware_key"].endswith("-x2")
    assert device["foreign_processes"] == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus.preflight() is None


def test_own_pids_include_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        own = gpus.own_pids()
        assert os.getpid() in own and child.pid in own
        assert os.getppid() not in own
    finally:
        child.kill()
        child.wait()


# ------------------------------------------------------------------ throttle reasons

def test_decode_throttle_reasons():
    assert gpus.decode_throttle_reasons(0) == []
    assert gpus.decode_throttle_reasons(None) == []
    assert gpus.decode_throttle_reasons(0x1 | 0x4) == ["gpu_idle", "sw_power_cap"]
    assert gpus.decode_throttle_reasons(0x1FF) == [name for name, _, _ in gpus._REASONS]
    assert gpus.decode_throttle_reasons(0x8 | 0x20 | 0x40 | 0x80) == sorted(gpus.BAD_THROTTLE_REASONS, key=[
        name for name, _, _ in gpus._REASONS].index)
    # the module's own constants win over the documented bits
    custom = SimpleNamespace(nvmlClocksThrottleReasonHwThermalSlowdown=0x1000)
    assert gpus.decode_throttle_reasons(0x1000, custom) == ["hw_thermal"]


@pytest.mark.parametrize("old_api", [False, True])
def test_preflight_reads_throttle_reasons_from_either_api(install, old_api):
    install(box(1, reasons=0x4 | 0x40), old_api=old_api)
    assert gpus.preflight()["gpus"][0]["throttle_reasons"] == ["sw_power_cap", "hw_thermal"]


# ------------------------------------------------------------------ telemetry

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

    with gpus.TelemetrySampler([0, 1], interval_s=0.01) as sampler:
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
    assert summary["memory_used_mib"]["start"] == 1000 + 1000     # both GPUs, first sample
    assert summary["memory_used_mib"]["peak"] > summary["memory_used_mib"]["start"]
    assert summary["foreign_pids"] == [FOREIGN_PID]
    assert gpus.telemetry_problems(summary) == ["GPU throttled: hw_thermal",
                                                f"foreign process {FOREIGN_PID} used the GPU"]


def test_sampler_of_a_short_measurement_has_two_samples_and_stops_promptly(install):
    install(box(1))
    started = time.monotonic()
    with gpus.TelemetrySampler(interval_s=30) as sampler:    # None: the visible GPUs
        pass
    assert time.monotonic() - started < 2
    assert sampler.summary()["samples"] == 2


def test_sampler_without_nvml_does_nothing(no_nvml):
    with gpus.TelemetrySampler([0], interval_s=0.01) as sampler:
        time.sleep(0.02)
    assert sampler.summary() is None
    assert gpus.telemetry_problems(sampler.summary()) == []


def test_sampler_never_raises_into_the_measurement(install):
    gpu_list = box(1)

    def broken():
        raise RuntimeError("driver fell over")
    gpu_list[0].used_mib = broken
    install(gpu_list)
    with gpus.TelemetrySampler([0], interval_s=0.01) as sampler:
        time.sleep(0.03)
    summary = sampler.summary()
    assert summary["samples"] == 0 and summary["sm_clock_mhz"] is None and summary["memory_used_mib"] is None


def test_sampler_without_memory_facts_keeps_the_rest(install):
    gpu_list = box(1)
    gpu_list[0].unsupported = {"nvmlDeviceGetMemoryInfo"}
    install(gpu_list)
    with gpus.TelemetrySampler([0], interval_s=30) as sampler:     # the entry and the exit sample
        pass
    summary = sampler.summary()
    assert summary["samples"] == 2 and summary["memory_used_mib"] is None
    assert summary["sm_clock_mhz"] == {"min": 1980, "median": 1980, "max": 1980}


def test_sampler_with_a_bad_index_does_nothing(install):
    install(box(1))
    with gpus.TelemetrySampler([5], interval_s=0.01) as sampler:
        pass
    assert sampler.summary() is None
    with gpus.TelemetrySampler([], interval_s=0.01) as sampler:
        pass
    assert sampler.summary() is None


def test_telemetry_problems():
    assert gpus.telemetry_problems(None) == []
    clean = {"throttle_reasons": ["gpu_idle", "sw_power_cap"], "foreign_pids": []}
    assert gpus.telemetry_problems(clean) == []
    bad = {"throttle_reasons": ["hw_power_brake", "hw_slowdown", "sw_power_cap"], "foreign_pids": [77, 1234]}
    assert gpus.telemetry_problems(bad, preflight_foreign_pids=[77]) == [
        "GPU throttled: hw_power_brake, hw_slowdown", "foreign process 1234 used the GPU"]


# ------------------------------------------------------------------ requirements

H100_BOX = {"kind": "gpu", "name": "NVIDIA H100 80GB HBM3", "count": 2, "memory_gib": 80}


def test_requirements_of_an_h100_box():
    assert gpus.unmet_requirement(H100_BOX) is None
    assert gpus.unmet_requirement(H100_BOX, "A100") is None
    assert gpus.unmet_requirement(H100_BOX, "h100", count=2, min_memory_gib=80) is None
    assert gpus.unmet_requirement(H100_BOX, "B200") == "needs GPU class B200 or newer (this machine: NVIDIA H100 80GB HBM3)"
    assert gpus.unmet_requirement(H100_BOX, count=4) == "needs 4 GPUs (this machine: 2x NVIDIA H100 80GB HBM3)"
    assert "needs 141 GiB per GPU" in gpus.unmet_requirement(H100_BOX, min_memory_gib=141)


@pytest.mark.parametrize("name, meets, fails", [
    ("NVIDIA A100-SXM4-80GB", "A100", "L40S"),
    ("NVIDIA A10G", "A10", "A100"),          # "A10" is a word of its own, not the start of "A100"
    ("NVIDIA GH200 480GB", "H200", "B200"),
    ("NVIDIA L40S", "L40S", "H100"),
    ("NVIDIA GeForce RTX 4090", None, "T4"),  # an unknown class meets no class requirement
])
def test_class_matching(name, meets, fails):
    device = {**H100_BOX, "name": name}
    assert gpus.unmet_requirement(device, meets) is None
    assert gpus.unmet_requirement(device, fails).startswith(f"needs GPU class {fails} or newer")


def test_requirements_on_a_cpu_and_bad_class():
    cpu = {"kind": "cpu", "name": "AMD EPYC 7763 64-Core Processor", "count": 2}
    assert gpus.unmet_requirement(cpu) == "needs an NVIDIA GPU (this machine: AMD EPYC 7763 64-Core Processor)"
    assert gpus.unmet_requirement(cpu, "H100", count=4) == gpus.unmet_requirement(cpu)
    with pytest.raises(ValueError, match="unknown GPU class 'V100'.*T4, A10"):
        gpus.unmet_requirement(H100_BOX, "V100")


# ------------------------------------------------------------------ allocation

def test_allocate_disjoint_blocks():
    ids = ["0", "1", "2", "3"]
    blocks = [gpus.allocate_gpus(i, 2, ids, 2) for i in range(2)]
    assert blocks == [["0", "1"], ["2", "3"]]
    assert [gpus.allocate_gpus(i, 4, ids, 1) for i in range(4)] == [["0"], ["1"], ["2"], ["3"]]
    assert gpus.allocate_gpus(0, 1, ids, 4) == ids


def test_allocate_not_enough_gpus():
    with pytest.raises(ValueError, match=r"2 workers x TP 4 need 8 GPUs, but only 4 are visible \(0,1,2,3\)"):
        gpus.allocate_gpus(0, 2, ["0", "1", "2", "3"], 4)
    with pytest.raises(ValueError, match="worker 2 of 2"):
        gpus.allocate_gpus(2, 2, ["0", "1", "2", "3"], 1)


def test_process_gpus_of_xdist_workers():
    uuids = ["GPU-a", "GPU-b", "GPU-c", "GPU-d"]
    assert gpus.process_gpus(uuids, 2, "gw1", 2) == "GPU-c,GPU-d"
    assert gpus.process_gpus(["4", "5", "6", "7"], 1, "gw0", 4) == "4"
    assert gpus.process_gpus(uuids, 2, "gw0", 1) == "GPU-a,GPU-b"
    with pytest.raises(ValueError, match="not a pytest-xdist worker id"):
        gpus.process_gpus(uuids, 1, "worker-1", 2)


def test_process_gpus_with_and_without_xdist():
    eight = [str(i) for i in range(8)]
    assert gpus.process_gpus(eight, 4) == "0,1,2,3"                      # no xdist: the first TP GPUs
    assert gpus.process_gpus(["0", "1"], 4) == "0,1"                     # fewer: TP=4 cases skip
    assert gpus.process_gpus(eight, 4, "gw1", 2) == "4,5,6,7"
    assert gpus.process_gpus(eight, 1, "gw7", 8) == "7"
    with pytest.raises(ValueError, match="need 12 GPUs"):
        gpus.process_gpus(eight, 4, "gw0", 3)


def test_visible_gpu_ids(install, monkeypatch):
    install(box(3))
    assert gpus.visible_gpu_ids() == ["0", "1", "2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 0")
    assert gpus.visible_gpu_ids() == ["2", "0"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert gpus.visible_gpu_ids() == []
