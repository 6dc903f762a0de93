"""Child processes that take everything they start down with them.

An engine process is not daemonic, because vLLM starts its tensor-parallel workers from it
and a daemonic process may not have children.  Instead it leads a session (so a process group)
of its own, which holds everything it starts, and that group is killed: by `kill_tree`, by an
exit handler of this process, and, when this process is killed, by the kernel's parent-death
signal plus a small reaper process in the group that outlives the engine by about 0.2 s.
"""

from __future__ import annotations

import atexit
import ctypes
import multiprocessing.util  # noqa: F401 - its exit handler (joining children) must run after ours
import os
import signal
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent_pid: int, kernel: bool) -> None:
    """SIGKILL this process when its parent dies: by the kernel's parent-death signal, else (no
    prctl, or `kernel` false) by a thread that polls the parent pid and kills this process group.

    The kernel sends that signal when the parent *thread* ends, so it is armed only for a process
    started from the parent's main thread."""
    try:
        if not kernel:
            raise OSError("started from a thread other than the main one")
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    except (OSError, AttributeError):
        threading.Thread(target=_watch, args=(parent_pid, os.getpid()), daemon=True, name="parent-watch").start()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)


def _watch(parent_pid: int, group: int) -> None:
    """Kill process group `group` once this process's parent is no longer `parent_pid`."""
    while os.getppid() == parent_pid:
        time.sleep(0.2)
    os.killpg(group, signal.SIGKILL)


def _start_reaper() -> None:
    """Fork a process into this group that kills the whole group once this process has ended.

    The engine's own children (vLLM's workers) outlive a SIGKILLed engine otherwise."""
    leader = os.getpid()
    if os.fork() != 0:
        return
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the engine's pipe closes when the engine dies
        _watch(leader, leader)
    finally:
        os._exit(0)


def _main(parent_pid: int, from_main_thread: bool, serve, *args) -> None:
    """The engine process: lead a new session (so its group holds all it starts), die with the
    parent, and serve."""
    os.setsid()
    _die_with_parent(parent_pid, kernel=from_main_thread)
    _start_reaper()
    serve(*args)


_alive_groups: set[int] = set()  # process groups of engines not yet killed


def kill_tree(process) -> None:
    """SIGKILL an engine's process group (the engine and everything it started)."""
    if process.pid in _alive_groups:
        _alive_groups.discard(process.pid)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # no group yet: the child has not run setsid
            pass
    if process.is_alive():
        process.kill()


@atexit.register
def _kill_engines_at_exit() -> None:
    for pgid in list(_alive_groups):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    _alive_groups.clear()


def start(context, serve, *args):
    """Start `serve(*args)` in a new process of `context` (spawn) under the rules above."""
    from_main_thread = threading.current_thread() is threading.main_thread()
    process = context.Process(target=_main, args=(os.getpid(), from_main_thread, serve, *args), daemon=False)
    process.start()
    _alive_groups.add(process.pid)
    return process
