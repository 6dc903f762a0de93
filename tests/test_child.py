"""Engine processes may start workers (as vLLM's tensor-parallel executor does) and never outlive
the suite: kill(), close() and a SIGKILLed parent all leave no engine process or worker behind.

The engine's `answer_pipe` is replaced by spawning_answerer.answer_pipe_with_worker, so no vLLM is needed.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from spawning_answerer import CONFIG, answer_pipe_with_worker

from specperf.run.engines import child
from specperf.run.engines.engine import Engine
from specperf.run.engines.protocol import Failed

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def tree(pid: int) -> list[int]:
    return [pid] + [p.pid for p in psutil.Process(pid).children(recursive=True)]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def survivors(pids: list[int], within_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


@pytest.fixture
def engine():
    started = Engine(CONFIG, start_timeout_s=60, answer_pipe=answer_pipe_with_worker)
    yield started
    started.kill()


def test_the_engine_process_can_start_a_worker(engine):
    pids = tree(engine.pid)
    assert engine.provenance["worker"] in pids
    assert os.getpgid(engine.pid) == engine.pid  # it leads its own group ...
    assert {os.getpgid(pid) for pid in pids} == {engine.pid}  # ... which holds all it started


def test_a_daemonic_engine_process_could_not():
    context = multiprocessing.get_context("spawn")
    conn, child_conn = context.Pipe()
    process = context.Process(target=answer_pipe_with_worker, args=(child_conn, CONFIG), daemon=True)
    process.start()
    try:
        assert conn.poll(60)
        reply = conn.recv()
    finally:
        process.kill()
        process.join(10)
    assert reply == Failed("AssertionError: daemonic processes are not allowed to have children")


def test_kill_removes_the_engine_and_its_worker(engine):
    pids = tree(engine.pid)
    assert engine.provenance["worker"] in pids
    engine.kill()
    assert survivors(pids) == []


def test_close_removes_the_engine_and_its_worker(engine):
    pids = tree(engine.pid)
    engine.close()
    assert engine._process.exitcode == 0  # it exited on "close", not by the kill
    assert survivors(pids) == []


def test_a_worker_left_by_a_dead_engine_is_removed(engine):
    pids = tree(engine.pid)
    os.kill(engine.pid, signal.SIGKILL)  # only the engine: the reaper takes the rest
    assert survivors(pids) == []


def test_exit_handler_kills_engines_still_alive(engine):
    pids = tree(engine.pid)
    child._kill_engines_at_exit()
    assert survivors(pids) == []


def test_an_engine_started_from_a_thread_outlives_the_thread():
    started = []
    thread = threading.Thread(target=lambda: started.append(Engine(CONFIG, 60, answer_pipe=answer_pipe_with_worker)))
    thread.start()
    thread.join()
    engine = started[0]
    try:
        time.sleep(1)  # the kernel's parent-death signal would have come by now
        assert alive(engine.pid) and alive(engine.provenance["worker"])
    finally:
        engine.kill()


PARENT = """
import json, sys, time
import psutil
from spawning_answerer import CONFIG, answer_pipe_with_worker
from specperf.run.engines.engine import Engine

if __name__ == "__main__":
    engine = Engine(CONFIG, start_timeout_s=60, answer_pipe=answer_pipe_with_worker)
    tree = [engine.pid] + [p.pid for p in psutil.Process(engine.pid).children(recursive=True)]
    print(json.dumps({"tree": tree, "worker": engine.provenance["worker"]}), flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("prctl", ["prctl", "no prctl"])
def test_a_sigkilled_parent_leaves_no_engine_or_worker(tmp_path, prctl):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]),
        SPAWNING_ANSWERER_NO_PRCTL="1" if prctl == "no prctl" else "0",
    )
    parent = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        started = json.loads(parent.stdout.readline())
        assert started["worker"] in started["tree"]
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert survivors(started["tree"]) == []
    finally:
        parent.kill()
        parent.wait(10)
