"""Which processes computing on a GPU are the suite's own, and which are foreign.

NVML lists the processes computing on a GPU by pid, but the driver knows no PID namespaces: it
always gives the host's pids.  Inside a container (the usual CI runner) those pids mean nothing
here, or name an unrelated process, so a pid match alone would call the suite's own engines
foreign.  For each pid NVML lists on a GPU:

- in this process's tree (this process and its descendants: the engines and their TP workers):
  ours, matched by pid;
- a process of this PID namespace that holds the GPU's device file (/dev/nvidia<minor>) open, or
  whose open files cannot be read (another user's): foreign, matched by pid;
- otherwise the pid is from another PID namespace (the host's, seen from a container; a local
  process with the same number that holds no such file is a coincidence).  Those pids are
  counted: the GPU's processes from another namespace, less the processes of our tree that hold
  its device file open but that NVML did not list by our pid, are foreign.  Which of them NVML
  does not say; the suite's engines hold most of a GPU's memory, so the ones holding the least
  are taken as the foreign ones (their memory shown is then a lower bound).

The count is found namespace-independently, from /proc/<pid>/fd.  This process itself is left
out of it: the suite process runs no engine, yet opens the device files through NVML (its own
sampler).  CUDA opens the device files of every GPU a process may use, so a TP worker holds those
of its siblings' GPUs too: the count is then lenient (a foreign process can hide behind such a
worker), never strict (our own engine is never counted foreign).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

from .nvml import MIB

NVIDIA_MAJOR = 195  # the character-device major of /dev/nvidia<minor>
CONTROL_MINORS = frozenset({254, 255})  # /dev/nvidia-modeset and /dev/nvidiactl: no GPU of their own

BY_PID = "pids"  # NVML's pids are this namespace's: matched
BY_COUNT = "counted"  # NVML's pids are from another namespace: counted against our processes


def own_pids() -> set[int]:
    """This process and all its descendants (vLLM's engine core and TP workers are children)."""
    me = psutil.Process()
    try:
        return {me.pid} | {child.pid for child in me.children(recursive=True)}
    except psutil.Error:
        return {me.pid}


def gpu_minors_held(pid: int, major: int = NVIDIA_MAJOR) -> set[int] | None:
    """Minor numbers of the character devices of `major` (the GPUs' /dev/nvidia<minor>) that process
    `pid` holds open; None where its file descriptors cannot be read (gone, or another user's)."""
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return None
    minors = set()
    for name in names:
        try:
            found = os.stat(f"{fds}/{name}")  # follows the link to the device itself, whatever its path
        except OSError:
            continue  # closed meanwhile
        if stat.S_ISCHR(found.st_mode) and os.major(found.st_rdev) == major:
            minors.add(os.minor(found.st_rdev))
    return minors


def holds_gpu(held: set[int], minor: int | None) -> bool:
    """Does a process holding `held` hold the GPU of `minor` (None: not known, any GPU counts)?"""
    return minor in held if minor is not None else bool(held - CONTROL_MINORS)


@dataclass
class GpuVerdict:
    """What NVML's listing of one GPU's processes comes to."""

    foreign: list[dict] = field(default_factory=list)  # {"gpu_index", "pid", "used_memory_mib", "pid_namespace"}
    ownership: str | None = None  # BY_PID, BY_COUNT, or None where NVML listed no process


class Ownership:
    """Tells a GPU's foreign processes from this process's own (see the module's docstring).

    It reads the process tree and the device files once, and again only when something does not
    add up (a pid or a process more than it knows: an engine started since)."""

    def __init__(self):
        self.tree = own_pids()
        self._local: dict[tuple[int, int | None], bool] = {}  # (pid, minor) not ours -> a GPU user here?
        self._users: dict[int | None, set[int]] = {}  # minor -> our processes holding that GPU's device file

    def foreign_on(self, gpu_index: int, minor: int | None, processes: Iterable) -> GpuVerdict:
        """The foreign ones among `processes` (NVML's, with .pid and .usedGpuMemory) on GPU `gpu_index`,
        whose device file is /dev/nvidia<minor> (None: not known)."""
        processes = list(processes)
        if not processes:
            return GpuVerdict()
        if any(p.pid not in self.tree and (p.pid, minor) not in self._local for p in processes):
            self._reread()
        ours = {p.pid for p in processes if p.pid in self.tree}
        here = [p for p in processes if p.pid not in ours and self._local_gpu_user(p.pid, minor)]
        elsewhere = [p for p in processes if p.pid not in ours and not self._local_gpu_user(p.pid, minor)]
        foreign = [_entry(gpu_index, p, "this") for p in here]
        if not elsewhere:
            return GpuVerdict(foreign, BY_PID)
        unlisted = self._gpu_users(minor) - ours
        if len(elsewhere) > len(unlisted):  # perhaps an engine started since the tree was read
            self._reread()
            unlisted = self._gpu_users(minor) - ours
        excess = len(elsewhere) - len(unlisted)
        if excess > 0:
            smallest = sorted(elsewhere, key=lambda p: p.usedGpuMemory or 0)[:excess]
            foreign += [_entry(gpu_index, p, "other") for p in smallest]
        return GpuVerdict(foreign, BY_COUNT)

    def _reread(self) -> None:
        self.tree = own_pids()
        self._users.clear()

    def _local_gpu_user(self, pid: int, minor: int | None) -> bool:
        """Is `pid` a process of this namespace that uses the GPU (or might: its files are not ours to read)?"""
        if (pid, minor) not in self._local:
            held = gpu_minors_held(pid) if psutil.pid_exists(pid) else set()
            self._local[(pid, minor)] = held is None or holds_gpu(held, minor)
        return self._local[(pid, minor)]

    def _gpu_users(self, minor: int | None) -> set[int]:
        """Our processes, this one left out, that hold the GPU's device file open."""
        if minor not in self._users:
            me = os.getpid()
            self._users[minor] = {
                pid for pid in self.tree - {me} if (held := gpu_minors_held(pid)) is not None and holds_gpu(held, minor)
            }
        return self._users[minor]


def _entry(gpu_index: int, process, pid_namespace: str) -> dict:
    memory = process.usedGpuMemory
    return {
        "gpu_index": gpu_index,
        "pid": process.pid,
        "used_memory_mib": None if memory is None else memory // MIB,
        "pid_namespace": pid_namespace,
    }
