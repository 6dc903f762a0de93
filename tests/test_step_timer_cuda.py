"""The step timer on a real GPU: kernels run asynchronously, so a part is timed right only because
the timer synchronizes the device around it while tracing.  A stand-in engine step launches real
CUDA work in the runner methods vLLM's step calls (the forward, the sampler, the drafter), laid
out as Model Runner V1 and V2 lay them out; CUDA events give each part's GPU time.  Skipped
without torch and a CUDA device (the CPU tier checks the timer inside real vLLM engines).
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
SIZES = {"draft": 2048, "forward": 8192, "sample": 1024}  # each part's matrix side


@pytest.fixture
def step_timer(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN_DIR.parents[2]))
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    module = importlib.import_module("specperf_step_timer")
    monkeypatch.setattr(module, "STEPS", [])
    monkeypatch.setattr(module, "MISSING", {})
    monkeypatch.setattr(module, "TIMED", set())
    return module


def stand_in_module(runner: str, part):
    """The runner's module as vLLM lays it out, each method the plugin times running `part(name)`:
    V1 the runner's own methods, V2 its forward and sampling and the propose of the speculator that
    the module's init_speculator builds."""
    if runner == "Model Runner V1":
        methods = {
            "_model_forward": part("forward"),
            "_sample": part("sample"),
            "propose_draft_token_ids": part("draft"),
        }
        return types.SimpleNamespace(GPUModelRunner=type("GPUModelRunner", (), methods))
    speculator = type("Speculator", (), {"propose": part("draft")})
    runner_class = type("GPUModelRunner", (), {"execute_model": part("forward"), "sample": part("sample")})
    return types.SimpleNamespace(GPUModelRunner=runner_class, init_speculator=lambda: speculator())


def step_parts(runner: str, module) -> tuple:
    """The forward, the sampling and the drafting, in the order vLLM's step calls them."""
    model_runner = module.GPUModelRunner()
    if runner == "Model Runner V1":
        return model_runner._model_forward, model_runner._sample, model_runner.propose_draft_token_ids
    return model_runner.execute_model, model_runner.sample, module.init_speculator().propose


def engine(step_timer, runner: str):
    """An engine core whose step runs a forward, a sampling and a drafting on `runner`'s stand-ins,
    each a few bf16 matrix products launched without waiting; CUDA events record what each took
    on the GPU."""
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

    module = stand_in_module(runner, part)
    step_timer._patch_runner(next(r for r in step_timer.RUNNERS if r.name == runner), module)

    class EngineCore:
        def __init__(self):
            self.parts = step_parts(runner, module)

        def step(self):
            for run_part in self.parts:
                run_part()
            return {0: "out"}, True

    step_timer._patch_engine_core(types.SimpleNamespace(EngineCore=EngineCore))

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


@pytest.mark.parametrize("runner_name", ["Model Runner V1", "Model Runner V2"])
def test_each_part_holds_its_own_gpu_time(step_timer, runner_name):
    core, gpu_times = engine(step_timer, runner_name)
    steps, gpu_ms = timed_steps(step_timer, core, gpu_times)
    timed_ms = {name: sum(s[step_timer.STEP_FIELDS.index(name)] for s in steps) * 1e3 for name in SIZES}
    total_ms = sum(s[0] for s in steps) * 1e3
    print({"runner": runner_name, "gpu_ms": gpu_ms, "timed_ms": timed_ms, "total_ms": total_ms})
    assert len(steps) == 20 and step_timer.TIMED == {runner_name}
    assert timed_ms["forward"] == pytest.approx(gpu_ms["forward"], rel=0.15)
    assert timed_ms["draft"] == pytest.approx(gpu_ms["draft"], rel=0.5)
    assert sum(timed_ms.values()) <= total_ms * 1.001


def test_without_the_synchronisation_the_forward_would_look_free(step_timer, monkeypatch):
    core, gpu_times = engine(step_timer, "Model Runner V1")
    monkeypatch.setattr(step_timer, "_sync", lambda: None)
    steps, gpu_ms = timed_steps(step_timer, core, gpu_times)
    forward_ms = sum(s[2] for s in steps) * 1e3
    gpu_forward_ms = gpu_ms["forward"]
    print({"timed_forward_ms": forward_ms, "gpu_forward_ms": gpu_forward_ms})
    assert forward_ms < 0.5 * gpu_forward_ms  # the launches return long before the GPU is done
