"""What a live engine runs and uses (run/engines/runner_facts.py, run/engines/usage.py), read through stand-ins of
vLLM's LLM whose collective_rpc sends the function to each tensor-parallel worker as vLLM's
multiprocessing executor does: pickled, then called there with the worker (no vLLM, no GPU)."""

from __future__ import annotations

import pickle
import sys
import types

import pytest

from specperf.run.engines import usage
from specperf.run.engines.runner_facts import chosen_model_runner, runner_facts, worker_facts


class TensorParallelLLM:
    """`LLM.collective_rpc(method)`: the method pickled, and run in each worker with the worker
    first; `before_each(rank)` sets up what that worker's process holds."""

    def __init__(self, workers, before_each=lambda rank: None):
        self.workers, self.before_each = workers, before_each

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        sent = pickle.dumps(method)  # by reference: importable in every worker
        replies = []
        for rank, worker in enumerate(self.workers):
            self.before_each(rank)
            replies.append(pickle.loads(sent)(worker, *args, **(kwargs or {})))
        return replies


def fake_torch(monkeypatch, allocated_bytes: int | None) -> None:
    """A torch whose CUDA device has seen `allocated_bytes` at most; None: no CUDA device."""
    cuda = types.SimpleNamespace(
        is_available=lambda: allocated_bytes is not None, max_memory_allocated=lambda: allocated_bytes
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))


# ---------------------------------------------------------------- peak memory


def test_peak_memory_at_tensor_parallel_size_1_is_the_engine_processs(monkeypatch):
    fake_torch(monkeypatch, 3 * 2**30)
    nobody = TensorParallelLLM([], before_each=lambda rank: pytest.fail("no worker is asked at TP=1"))
    assert usage.peak_memory(nobody, 1) == {"peak_mib": 3072.0, "source": "torch.cuda.max_memory_allocated"}
    fake_torch(monkeypatch, None)
    assert usage.peak_memory(nobody, 1)["source"] == "engine process max RSS"


def test_peak_memory_with_tensor_parallel_workers_is_theirs(monkeypatch):
    fake_torch(monkeypatch, 0)  # the engine process holds none of the model
    worker_bytes = [30 * 2**30, 31 * 2**30]
    llm = TensorParallelLLM(["rank0", "rank1"], before_each=lambda rank: fake_torch(monkeypatch, worker_bytes[rank]))
    memory = usage.peak_memory(llm, 2)
    assert memory["peak_mib"] == 31 * 1024 and memory["per_worker_mib"] == [30 * 1024, 31 * 1024]
    assert memory["source"] == "torch.cuda.max_memory_allocated in each of 2 tensor-parallel workers, the largest"


# ---------------------------------------------------------------- the runner and the attention backend


def test_the_runner_is_vllms_choice_where_its_config_makes_it_else_the_environment_variable():
    def config_choosing(v2: bool):
        return type("VllmConfig", (), {"use_v2_model_runner": property(lambda self: v2)})()

    no_env = types.SimpleNamespace()
    assert chosen_model_runner(config_choosing(True), no_env) == "V2"
    assert chosen_model_runner(config_choosing(False), types.SimpleNamespace(VLLM_USE_V2_MODEL_RUNNER=True)) == "V1"
    older = types.SimpleNamespace()  # before the property: the variable chose, off unless set
    assert chosen_model_runner(older, types.SimpleNamespace(VLLM_USE_V2_MODEL_RUNNER=True)) == "V2"
    assert chosen_model_runner(older, types.SimpleNamespace(VLLM_USE_V2_MODEL_RUNNER=False)) == "V1"
    assert chosen_model_runner(older, no_env) == "V1"


class CPUModelRunner:
    def __init__(self, *backends_per_group: tuple[str, ...]):
        self.attn_groups = [
            [types.SimpleNamespace(backend=types.SimpleNamespace(get_name=lambda n=name: n)) for name in group]
            for group in backends_per_group
        ]


def test_each_worker_says_its_runners_class_and_the_backends_its_layers_run():
    worker = types.SimpleNamespace(model_runner=CPUModelRunner(("TREE_ATTN",), ("FLASH_ATTN", "TREE_ATTN")))
    assert runner_facts(worker) == {
        "runner_class": f"{__name__}.CPUModelRunner",
        "attention_backends": ["FLASH_ATTN", "TREE_ATTN"],
    }
    assert runner_facts(types.SimpleNamespace())["attention_backends"] is None


def test_the_engine_records_what_its_workers_run_and_never_a_guess():
    def worker(*groups):
        return types.SimpleNamespace(model_runner=CPUModelRunner(*groups))

    two = TensorParallelLLM([worker(("FLASH_ATTN",)), worker(("FLASH_ATTN",), ("TRITON_ATTN",))])
    assert worker_facts(two) == {
        "runner_class": f"{__name__}.CPUModelRunner",
        "attention_backend": "FLASH_ATTN, TRITON_ATTN",
    }
    one_cannot_tell = TensorParallelLLM([worker(("FLASH_ATTN",)), types.SimpleNamespace(model_runner=object())])
    assert worker_facts(one_cannot_tell) == {"runner_class": None, "attention_backend": None}

    class Unreachable:
        def collective_rpc(self, method, *args):
            raise RuntimeError("workers gone")

    assert worker_facts(Unreachable()) == {"runner_class": None, "attention_backend": None}
