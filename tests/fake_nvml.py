"""A fake pynvml for the GPU tests: FakeGPU boxes, and fixtures that install it or hide pynvml.

Beyond a plain box it plays NVML as it behaves
- in a container (`container=True`): process listings give the host's pids, HOST_PID_BASE + ours;
- with an older driver (`driver_lacks`): the pynvml function is there but raises
  NVMLError_FunctionNotFound, and the unversioned process listing NVMLLibraryMismatchError, as
  the real pynvml does; an older pynvml (`old_api`) lacks the newer names altogether;
- with MIG: a FakeGPU in MIG mode holds FakeMig devices, which answer what NVML answers for a MIG
  handle (name, UUID, memory, processes, instance ids) and nothing of the GPU's.
`install` also fakes which GPU device files each process holds open (ownership.gpu_minors_held):
the processes listed on a GPU (by their pid here) and its `holders`.
"""

import subprocess
import sys
import types
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from specperf.run.hardware import ownership
from specperf.run.hardware.nvml import REASONS

MIB = 2**20
FOREIGN_PID = 4_194_304  # pid_max is at most 2**22, so no process has this pid
HOST_PID_BASE = 5_000_000  # a container's process as the host numbers it: no process here has such a pid


class NVMLError(Exception):
    def __init__(self, value=3):  # 3: NVML_ERROR_NOT_SUPPORTED
        super().__init__(value)
        self.value = value


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801 (pynvml's name)
    def __init__(self):
        super().__init__(13)  # NVML_ERROR_FUNCTION_NOT_FOUND: the driver lacks the symbol


class NVMLLibraryMismatchError(Exception):
    """What pynvml's unversioned calls raise where the driver lacks the versioned symbol they use."""


# What NVML does not answer for a MIG device handle: the GPU's own facts and readings.
MIG_UNSUPPORTED = frozenset(
    {
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetMaxClockInfo",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetViolationStatus",
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetPersistenceMode",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMinorNumber",
        "nvmlDeviceGetMaxMigDeviceCount",
    }
)


@dataclass
class FakeMig:
    """One MIG device of a FakeGPU."""

    uuid: str
    name: object = b"NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    total_mib: int = 40448
    used_mib: object = 500
    gpu_instance: int = 1
    compute_instance: int = 0
    processes: object = field(default_factory=list)
    unsupported: set = field(default_factory=lambda: set(MIG_UNSUPPORTED))


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
    processes: object = field(default_factory=list)  # (pid here, bytes) of each process computing on it
    unsupported: set = field(default_factory=set)
    minor: int = 0  # its /dev/nvidia<minor>
    violations_ns: object = field(default_factory=dict)  # NVML_PERF_POLICY_* value -> ns; absent: unsupported
    migs: list = field(default_factory=list)  # FakeMig (or None: no device at that MIG index), by MIG index
    holders: list = field(default_factory=list)  # pids holding its device file that compute elsewhere


def _value(v):
    return v() if callable(v) else v


def fake_nvml(gpu_list, driver_works=True, old_api=False, container=False, driver_lacks=()):
    """A module with the pynvml functions specperf calls; counts init/shutdown to check pairing."""
    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = NVMLError
    nvml.NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    nvml.NVMLLibraryMismatchError = NVMLLibraryMismatchError
    nvml.calls = {"init": 0, "shutdown": 0}
    for constant, value in dict(
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        NVML_FEATURE_ENABLED=1,
        NVML_DEVICE_MIG_ENABLE=1,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
        NVML_VOLATILE_ECC=0,
    ).items():
        setattr(nvml, constant, value)
    prefix = "nvmlClocksThrottleReason" if old_api else "nvmlClocksEventReason"
    for _, suffix, bit in REASONS:
        setattr(nvml, prefix + suffix, bit)

    def api(function_name):
        def wrap(fn):
            def call(handle, *args):
                if function_name in driver_lacks:
                    raise NVMLError_FunctionNotFound()
                if function_name in handle.unsupported:
                    raise NVMLError(3)
                return fn(handle, *args)

            setattr(nvml, function_name, call)
            return call

        return wrap

    def init():
        if not driver_works:
            raise NVMLError(12)  # NVML_ERROR_LIBRARY_NOT_FOUND
        nvml.calls["init"] += 1

    def shutdown():
        nvml.calls["shutdown"] += 1

    def listed(handle):
        """Processes as NVML lists them: by the host's pids in a container."""
        return [
            SimpleNamespace(pid=HOST_PID_BASE + pid if container else pid, usedGpuMemory=memory)
            for pid, memory in _value(handle.processes)
        ]

    def mig_at(gpu, index):
        if index >= len(gpu.migs) or gpu.migs[index] is None:
            raise NVMLError(6)  # NVML_ERROR_NOT_FOUND
        return gpu.migs[index]

    def violation(handle, policy):
        counters = _value(handle.violations_ns)
        if policy not in counters:
            raise NVMLError(3)
        return SimpleNamespace(referenceTime=0, violationTime=counters[policy])

    nvml.nvmlInit = init
    nvml.nvmlShutdown = shutdown
    nvml.nvmlDeviceGetCount = lambda: len(gpu_list)
    nvml.nvmlDeviceGetHandleByIndex = lambda i: gpu_list[i]
    nvml.nvmlSystemGetDriverVersion = lambda: b"570.124.06"
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 12080
    nvml.nvmlDeviceGetUUID = lambda h: h.uuid.encode()
    api("nvmlDeviceGetName")(lambda h: h.name)
    api("nvmlDeviceGetMemoryInfo")(lambda h: SimpleNamespace(total=h.total_mib * MIB, used=_value(h.used_mib) * MIB))
    api("nvmlDeviceGetEccMode")(lambda h: h.ecc)
    api("nvmlDeviceGetTotalEccErrors")(lambda h, kind, counter: h.ecc_errors if (kind, counter) == (1, 0) else -1)
    api("nvmlDeviceGetPersistenceMode")(lambda h: h.persistence)
    api("nvmlDeviceGetMigMode")(lambda h: h.mig)
    api("nvmlDeviceGetClockInfo")(lambda h, clock: _value(h.sm) if clock == 1 else h.mem)
    api("nvmlDeviceGetMaxClockInfo")(lambda h, clock: h.max_sm if clock == 1 else h.mem)
    api("nvmlDeviceGetTemperature")(lambda h, sensor: _value(h.temp))
    api("nvmlDeviceGetPowerUsage")(lambda h: _value(h.power_mw))
    api("nvmlDeviceGetEnforcedPowerLimit")(lambda h: h.limit_mw)
    api("nvmlDeviceGetMinorNumber")(lambda h: h.minor)
    api("nvmlDeviceGetViolationStatus")(violation)
    api("nvmlDeviceGetMaxMigDeviceCount")(lambda h: 7)
    api("nvmlDeviceGetMigDeviceHandleByIndex")(mig_at)
    api("nvmlDeviceGetGpuInstanceId")(lambda m: m.gpu_instance)
    api("nvmlDeviceGetComputeInstanceId")(lambda m: m.compute_instance)
    api("nvmlDeviceGetComputeRunningProcesses_v2")(listed)
    if old_api:  # a pynvml from before the _v3 listing and the clocks-event rename
        api("nvmlDeviceGetComputeRunningProcesses")(listed)
        api("nvmlDeviceGetCurrentClocksThrottleReasons")(lambda h: _value(h.reasons))
    else:
        listing_v3 = api("nvmlDeviceGetComputeRunningProcesses_v3")(listed)
        api("nvmlDeviceGetCurrentClocksThrottleReasons")(lambda h: _value(h.reasons))
        api("nvmlDeviceGetCurrentClocksEventReasons")(lambda h: _value(h.reasons))

        def unversioned_listing(handle):
            try:
                return listing_v3(handle)
            except NVMLError_FunctionNotFound:
                raise NVMLLibraryMismatchError("use a versioned function") from None

        nvml.nvmlDeviceGetComputeRunningProcesses = unversioned_listing
    nvml.minors_held = lambda pid, major=ownership.NVIDIA_MAJOR: _minors_held(gpu_list, pid)
    return nvml


def _minors_held(gpu_list, pid) -> set[int]:
    """The GPU device files a process holds: of the GPUs it computes on (on a MIG device of, too) or holds."""
    held = set()
    for gpu in gpu_list:
        computing = [p for p, _ in _value(gpu.processes)]
        computing += [p for mig in gpu.migs if mig is not None for p, _ in _value(mig.processes)]
        if pid in computing or pid in gpu.holders:
            held.add(gpu.minor)
    return held


def box(n=4, **fields):
    return [FakeGPU(uuid=f"GPU-{i}{i}{i}{i}aaaa-0000-0000-0000-00000000000{i}", minor=i, **fields) for i in range(n)]


@pytest.fixture
def install(monkeypatch):
    """Installs a fake pynvml for the test, and its GPU device files; CUDA_VISIBLE_DEVICES starts unset."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install_(gpu_list, **kwargs):
        nvml = fake_nvml(gpu_list, **kwargs)
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
        monkeypatch.setattr(ownership, "gpu_minors_held", nvml.minors_held)
        return nvml

    return install_


@pytest.fixture
def engine():
    """A child process, as the suite's engines are: a pid of this process's tree."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child.pid
    child.kill()
    child.wait()


@pytest.fixture
def no_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
