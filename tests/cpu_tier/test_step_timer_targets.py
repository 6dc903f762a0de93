"""The step timer's patch targets against the installed vLLM (no engine starts): vLLM's GPU model
runners import on CPU, so the runner vLLM would choose on CUDA can be named, and every target of
every runner the timer knows resolved, found called in vLLM's step, and seen wrapped once the
plugin is registered."""

from __future__ import annotations

import importlib
import inspect

import pytest

from specperf.run.tracing import trace as tracing

pytestmark = pytest.mark.cpu_tier

# The module whose GPUModelRunner each of vLLM's choices builds (vllm/v1/worker/gpu_worker.py).
RUNNER_MODULES = {False: "vllm.v1.worker.gpu_model_runner", True: "vllm.v1.worker.gpu.model_runner"}
ENGINE_HOOKS = {"vllm.v1.engine.core": ("EngineCore.step", "EngineCore.step_with_batch_queue")}
SCHEDULER_HOOKS = {"vllm.v1.core.sched.scheduler": ("Scheduler.schedule", "Scheduler.update_from_output")}
# Where vLLM's step calls each runner target: (a function of the same module, the call in its
# source).  V2's execute_model is the runner's entry point (the worker calls it): it runs the model.
CALLED_IN = {
    "GPUModelRunner.execute_model": [("GPUModelRunner.execute_model", "self.model(**model_inputs)")],
    "GPUModelRunner._model_forward": [("GPUModelRunner.execute_model", "self._model_forward(")],
    "GPUModelRunner._sample": [("GPUModelRunner.sample_tokens", "self._sample(")],
    "GPUModelRunner.propose_draft_token_ids": [("GPUModelRunner.sample_tokens", "self.propose_draft_token_ids(")],
    "GPUModelRunner.sample": [("GPUModelRunner.sample_tokens", "self.sample(")],
    "init_speculator().propose": [
        ("GPUModelRunner.__init__", "self.speculator = init_speculator("),
        ("GPUModelRunner.sample_tokens", "self.speculator.propose("),
    ],
}


@pytest.fixture
def step_timer(monkeypatch):
    monkeypatch.syspath_prepend(str(tracing.PLUGIN_DIR))
    module = importlib.import_module("specperf_step_timer")
    for name, empty in (("STEPS", []), ("MISSING", {}), ("ACCEPTANCE", {}), ("TIMED", set())):
        monkeypatch.setattr(module, name, empty)
    monkeypatch.setattr(module.register, "done", False, raising=False)
    return module


def holder_and_name(module, target: str) -> tuple[object, str]:
    """What the plugin sets for a target: a class's method, or the module's factory."""
    holder, name = target.split(".")
    return (module, holder[:-2]) if holder.endswith("()") else (getattr(module, holder), name)


def runner_on_cuda(monkeypatch) -> str:
    """The module of the runner vLLM chooses on CUDA, where Triton is present, for a default config:
    vLLM's own decision (VllmConfig.use_v2_model_runner; V1 where vLLM has no such choice)."""
    import vllm.config.vllm as config_module
    from vllm.config import VllmConfig

    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    monkeypatch.setattr(config_module, "HAS_TRITON", True, raising=False)
    return RUNNER_MODULES[bool(getattr(VllmConfig(), "use_v2_model_runner", False))]


@pytest.fixture
def registered(step_timer, monkeypatch):
    """The plugin registered in this process once every module it patches is imported; each
    attribute it sets goes back after the test.  Returns {module: {target: the original}}."""
    targets = {**ENGINE_HOOKS, **SCHEDULER_HOOKS}
    targets.update({runner.module: tuple(runner.parts.values()) for runner in step_timer.RUNNERS})
    originals = {}
    for module_name, names in targets.items():
        module = importlib.import_module(module_name)
        originals[module_name] = {}
        for target in names:
            holder, name = holder_and_name(module, target)
            originals[module_name][target] = getattr(holder, name)
            monkeypatch.setattr(holder, name, getattr(holder, name))
    step_timer.register()
    return originals


def test_the_runner_vllm_chooses_on_cuda_is_one_the_timer_patches(step_timer, monkeypatch):
    assert runner_on_cuda(monkeypatch) in {runner.module for runner in step_timer.RUNNERS}


def test_every_target_resolves_and_is_wrapped_once_registered(step_timer, registered, monkeypatch):
    assert step_timer.MISSING == {}
    chosen = runner_on_cuda(monkeypatch)
    assert chosen in registered  # and so among the modules patched, with every target
    for module_name, originals in registered.items():
        module = importlib.import_module(module_name)
        for target, original in originals.items():
            holder, name = holder_and_name(module, target)
            assert getattr(holder, name).__wrapped__ is original, (module_name, target)


@pytest.mark.parametrize("module_name", RUNNER_MODULES.values())
def test_vllms_step_calls_every_runner_target(step_timer, module_name):
    module = importlib.import_module(module_name)
    (runner,) = [r for r in step_timer.RUNNERS if r.module == module_name]
    for target in runner.parts.values():
        for caller, call in CALLED_IN[target]:
            assert call in inspect.getsource(getattr(*holder_and_name(module, caller))), (target, caller)
