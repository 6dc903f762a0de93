"""The step timer on a real GPU: kernels run asynchronously, so a part is timed right only because
the timer synchronizes the device around it while tracing.  A stand-in engine step launches real
CUDA work in the runner methods vLLM's step calls (the forward, the sampler, the drafter); CUDA
events give each part's GPU time.  Skipped without torch and a CUDA device (the CPU tier checks the
timer inside real vLLM engines).
"""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "specperf" / "run" / "vllm_trace"
SIZES = {"propose_draft_token_ids": 2048, "_model_forward": 8192, "_sample": 1024}


@pytest.fixture
def step_timer(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN_DIR.parents[2]))
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    module = importlib.import_module("specperf_step_timer")
    monkeypatch.setattr(module, "STEPS", [])
    monkeypatch.setattr(module, "MISSING", [])
    return module


def engine(step_timer):
    """An engine core whose step runs a forward, a sampling and a drafting, each a few bf16 matrix
    products launched without waiting; CUDA events record what each took on the GPU."""
    operands = {name: torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for name, n in SIZES.items()}
    pending = []

    def part(name):
        def run(self):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(4):
                operands[name] @ operands[name]
            end.record()
            pending.append((name, start, end))

        return run

    GPUModelRunner = type("GPUModelRunner", (), {name: part(name) for name in SIZES})

    class EngineCore:
        def __init__(self):
            self.runner = GPUModelRunner()

        def step(self):
            self.runner._model_forward()
            self.runner._sample()
            self.runner.propose_draft_token_ids()
            return {0: "out"}, True

    step_timer._patch_engine_core(types.SimpleNamespace(EngineCore=EngineCore))
    step_timer._patch_runner(types.SimpleNamespace(GPUModelRunner=GPUModelRunner))

    def gpu_times():
        """Each part's GPU milliseconds since the last call."""
        torch.cuda.synchronize()
        times = {name: 0.0 for name in SIZES}
        for name, start, end in pending:
            times[name] += start.elapsed_time(end)
        pending.clear()
        return times

    return EngineCore(), gpu_times


def timed_steps(step_timer, core, gpu_times, n=20):
    """n steps after a warm-up (cuBLAS handles, clocks): the timer's steps and the GPU's times."""
    for _ in range(3):
        core.step()
    gpu_times(), step_timer.drain()
    for _ in range(n):
        core.step()
    return step_timer.drain(), gpu_times()


def test_each_part_holds_its_own_gpu_time(step_timer):
    core, gpu_times = engine(step_timer)
    steps, gpu_ms = timed_steps(step_timer, core, gpu_times)
    timed_ms = {name: sum(s[1 + i] for s in steps) * 1e3 for i, name in enumerate(step_timer.RUNNER_PARTS)}
    total_ms = sum(s[0] for s in steps) * 1e3
    print({"gpu_ms": gpu_ms, "timed_ms": timed_ms, "total_ms": total_ms})
    assert len(steps) == 20
    assert timed_ms["_model_forward"] == pytest.approx(gpu_ms["_model_forward"], rel=0.15)
    assert timed_ms["propose_draft_token_ids"] == pytest.approx(gpu_ms["propose_draft_token_ids"], rel=0.5)
    assert sum(timed_ms.values()) <= total_ms * 1.001


def test_without_the_synchronisation_the_forward_would_look_free(step_timer, monkeypatch):
    core, gpu_times = engine(step_timer)
    monkeypatch.setattr(step_timer, "_sync", lambda: None)
    steps, gpu_ms = timed_steps(step_timer, core, gpu_times)
    forward_ms = sum(s[2] for s in steps) * 1e3
    gpu_forward_ms = gpu_ms["_model_forward"]
    print({"timed_forward_ms": forward_ms, "gpu_forward_ms": gpu_forward_ms})
    assert forward_ms < 0.5 * gpu_forward_ms  # the launches return long before the GPU is done
