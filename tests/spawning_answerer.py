"""A stand-in for the engine process that, like vLLM's multiprocess executor, starts a worker.

Used by test_child.py as Engine's `answer_pipe`, so the process machinery runs without vLLM.  With
SPAWNING_ANSWERER_NO_PRCTL=1 in the environment, importing this module in the engine process makes
prctl unavailable there, so the parent-watch thread must do the kernel's job.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import time

from specperf.messages import one_line
from specperf.run.engines.engine import EngineConfig
from specperf.run.engines.protocol import Close, Failed, Ready

CONFIG = EngineConfig(model="none", tokenizer=None, tensor_parallel_size=1, seed=0, speculative_config=None)

if os.environ.get("SPAWNING_ANSWERER_NO_PRCTL") == "1":

    def _no_libc(*args, **kwargs):
        raise OSError("libc hidden by the test")

    ctypes.CDLL = _no_libc


def answer_pipe_with_worker(conn, config) -> None:
    """Start a daemonic worker (as vLLM's executor does), report ready, then wait for "close".

    A closed pipe does not end it: it stands for an engine busy in a long call."""
    try:
        worker = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,), daemon=True)
        worker.start()
    except BaseException as err:  # noqa: BLE001 - reported to the parent like an engine start failure
        conn.send(Failed(one_line(err)))
        return
    conn.send(Ready(start_s=0.0, pid=os.getpid(), provenance={"worker": worker.pid}, effective_config={}))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            time.sleep(600)
            return
        if isinstance(request, Close):
            return
