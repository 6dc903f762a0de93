"""The only module that imports vLLM.

Each engine lives in a child process of its own (one per engine key and build; a gate keeps two alive).
The child imports vLLM, builds `LLM(...)` and serves `generate` requests over a pipe; it times
each call itself, so the pipe never enters a measurement.  A child process per engine returns
all memory on exit, isolates crashes, lets a hung engine be killed, and avoids a vLLM bug of
in-process mode (a second engine in one process fails once numba is imported).
The process and everything it starts (vLLM's tensor-parallel workers) form one process group,
killed as a whole (see child.py).  The child turns, by exec, into a fresh interpreter (this
environment's, or the candidate's of an upgrade gate) that runs this module as
`python -m specperf.run.engine FD CONFIG`.  Every engine starts that one way: an engine served
in the spawned child itself ran up to 3% slower than an exec'ed one of the same build, which
is more than the gate must tell apart (two exec'ed engines agreed within 0.3%).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Hashable
from dataclasses import dataclass, field

from ..messages import one_line
from ..paths import PACKAGE_PARENT
from . import child, tracing, vllm_methods
from .device import has_nvidia_gpu
from .protocol import Close, Failed, Generate, Ready, Reply
from .runner_facts import chosen_model_runner, worker_facts
from .usage import peak_memory, process_tree_cpu_s
from .versions import installed_vllm

SPEC_COUNTERS = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"

# Pinned as the study pins them; a profile's engine_args cannot override these.
PINNED_ENGINE_ARGS = {"enable_prefix_caching": False, "disable_log_stats": False}


class EngineError(Exception):
    """An engine failed to start or died; the message is one line with the root cause.  `engine`:
    which of the engines a measurement drove (its label there), set by run.loop; None: not known."""

    engine: Hashable | None = None


class EngineTimeout(EngineError):
    """The engine did not start or answer in time and was killed; `phase` says which."""

    def __init__(self, message: str, phase: str):
        super().__init__(message)
        self.phase = phase


START = "engine start"
GENERATE = "generate"


@dataclass(frozen=True)
class EngineConfig:
    model: str  # resolved local path or hub id
    tokenizer: str | None
    tensor_parallel_size: int
    seed: int
    speculative_config: dict | None
    engine_args: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    trace: bool = False  # run.tracing: per-step acceptance and step times with every call
    serve: bool = False  # behind vLLM's OpenAI-compatible server (run/served.py), not LLM.generate

    def llm_kwargs(self) -> dict:
        kwargs = dict(self.engine_args)
        kwargs.update(
            model=self.model,
            tensor_parallel_size=self.tensor_parallel_size,
            seed=self.seed,
            **PINNED_ENGINE_ARGS,
        )
        if self.tokenizer:
            kwargs["tokenizer"] = self.tokenizer
        if self.speculative_config is not None:
            kwargs["speculative_config"] = dict(self.speculative_config)
        return kwargs


# ---------------------------------------------------------------- child side


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


def mapped_speculative_config(config: EngineConfig, vllm_version: str) -> dict | None:
    """The scenario's speculative_config mapped for the installed vLLM, checked against its declaration."""
    if config.speculative_config is None:
        return None
    spec = vllm_methods.vllm_speculative_config(config.speculative_config, vllm_version, config.model)
    declared = declared_methods()
    if declared is not None and spec["method"] not in declared:
        raise EngineError(
            f"vLLM {vllm_version} does not declare method {spec['method']!r} (declared: {', '.join(sorted(declared))})"
        )
    return spec


def with_attention_backend(kwargs: dict, engine_args: set[str]) -> dict:
    """`kwargs` with the attention backend this process's environment names, passed the way the
    installed vLLM (its EngineArgs fields, `engine_args`) takes it: as the argument where it has
    one, the variable then out of the environment (vllm_methods.attention_backend_arg)."""
    backend = vllm_methods.attention_backend_arg(os.environ, engine_args)
    if backend:
        del os.environ[vllm_methods.ATTENTION_BACKEND_ENV]
    return {**backend, **kwargs}


def vllm_provenance() -> dict:
    import torch
    import vllm

    installed = installed_vllm()
    return {
        "vllm": vllm.__version__,
        "vllm_distribution": " ".join(installed) if installed else None,
        "torch": torch.__version__,
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


def _serve(conn, config: EngineConfig) -> None:
    """Answers the pipe protocol; runs after exec (_serve_in), whose environment already holds config.env."""
    started = time.perf_counter()
    timer, public_acceptance = None, False
    draft, draft_memo = None, {}  # a traced draft-model scenario: its draft over every output
    draft_path = tracing.draft_path(config.speculative_config) if config.trace else None
    try:
        if config.trace:
            timer = tracing.load_step_timer()
        provenance = vllm_provenance()
        kwargs = config.llm_kwargs()
        spec = mapped_speculative_config(config, provenance["vllm"])
        if spec is not None:
            kwargs["speculative_config"] = spec
        options = vllm_methods.proposer_options(config.speculative_config)
        if options is not None:
            kwargs["additional_config"] = {vllm_methods.PROPOSER_OPTIONS_KEY: options}
        from vllm import LLM, SamplingParams
        from vllm.engine.arg_utils import EngineArgs

        engine_args = {f.name for f in dataclasses.fields(EngineArgs)}
        kwargs = with_attention_backend(kwargs, engine_args)
        if timer is not None and spec is not None and tracing.DETAILED_METRICS_ARG in engine_args:
            kwargs[tracing.DETAILED_METRICS_ARG] = "detailed"
            public_acceptance = True

        llm = LLM(**kwargs)
        counters = read_spec_counters(llm)  # cumulative: each call's "after" is the next one's "before"
        conn.send(Ready(time.perf_counter() - started, os.getpid(), provenance, effective_engine_config(llm)))
    except vllm_methods.UnsupportedMethod as err:
        conn.send(Failed(str(err), traceback.format_exc()))
        return
    except BaseException as err:  # noqa: BLE001 - every start failure is reported, then the child exits
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
            params = SamplingParams(temperature=0.0, max_tokens=request.max_tokens)
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
                )
            )
        except BaseException as err:  # noqa: BLE001
            conn.send(Failed(one_line(err), traceback.format_exc()))
            return


