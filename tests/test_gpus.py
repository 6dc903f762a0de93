"""GPU description, NVML plumbing, requirements and allocation, against a fake pynvml (no GPU needed)."""

import os
import sys
from types import SimpleNamespace

import pytest
from fake_nvml import FOREIGN_PID, MIB, FakeMig, box, fake_nvml, install, no_nvml  # noqa: F401 (fixtures)

from specperf.run.hardware import device as hardware
from specperf.run.hardware import gpus, telemetry
from specperf.run.hardware.nvml import REASONS, GpuIds, MigIds, decode_throttle_reasons, visible_devices

# ------------------------------------------------------------------ preflight


def test_preflight_describes_the_gpus(install):
    gpu_list = box(2)
    parent = os.getppid()  # a process of this PID namespace that the suite did not start
    gpu_list[1].processes = [(os.getpid(), 2048 * MIB), (parent, 256 * MIB), (FOREIGN_PID, 512 * MIB)]
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
    # our own process is not foreign; the other two are, with their memory in MiB: the parent by its
    # pid, the pid that is no process here (another namespace's) because the suite runs nothing more
    assert device["foreign_processes"] == [
        {"gpu_index": 1, "pid": parent, "used_memory_mib": 256, "pid_namespace": "this"},
        {"gpu_index": 1, "pid": FOREIGN_PID, "used_memory_mib": 512, "pid_namespace": "other"},
    ]


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
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
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
    assert device["hardware_key"] == "gpu-nvidia-geforce-rtx-4090-24g"


def test_preflight_without_pynvml_driver_or_gpus(no_nvml, monkeypatch):
    assert gpus.preflight() is None
    nvml = fake_nvml(box(2), driver_works=False)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert gpus.preflight() is None
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([]))
    assert gpus.preflight() is None


def test_describe_device_uses_preflight_or_the_cpu(install, monkeypatch):
    install(box(2))
    assert hardware.describe_device() == {**gpus.preflight(), "hardware_key": "gpu-nvidia-h100-80gb-hbm3-80g"}
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert hardware.describe_device() == hardware.describe_cpu()


MIG_GPU = GpuIds(
    "GPU-2222aaaa-0000-0000-0000-000000000002",
    (
        MigIds(0, "MIG-aaaa1111-0000-0000-0000-000000000000", 2, 0),
        MigIds(3, "MIG-bbbb2222-0000-0000-0000-000000000000", 9, 0),
    ),
)


@pytest.mark.parametrize(
    "env, expected",
    [
        ("2,3", [(2, None), (3, None)]),
        ("3,0", [(3, None), (0, None)]),
        ("GPU-2222aaaa-0000-0000-0000-000000000002,GPU-0000", [(2, None), (0, None)]),  # a full UUID, a unique prefix
        ("1,7,2", [(1, None)]),  # like CUDA, the list ends at an entry that names no GPU
        ("GPU-", []),  # a prefix that matches every GPU names none
        ("-1", []),
        ("", []),
        ("MIG-bbbb2222-0000-0000-0000-000000000000", [(2, 3)]),  # a MIG device by its UUID: GPU 2, MIG index 3
        ("MIG-aaaa", [(2, 0)]),  # a unique prefix
        ("MIG-GPU-2222aaaa-0000-0000-0000-000000000002/9/0", [(2, 3)]),  # the older form: GPU, GPU and compute instance
    ],
)
def test_visible_devices(env, expected):
    gpu_ids = [GpuIds(g.uuid) for g in box(4)]
    gpu_ids[2] = MIG_GPU
    assert visible_devices(gpu_ids, env) == expected
    assert visible_devices(gpu_ids, None) == [(i, None) for i in range(4)]


