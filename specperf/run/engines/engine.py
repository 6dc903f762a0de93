"""Engines in processes of their own: the suite's side of an engine (its process is engine_process.py).

Each engine lives in a child process of its own (one per engine key and build; a gate keeps two alive).
The child imports vLLM, builds `LLM(...)` and answers `generate` requests over a pipe (run/engines/protocol.py);
it times each call itself, so the pipe never enters a measurement.  A child process per engine returns
all memory on exit, isolates crashes, lets a hung engine be killed, and avoids a vLLM bug of
in-process mode (a second engine in one process fails once numba is imported).
The process and everything it starts (vLLM's tensor-parallel workers) form one process group,
killed as a whole (see child.py).  The child turns, by exec, into a fresh interpreter (this
environment's, or the candidate's of an upgrade gate) that runs
`python -m specperf.run.engines.process FD CONFIG`.  Every engine starts that one way: an engine run
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
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from ...paths import PACKAGE_PARENT
from ..builds.fixes import PLUGIN_DIR as FIXES_PLUGIN_DIR
from ..hardware.device import has_nvidia_gpu
from . import child
from .protocol import Batch, Close, Failed, Generate, Ready, Reply

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


DEFAULT_START_TIMEOUT_S = 1800.0  # an engine's start: imports, weights, compilation, CUDA graphs
START = "engine start"
GENERATE = "generate"


@dataclass(frozen=True)
class EngineConfig:
    """An engine as the suite describes it; vllm_arguments.py turns it into the arguments of the vLLM that runs it."""

    model: str  # resolved local path or hub id
    tokenizer: str | None
    tensor_parallel_size: int
    seed: int
    speculative_config: dict | None
    engine_args: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    trace: bool = False  # run.tracing.trace: per-step acceptance and step times with every call
    serve: bool = False  # behind vLLM's OpenAI-compatible server (run/serving/served.py), not LLM.generate
    request_metrics: bool = False  # each request's SD counts (a sampled scenario's: vllm_arguments)


SPECPERF_SOURCE = str(PACKAGE_PARENT)  # the folder this specperf package sits in


def engine_pythonpath(environ: Mapping[str, str]) -> str:
    """The PYTHONPATH of an engine process or server the suite starts: this specperf's source first,
    so that both sides of a gate run the same engine code and only vLLM and its environment differ,
    then the plugin of the vLLM fixes (builds/fixes.py), then what `environ` had."""
    return os.pathsep.join(filter(None, [SPECPERF_SOURCE, str(FIXES_PLUGIN_DIR), environ.get("PYTHONPATH")]))


def _answer_pipe_in(python: str, conn, config: EngineConfig) -> None:
    """Become `python` and answer the pipe there (engine_process.answer_pipe), on engine_pythonpath."""
    fd = conn.fileno()
    os.set_inheritable(fd, True)
    env = {
        **os.environ,
        **config.env,  # from its start, as /proc and every library see it
        "PYTHONPATH": engine_pythonpath(os.environ),
    }
    os.execve(
        python, [python, "-m", "specperf.run.engines.process", str(fd), json.dumps(dataclasses.asdict(config))], env
    )


class Engine:
    """A vLLM engine in its own process.  Use as a context manager, or call close().

    The engine runs in `python` (default: this interpreter), or another environment's interpreter
    for that environment's vLLM.  `answer_pipe(conn, config)`, for tests, answers the pipe protocol
    in the spawned child instead."""

    def __init__(
        self,
        config: EngineConfig,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        answer_pipe=None,
        python: str | None = None,
    ):
        self.config = config
        if answer_pipe is None:
            answer_pipe = functools.partial(_answer_pipe_in, python or sys.executable)
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = child.start(context, answer_pipe, child_conn, config)
        child_conn.close()
        self._busy = True
        ready = self._receive(start_timeout_s, START)
        assert isinstance(ready, Ready), ready
        self.start_s = ready.start_s
        self.pid = ready.pid
        self.provenance = ready.provenance
        self.effective_config = ready.effective_config
        self._busy = False

    def generate(self, prompts: list[list[int]] | Batch, max_tokens: int, timeout_s: float = 3600.0) -> Reply:
        """One timed `generate()` call over token-id prompts: greedy, or sampled where a Batch says how."""
        self._busy = True
        if isinstance(prompts, Batch):
            self._send(Generate(prompts.prompts, max_tokens, prompts.params))
        else:
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
