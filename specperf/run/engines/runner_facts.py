"""What a live engine runs: the model runner vLLM chose, from its config, and, asked of each worker
through vLLM's collective_rpc, the runner's class and the attention backends of its layers.

Imports no vLLM: engine_process.py hands in what vLLM gives.  The worker-side function lives in a module of
its own, importable wherever the engine runs, so collective_rpc sends it to tensor-parallel
workers by reference (at tensor parallel size 1 the engine process is the worker).
"""

from __future__ import annotations


def chosen_model_runner(config, envs) -> str:
    """The model runner vLLM chose, "V1" or "V2": where vLLM decides it (`use_v2_model_runner`, a
    property of its config, `config`: V2 on CUDA with Triton, with fallbacks), else the environment
    variable that chose it before (`VLLM_USE_V2_MODEL_RUNNER` of vllm.envs, `envs`: off unless
    set), else V1, the only one."""
    if hasattr(type(config), "use_v2_model_runner"):
        return "V2" if config.use_v2_model_runner else "V1"
    return "V2" if getattr(envs, "VLLM_USE_V2_MODEL_RUNNER", False) else "V1"


def runner_facts(worker) -> dict:
    """In a worker: its model runner's class, and the names of the attention backends its layers
    run (the runner's attention groups; None where it has none)."""
    runner = getattr(worker, "model_runner", None)
    groups = getattr(runner, "attn_groups", None)
    return {
        "runner_class": None if runner is None else f"{type(runner).__module__}.{type(runner).__qualname__}",
        "attention_backends": None if not groups else sorted({g.backend.get_name() for kind in groups for g in kind}),
    }


def worker_facts(llm) -> dict:
    """What the engine's workers run (`runner_facts` of each): the model runner's class, and the
    attention backends, their names joined where layers or workers differ.  None where a worker
    cannot tell, where workers run different runners, or where they cannot be asked: never a guess."""
    try:
        replies = llm.collective_rpc(runner_facts)
    except Exception:  # noqa: BLE001 - a description only: the engine runs without it
        return {"runner_class": None, "attention_backend": None}
    classes = {reply["runner_class"] for reply in replies}
    backends = [reply["attention_backends"] for reply in replies]
    return {
        "runner_class": classes.pop() if len(classes) == 1 else None,
        "attention_backend": None
        if not backends or None in backends
        else ", ".join(sorted({name for names in backends for name in names})),
    }