@pytest.mark.parametrize(
    "env",
    [
        "MIG-GPU-2222aaaa-0000-0000-0000-000000000002/9/1",  # no such compute instance
        "MIG-cccc3333-0000-0000-0000-000000000000",  # no such MIG device
        "MIG-",  # matches two
        "0,MIG-GPU-2222aaaa/9/0",  # the older form takes a full GPU UUID
    ],
)
def test_a_mig_entry_that_names_no_mig_device_is_an_error(env):
    gpu_ids = [GpuIds(g.uuid) for g in box(4)]
    gpu_ids[2] = MIG_GPU
    listed = "MIG-aaaa1111-0000-0000-0000-000000000000, MIG-bbbb2222-0000-0000-0000-000000000000"
    with pytest.raises(
        ValueError, match=rf"^CUDA_VISIBLE_DEVICES: '.+' names no MIG device NVML lists \(MIG devices: {listed}\)$"
    ):
        visible_devices(gpu_ids, env)


def test_preflight_respects_cuda_visible_devices(install, monkeypatch):
    gpu_list = box(4)
    gpu_list[0].processes = [(FOREIGN_PID, MIB)]  # on a GPU we may not use: not our business
    install(gpu_list)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{gpu_list[3].uuid},1")
    device = hardware.describe_device()
    assert [g["index"] for g in device["gpus"]] == [3, 1]
    assert device["count"] == 2 and device["hardware_key"] == "gpu-nvidia-h100-80gb-hbm3-80g"
    assert device["foreign_processes"] == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus.preflight() is None
    assert hardware.describe_device()["kind"] == "cpu"


# ------------------------------------------------------------------ throttle reasons


def test_decode_throttle_reasons():
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(None) == []
    assert decode_throttle_reasons(0x1 | 0x4) == ["gpu_idle", "sw_power_cap"]
    assert decode_throttle_reasons(0x7FF) == [name for name, _, _ in REASONS]
    assert decode_throttle_reasons(0x8 | 0x20 | 0x40 | 0x80 | 0x200 | 0x400) == sorted(
        telemetry.BAD_THROTTLE_REASONS, key=[name for name, _, _ in REASONS].index
    )
    # the module's own constants win over the documented bits
    custom = SimpleNamespace(nvmlClocksThrottleReasonHwThermalSlowdown=0x1000)
    assert decode_throttle_reasons(0x1000, custom) == ["hw_thermal"]


@pytest.mark.parametrize("old_api", [False, True])
def test_preflight_reads_throttle_reasons_from_either_api(install, old_api):
    install(box(1, reasons=0x4 | 0x40), old_api=old_api)
    assert gpus.preflight()["gpus"][0]["throttle_reasons"] == ["sw_power_cap", "hw_thermal"]


def test_throttle_reasons_on_a_driver_without_the_clocks_event_call(install):
    # A recent pynvml has nvmlDeviceGetCurrentClocksEventReasons, an older driver lacks the symbol:
    # the older ThrottleReasons call must answer, or throttle detection is silently off.
    install(box(1, reasons=0x40), driver_lacks={"nvmlDeviceGetCurrentClocksEventReasons"})
    assert gpus.preflight()["gpus"][0]["throttle_reasons"] == ["hw_thermal"]


def test_throttle_reasons_where_this_pynvml_lacks_the_clocks_event_call(install):
    nvml = install(box(1, reasons=0x8 | 0x400))
    del nvml.nvmlDeviceGetCurrentClocksEventReasons
    assert gpus.preflight()["gpus"][0]["throttle_reasons"] == ["hw_slowdown", "reliability"]


def test_processes_on_a_driver_without_the_v3_listing(install):
    # pynvml's unversioned listing calls the _v3 symbol and raises NVMLLibraryMismatchError (not an
    # NVMLError) where the driver lacks it: the _v2 listing must answer, and nothing may raise.
    gpu_list = box(1)
    gpu_list[0].processes = [(os.getppid(), 512 * MIB)]
    gpu_list[0].holders = [os.getppid()]
    install(gpu_list, driver_lacks={"nvmlDeviceGetComputeRunningProcesses_v3"})
    assert [p["pid"] for p in gpus.preflight()["foreign_processes"]] == [os.getppid()]


# ------------------------------------------------------------------ MIG


