"""The engine process: the only module that imports vLLM.  It builds `LLM(...)` and answers the pipe
protocol (run/engines/protocol.py) until the suite closes the pipe.

An Engine (run/engines/engine.py) starts it by exec, as `python -m specperf.run.engines.process FD CONFIG`,
in the interpreter of the engine's environment.  It times each generate() call itself, so the pipe
never enters a measurement, and sends back with the outputs vLLM's SD counters, the process tree's
peak memory and CPU time, and, for a traced scenario, what each step proposed and accepted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback

from ...messages import one_line
from ..builds import fixes as vllm_fixes
from ..builds import methods as vllm_methods
from ..builds.arguments import REQUEST_METRICS_ARG, VllmFacts, vllm_arguments
from ..builds.versions import installed_vllm
from ..tracing import trace as tracing
from .engine import EngineConfig
from .protocol import Close, Failed, Ready, Reply
from .runner_facts import chosen_model_runner, worker_facts
from .usage import peak_memory, process_tree_cpu_s

SPEC_COUNTERS = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


def declared_methods() -> set[str] | None:
    """The method names the installed vLLM declares (its SpeculativeMethod Literal, flattened);
    None where that declaration cannot be imported."""
    import importlib
    from typing import get_args

    def flatten(tp) -> list[str]:
        args = get_args(tp)
        return [tp] if not args and isinstance(tp, str) else [n for a in args for n in flatten(a)]

    for module in ("vllm.config.speculative", "vllm.config"):  # from 0.11; 0.10.x
        try:
            return set(flatten(importlib.import_module(module).SpeculativeMethod))
        except (ImportError, AttributeError):
            continue
    return None


def installed_facts(version: str) -> VllmFacts:
    """What vllm_arguments needs of the vLLM this process imports (`version`: its __version__)."""
    from vllm.engine.arg_utils import EngineArgs

    declared = declared_methods()
    return VllmFacts(
        version,
        frozenset(f.name for f in dataclasses.fields(EngineArgs)),
        None if declared is None else frozenset(declared),
    )


def engine_arguments(config: EngineConfig, vllm: VllmFacts) -> dict:
    """LLM(...)'s arguments for `config`; this process's environment loses what vLLM takes as an
    argument instead (vllm_arguments)."""
    arguments = vllm_arguments(config, vllm, os.environ)
    for name in os.environ.keys() - arguments.env.keys():
        del os.environ[name]
    return arguments.kwargs


def vllm_provenance() -> dict:
    import torch
    import vllm

    installed = installed_vllm()
    return {
        "vllm": vllm.__version__,
        "vllm_distribution": " ".join(installed) if installed else None,
        "torch": torch.__version__,
        **vllm_fixes.provenance(*(installed or (None, None))),
    }


def effective_engine_config(llm) -> dict:
    """Settings whose defaults drift between vLLM versions, read back from the live engine: its
    config, and what its workers run (`worker_facts`)."""
    import vllm.envs as envs

    config = llm.llm_engine.vllm_config
    sched, comp, model = config.scheduler_config, config.compilation_config, config.model_config

    def plain(value):
        return value if isinstance(value, (bool, int, float, str, type(None), list)) else str(value)

    facts = worker_facts(llm)
    return {
        "async_scheduling": plain(getattr(sched, "async_scheduling", None)),
        "max_num_seqs": plain(getattr(sched, "max_num_seqs", None)),
        "max_num_batched_tokens": plain(getattr(sched, "max_num_batched_tokens", None)),
        "cudagraph_mode": plain(getattr(comp, "cudagraph_mode", None)),
        "cudagraph_capture_sizes": plain(getattr(comp, "cudagraph_capture_sizes", None)),
        "compilation_mode": plain(getattr(comp, "mode", None)),
        "enforce_eager": plain(getattr(model, "enforce_eager", None)),
        "dtype": plain(getattr(model, "dtype", None)),
        "max_model_len": plain(getattr(model, "max_model_len", None)),
        "model_runner": chosen_model_runner(config, envs),
        "model_runner_class": facts["runner_class"],
        "attention_backend": facts["attention_backend"],
        "multiprocessing": plain(getattr(envs, "VLLM_ENABLE_V1_MULTIPROCESSING", None)),
        # None where this vLLM has no batch-invariant mode (run/output_check.py asks it of check engines)
        "batch_invariant": plain(getattr(envs, "VLLM_BATCH_INVARIANT", None)),
        "speculative_config": plain(str(config.speculative_config) if config.speculative_config else None),
    }


def read_spec_counters(llm) -> dict:
    """Cumulative spec-decode counters, summed over label sets; callers take before/after deltas."""
    totals = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": []}
    for metric in llm.get_metrics():
        if metric.name in SPEC_COUNTERS:
            totals[SPEC_COUNTERS[metric.name]] += metric.value
        elif metric.name == SPEC_PER_POSITION:
            per_pos = totals["accepted_per_pos"]
            for i, value in enumerate(metric.values):
                if i < len(per_pos):
                    per_pos[i] += value
                else:
                    per_pos.append(value)
    return totals


def request_acceptance(output) -> dict | None:
    """A request's SD counts from vLLM's per-request metrics (vllm_arguments asks for them where the
    installed vLLM has them): verify steps by accepted draft tokens, and tokens drafted; None without."""
    metrics = getattr(output.outputs[0], "spec_decode_metrics", None)
    return None if metrics is None else {"histogram": list(metrics.histogram), "drafted": metrics.num_draft_tokens}


def answer_pipe(conn, config: EngineConfig) -> None:
    """Answers the pipe protocol: Ready once the engine is built (else Failed), then a Reply to each
    Generate until Close.  Runs after exec (engine._answer_pipe_in), whose environment holds config.env."""
    started = time.perf_counter()
    timer, public_acceptance = None, False
    draft, draft_memo = None, {}  # a traced draft-model scenario: its draft over every output
    draft_path = tracing.draft_path(config.speculative_config) if config.trace else None
    try:
        if config.trace:
            timer = tracing.load_step_timer()
        provenance = vllm_provenance()
        vllm = installed_facts(provenance["vllm"])
        kwargs = engine_arguments(config, vllm)
        if timer is not None and "speculative_config" in kwargs and REQUEST_METRICS_ARG in vllm.engine_args:
            kwargs[REQUEST_METRICS_ARG] = "detailed"
            public_acceptance = True
        from vllm import LLM, SamplingParams

        llm = LLM(**kwargs)
        counters = read_spec_counters(llm)  # cumulative: each call's "after" is the next one's "before"
        conn.send(Ready(time.perf_counter() - started, os.getpid(), provenance, effective_engine_config(llm)))
    except vllm_methods.UnsupportedMethod as err:
        conn.send(Failed(str(err), traceback.format_exc()))
        return
    except BaseException as err:  # noqa: BLE001 - every start failure is reported, then the process exits
        conn.send(Failed(one_line(err), traceback.format_exc()))
        return
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if isinstance(request, Close):
            return
        prompts = request.prompts
        try:
            params = (
                [SamplingParams(max_tokens=request.max_tokens, **keywords) for keywords in request.params]
                if request.params
                else SamplingParams(temperature=0.0, max_tokens=request.max_tokens)
            )
            before = counters  # no read right before the timed call: get_metrics() costs ~2 ms
            if timer is not None:
                timer.drain()
            cpu0 = process_tree_cpu_s()
            t0 = time.perf_counter()
            outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
            wall_s = time.perf_counter() - t0
            cpu_s = process_tree_cpu_s() - cpu0
            after = counters = read_spec_counters(llm)
            token_ids = [list(o.outputs[0].token_ids) for o in outputs]
            trace = None if timer is None else tracing.call_trace(timer, outputs, public_acceptance)
            if trace is not None and draft_path:
                if draft is None:
                    from .draft_lm import DraftLM

                    draft = DraftLM(draft_path, llm.llm_engine.vllm_config.model_config.dtype)
                tracing.add_draft_acceptance(trace, draft, prompts, token_ids, draft_memo)
            conn.send(
                Reply(
                    wall_s=wall_s,
                    cpu_s=cpu_s,
                    output_tokens=sum(len(ids) for ids in token_ids),
                    token_ids=token_ids,
                    texts=[o.outputs[0].text for o in outputs],
                    finish_reasons=[o.outputs[0].finish_reason for o in outputs],
                    counters_before=before,
                    counters_after=after,
                    memory=peak_memory(llm, config.tensor_parallel_size),
                    trace=trace,
                    request_acceptance=[request_acceptance(o) for o in outputs] if config.speculative_config else None,
                )
            )
        except BaseException as err:  # noqa: BLE001
            conn.send(Failed(one_line(err), traceback.format_exc()))
            return


if __name__ == "__main__":  # started by exec: see engine._answer_pipe_in
    from multiprocessing.connection import Connection

    answer_pipe(Connection(int(sys.argv[1])), EngineConfig(**json.loads(sys.argv[2])))
    # Every reply is sent: skip the interpreter's teardown of vLLM and torch, 2-3 s of CPU per
    # engine with vLLM 0.32 on 2 cores, which nothing reads (the parent kills the group after).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
