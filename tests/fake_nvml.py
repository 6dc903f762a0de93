"""A fake pynvml for the GPU tests: FakeGPU boxes, and fixtures that install it or hide pynvml."""

import sys
import types
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from specperf.run.nvml import REASONS

MIB = 2**20
FOREIGN_PID = 4_194_304  # pid_max is at most 2**22, so no process has this pid


class NVMLError(Exception):
    def __init__(self, value=3):  # 3: NVML_ERROR_NOT_SUPPORTED
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
    """A module with the pynvml functions specperf calls; counts init/shutdown to check pairing."""
    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = NVMLError
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
    api("nvmlDeviceGetComputeRunningProcesses")(
        lambda h: [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in _value(h.processes)]
    )
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
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
