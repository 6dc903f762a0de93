"""GPU description, NVML plumbing, requirements and allocation, against a fake pynvml (no GPU needed)."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from fake_nvml import FOREIGN_PID, MIB, box, fake_nvml, install, no_nvml  # noqa: F401 (fixtures)

from specperf.run import device as hardware
from specperf.run import gpus, telemetry
from specperf.run.nvml import REASONS, decode_throttle_reasons, own_pids, visible_indices

# ------------------------------------------------------------------ preflight


def test_preflight_describes_the_gpus(install):
    gpu_list = box(2)
    gpu_list[1].processes = [(os.getpid(), 2048 * MIB), (FOREIGN_PID, 512 * MIB)]
    nvml = install(gpu_list)
    device = gpus.preflight()
    assert nvml.calls == {"init": 1, "shutdown": 1}
    assert {k: v for k, v in device.items() if k not in ("gpus", "foreign_processes")} == {
        "kind": "gpu",
        "name": "NVIDIA H100 80GB HBM3",
        "count": 2,
        "memory_gib": 80,
        "driver": "570.124.06",
        "cuda_driver_version": "12.8",
    }
    assert device["gpus"][0] == {
        "index": 0,
        "uuid": gpu_list[0].uuid,
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559,
        "ecc_mode": True,
        "ecc_uncorrected_errors": 0,
        "persistence_mode": True,
        "mig_mode": False,
        "sm_clock_mhz": 1980,
        "max_sm_clock_mhz": 1980,
        "mem_clock_mhz": 2619,
        "temperature_c": 35,
        "power_w": 70.5,
        "power_limit_w": 700.0,
        "throttle_reasons": [],
    }
    assert device["gpus"][1]["index"] == 1
    # our own process is not foreign; the other one is, with its memory in MiB
    assert device["foreign_processes"] == [{"gpu_index": 1, "pid": FOREIGN_PID, "used_memory_mib": 512}]


def test_unsupported_queries_give_none(install):
    gpu_list = box(1, name="NVIDIA GeForce RTX 4090", total_mib=24564)
    gpu_list[0].unsupported = {
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetPersistenceMode",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetTemperature",
    }
    nvml = install(gpu_list)
    del nvml.nvmlSystemGetCudaDriverVersion  # an old pynvml without the call
    device = hardware.describe_device()
    gpu = device["gpus"][0]
    for key in (
        "ecc_mode",
        "ecc_uncorrected_errors",
        "mig_mode",
        "persistence_mode",
        "power_w",
        "power_limit_w",
        "temperature_c",
    ):
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
    install(box(2))
    assert hardware.describe_device() == {**gpus.preflight(), "hardware_key": "gpu-nvidia-h100-80gb-hbm3-80g-x2"}
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert hardware.describe_device() == hardware.describe_cpu()


@pytest.mark.parametrize(
    "env, expected",
    [
        ("2,3", [2, 3]),
        ("3,0", [3, 0]),
        ("GPU-2222aaaa-0000-0000-0000-000000000002,GPU-0000", [2, 0]),  # full UUID and a unique prefix
        ("1,7,2", [1]),  # like CUDA, the list ends at an entry that names no GPU
        ("GPU-", []),  # a prefix that matches every GPU names none
        ("-1", []),
        ("", []),
    ],
)
def test_visible_indices(env, expected):
    uuids = [g.uuid for g in box(4)]
    assert visible_indices(uuids, env) == expected
    assert visible_indices(uuids, None) == [0, 1, 2, 3]


def test_preflight_respects_cuda_visible_devices(install, monkeypatch):
    gpu_list = box(4)
    gpu_list[0].processes = [(FOREIGN_PID, MIB)]  # on a GPU we may not use: not our business
    install(gpu_list)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{gpu_list[3].uuid},1")
    device = hardware.describe_device()
    assert [g["index"] for g in device["gpus"]] == [3, 1]
    assert device["count"] == 2 and device["hardware_key"].endswith("-x2")
    assert device["foreign_processes"] == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus.preflight() is None
    assert hardware.describe_device()["kind"] == "cpu"


def test_own_pids_include_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        own = own_pids()
        assert os.getpid() in own and child.pid in own
        assert os.getppid() not in own
    finally:
        child.kill()
        child.wait()


# ------------------------------------------------------------------ throttle reasons


def test_decode_throttle_reasons():
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(None) == []
    assert decode_throttle_reasons(0x1 | 0x4) == ["gpu_idle", "sw_power_cap"]
    assert decode_throttle_reasons(0x1FF) == [name for name, _, _ in REASONS]
    assert decode_throttle_reasons(0x8 | 0x20 | 0x40 | 0x80) == sorted(
        telemetry.BAD_THROTTLE_REASONS, key=[name for name, _, _ in REASONS].index
    )
    # the module's own constants win over the documented bits
    custom = SimpleNamespace(nvmlClocksThrottleReasonHwThermalSlowdown=0x1000)
    assert decode_throttle_reasons(0x1000, custom) == ["hw_thermal"]


@pytest.mark.parametrize("old_api", [False, True])
def test_preflight_reads_throttle_reasons_from_either_api(install, old_api):
    install(box(1, reasons=0x4 | 0x40), old_api=old_api)
    assert gpus.preflight()["gpus"][0]["throttle_reasons"] == ["sw_power_cap", "hw_thermal"]


# ------------------------------------------------------------------ requirements

H100_BOX = {"kind": "gpu", "name": "NVIDIA H100 80GB HBM3", "count": 2, "memory_gib": 80}


def test_requirements_of_an_h100_box():
    assert gpus.unmet_requirement(H100_BOX) is None
    assert gpus.unmet_requirement(H100_BOX, "A100") is None
    assert gpus.unmet_requirement(H100_BOX, "h100", count=2, min_memory_gib=80) is None
    assert (
        gpus.unmet_requirement(H100_BOX, "B200")
        == "needs GPU class B200 or newer (this machine: NVIDIA H100 80GB HBM3)"
    )
    assert gpus.unmet_requirement(H100_BOX, count=4) == "needs 4 GPUs (this machine: 2x NVIDIA H100 80GB HBM3)"
    assert "needs 141 GiB per GPU" in gpus.unmet_requirement(H100_BOX, min_memory_gib=141)


@pytest.mark.parametrize(
    "name, meets, fails",
    [
        ("NVIDIA A100-SXM4-80GB", "A100", "L40S"),
        ("NVIDIA A10G", "A10", "A100"),  # "A10" is a word of its own, not the start of "A100"
        ("NVIDIA GH200 480GB", "H200", "B200"),
        ("NVIDIA L40S", "L40S", "H100"),
        ("NVIDIA GeForce RTX 4090", None, "T4"),  # an unknown class meets no class requirement
    ],
)
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
    assert gpus.process_gpus(eight, 4) == "0,1,2,3"  # no xdist: the first TP GPUs
    assert gpus.process_gpus(["0", "1"], 4) == "0,1"  # fewer: TP=4 cases skip
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