def mig_box():
    """Two H100s, the second in MIG mode with a 3g.40gb slice at MIG index 0 and a 2g.20gb one at index 2."""
    gpu_list = box(2)
    gpu_list[1].mig = [1, 1]
    gpu_list[1].migs = [
        FakeMig("MIG-aaaa1111-0000-0000-0000-000000000000", gpu_instance=2, compute_instance=0),
        None,
        FakeMig(
            "MIG-bbbb2222-0000-0000-0000-000000000000",
            name=b"NVIDIA H100 80GB HBM3 MIG 2g.20gb",
            total_mib=19968,
            gpu_instance=5,
            compute_instance=0,
        ),
    ]
    return gpu_list


@pytest.mark.parametrize(
    "env", ["MIG-aaaa1111-0000-0000-0000-000000000000", "MIG-GPU-1111aaaa-0000-0000-0000-000000000001/2/0"]
)
def test_a_mig_slice_is_described_as_the_slice(install, monkeypatch, env):
    gpu_list = mig_box()
    gpu_list[1].sm = 1755
    install(gpu_list)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    device = hardware.describe_device()
    assert device["kind"] == "gpu" and device["count"] == 1
    assert device["name"] == "NVIDIA H100 80GB HBM3 MIG 3g.40gb" and device["memory_gib"] == 40
    assert device["hardware_key"] == "gpu-nvidia-h100-80gb-hbm3-mig-3g-40gb-40g"
    gpu = device["gpus"][0]
    assert gpu["index"] == 1 and gpu["uuid"] == "MIG-aaaa1111-0000-0000-0000-000000000000"
    assert gpu["memory_total_mib"] == 40448
    # clocks, power, ECC and MIG mode are the GPU's: NVML answers none of them for the MIG handle
    assert gpu["sm_clock_mhz"] == 1755 and gpu["power_limit_w"] == 700.0 and gpu["ecc_mode"] is True
    assert gpu["mig_mode"] is True
    assert gpu["mig"] == {
        "index": 0,
        "gpu_instance_id": 2,
        "compute_instance_id": 0,
        "gpu_uuid": gpu_list[1].uuid,
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_memory_total_mib": 81559,
    }
    assert gpus.unmet_requirement(device, "H100") is None
    assert gpus.unmet_requirement(device, min_memory_gib=80).startswith("needs 80 GiB per GPU")


def test_a_mig_slice_has_a_key_of_its_own_whatever_the_driver_calls_it(install, monkeypatch):
    gpu_list = mig_box()
    gpu_list[1].migs[2].name = b"NVIDIA H100 80GB HBM3"  # a driver that names a slice like its GPU
    install(gpu_list)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-bbbb")
    assert hardware.describe_device()["hardware_key"] == "gpu-nvidia-h100-80gb-hbm3-mig-20g"


def test_processes_of_a_mig_slice_are_the_slices(install, monkeypatch):
    gpu_list = mig_box()
    slice_ = gpu_list[1].migs[0]
    slice_.processes = [(os.getppid(), 300 * MIB)]
    gpu_list[1].holders = [os.getppid()]
    gpu_list[1].processes = [(FOREIGN_PID, 9000 * MIB)]  # on another slice of the GPU: not ours to judge
    install(gpu_list)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", slice_.uuid)
    assert gpus.preflight()["foreign_processes"] == [
        {"gpu_index": 1, "pid": os.getppid(), "used_memory_mib": 300, "pid_namespace": "this"}
    ]


def test_a_mig_slice_nvml_cannot_list_is_an_error_not_the_cpu(install, monkeypatch):
    gpu_list = mig_box()
    nvml = install(gpu_list)
    del nvml.nvmlDeviceGetMaxMigDeviceCount  # a pynvml from before MIG
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpu_list[1].migs[0].uuid)
    with pytest.raises(
        ValueError, match=r"^CUDA_VISIBLE_DEVICES: 'MIG-aaaa.*' names no MIG device NVML lists \(MIG devices: none\)$"
    ):
        hardware.describe_device()


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