SPECPERF_SOURCE = str(PACKAGE_PARENT)  # the folder this specperf package sits in


def _serve_in(python: str, conn, config: EngineConfig) -> None:
    """Become `python` and serve there.  This specperf's source goes first on its path, so both
    sides of a gate run the same serving code and only vLLM and its environment differ."""
    fd = conn.fileno()
    os.set_inheritable(fd, True)
    env = {
        **os.environ,
        **config.env,  # from its start, as /proc and every library see it
        "PYTHONPATH": os.pathsep.join(filter(None, [SPECPERF_SOURCE, os.environ.get("PYTHONPATH")])),
    }
    os.execve(python, [python, "-m", "specperf.run.engine", str(fd), json.dumps(dataclasses.asdict(config))], env)


# ---------------------------------------------------------------- parent side


class Engine:
    """A vLLM engine in its own process.  Use as a context manager, or call close().

    The engine runs in `python` (default: this interpreter), or another environment's interpreter
    for that environment's vLLM.  `serve(conn, config)`, for tests, answers the pipe protocol in
    the spawned child instead."""

    def __init__(self, config: EngineConfig, start_timeout_s: float = 1800.0, serve=None, python: str | None = None):
        self.config = config
        if serve is None:
            serve = functools.partial(_serve_in, python or sys.executable)
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = child.start(context, serve, child_conn, config)
        child_conn.close()
        self._busy = True
        ready = self._receive(start_timeout_s, START)
        assert isinstance(ready, Ready), ready
        self.start_s = ready.start_s
        self.pid = ready.pid
        self.provenance = ready.provenance
        self.effective_config = ready.effective_config
        self._busy = False

    def generate(self, prompts: list[list[int]], max_tokens: int, timeout_s: float = 3600.0) -> Reply:
        """One timed `generate()` call over token-id prompts; greedy, so outputs are comparable."""
        self._busy = True
        self._send(Generate(prompts, max_tokens))
        reply = self._receive(timeout_s, GENERATE)
        assert isinstance(reply, Reply), reply
        self._busy = False
        return reply

    def _send(self, message: Generate | Close) -> None:
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):
            raise EngineError(f"engine process {self._process.pid} is gone ({self._exit_reason()})") from None

    def _receive(self, timeout_s: float, what: str) -> Ready | Reply:
        deadline = time.monotonic() + timeout_s
        while not self._conn.poll(1.0):
            if not self._process.is_alive():
                self.kill()
                raise EngineError(f"engine process died during {what} ({self._exit_reason()})")
            if time.monotonic() > deadline:
                self.kill()
                raise EngineTimeout(f"{what} did not finish within {timeout_s:.0f} s; engine killed", what)
        try:
            reply = self._conn.recv()
        except EOFError:
            self._process.join(5)
            self.kill()
            raise EngineError(f"engine process died during {what} ({self._exit_reason()})") from None
        if isinstance(reply, Failed):
            self.close()
            raise EngineError(reply.message)
        return reply

    def _exit_reason(self) -> str:
        code = self._process.exitcode
        if code is None:
            return "still running"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def kill(self) -> None:
        """Kill the engine and everything it started."""
        child.kill_tree(self._process)
        self._process.join(10)

    def close(self) -> None:
        """Ask the engine to exit; one still busy with a request (the run was interrupted) is killed."""
        if self._process.is_alive() and not self._busy:
            try:
                self._conn.send(Close())
            except (BrokenPipeError, OSError):
                pass
            self._process.join(60)
        self.kill()
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def default_env() -> dict:
    """Environment for engine processes: the engine core in-process, as the study runs it.

    On CPU, one OpenMP thread per engine (oversubscribed cores made generation ~20x slower) and
    one numba thread: vLLM's n-gram proposer uses at most one anyway, but it switches numba's
    thread count on every step, which cost 25x in n-gram throughput on 2 cores (9.6 against
    233 tok/s, tiny-llama, vLLM 0.32).  The environment is recorded with every result."""
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    if not has_nvidia_gpu():
        env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
        env["NUMBA_NUM_THREADS"] = os.environ.get("NUMBA_NUM_THREADS", "1")
    return env


if __name__ == "__main__":  # an engine process after exec: see _serve_in
    from multiprocessing.connection import Connection

    _serve(Connection(int(sys.argv[1])), EngineConfig(**json.loads(sys.argv[2])))
    # Every reply is sent: skip the interpreter's teardown of vLLM and torch, 2-3 s of CPU per
    # engine with vLLM 0.32 on 2 cores, which nothing reads (the parent kills the group after).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
