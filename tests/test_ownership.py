"""Telling the suite's own GPU processes from foreign ones: by pid, and by count where NVML's pids
are another PID namespace's (a container), against a fake pynvml and fake device files."""

import os
import subprocess
import sys
from types import SimpleNamespace

from fake_nvml import FOREIGN_PID, HOST_PID_BASE, MIB, box, engine, install  # noqa: F401 (fixtures)

from specperf.run.hardware import gpus, ownership
from specperf.run.hardware.ownership import BY_COUNT, BY_PID, Ownership, gpu_minors_held, own_pids


def listed(*processes):
    return [SimpleNamespace(pid=pid, usedGpuMemory=mib * MIB) for pid, mib in processes]


def test_own_pids_include_children(engine):
    own = own_pids()
    assert os.getpid() in own and engine in own
    assert os.getppid() not in own


def test_gpu_minors_held_reads_the_open_device_files():
    # /dev/null and /dev/zero are character devices 1:3 and 1:5, as /dev/nvidia0 is 195:0
    with open("/dev/null") as _, open("/dev/zero", "rb") as _:
        held = gpu_minors_held(os.getpid(), major=1)
    assert {3, 5} <= held
    assert gpu_minors_held(FOREIGN_PID) is None  # no such process
    assert gpu_minors_held(os.getpid()) == set()  # no GPU device file on this machine


def test_in_a_container_our_engine_listed_by_its_host_pid_is_ours(install, engine):
    gpu_list = box(2)
    gpu_list[0].processes = [(engine, 70_000 * MIB)]
    nvml = install(gpu_list, container=True)
    processes = nvml.nvmlDeviceGetComputeRunningProcesses(gpu_list[0])
    assert [p.pid for p in processes] == [HOST_PID_BASE + engine]  # NVML's pid means nothing here
    verdict = Ownership().foreign_on(0, 0, processes)
    assert verdict.foreign == [] and verdict.ownership == BY_COUNT


def test_in_a_container_a_process_more_than_ours_is_foreign(install, engine):
    gpu_list = box(1)
    gpu_list[0].processes = [(engine, 70_000 * MIB), (4321, 900 * MIB)]  # 4321: a neighbour's, as the host sees it
    nvml = install(gpu_list, container=True)
    verdict = Ownership().foreign_on(0, 0, nvml.nvmlDeviceGetComputeRunningProcesses(gpu_list[0]))
    # which of the two is ours NVML cannot say: the one holding less memory is taken as foreign
    assert verdict.foreign == [
        {"gpu_index": 0, "pid": HOST_PID_BASE + 4321, "used_memory_mib": 900, "pid_namespace": "other"}
    ]
    assert verdict.ownership == BY_COUNT


def test_the_suite_process_never_counts_as_one_of_ours(install):
    # The suite process holds the device files through NVML (its sampler) but runs no engine.
    gpu_list = box(1)
    gpu_list[0].holders = [os.getpid()]
    install(gpu_list)
    verdict = Ownership().foreign_on(0, 0, listed((HOST_PID_BASE + 1, 500)))
    assert [p["pid"] for p in verdict.foreign] == [HOST_PID_BASE + 1]


def test_an_engine_started_after_the_tree_was_read_is_counted(install):
    gpu_list = box(1)
    install(gpu_list)
    checker = Ownership()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gpu_list[0].holders = [child.pid]
        assert checker.foreign_on(0, 0, listed((HOST_PID_BASE + child.pid, 500))).foreign == []
    finally:
        child.kill()
        child.wait()


def test_a_host_pid_that_names_an_unrelated_process_here_is_counted(install, engine):
    # The parent exists here but holds no GPU device file: NVML's pid is a host pid of the same number.
    gpu_list = box(1)
    gpu_list[0].holders = [engine]
    install(gpu_list)
    verdict = Ownership().foreign_on(0, 0, listed((os.getppid(), 500)))
    assert verdict.foreign == [] and verdict.ownership == BY_COUNT


def test_a_process_of_this_namespace_on_the_gpu_is_foreign_by_its_pid(install, engine, monkeypatch):
    gpu_list = box(2)
    gpu_list[1].holders = [os.getppid()]
    install(gpu_list)
    verdict = Ownership().foreign_on(1, 1, listed((engine, 70_000), (os.getppid(), 500)))
    assert verdict.foreign == [{"gpu_index": 1, "pid": os.getppid(), "used_memory_mib": 500, "pid_namespace": "this"}]
    assert verdict.ownership == BY_PID
    # a process whose files are not ours to read might use the GPU: foreign
    monkeypatch.setattr(ownership, "gpu_minors_held", lambda pid, major=None: None)
    assert Ownership().foreign_on(0, 0, listed((os.getppid(), 500))).foreign[0]["pid_namespace"] == "this"


def test_a_tp_worker_holding_another_gpus_file_makes_the_count_lenient(install, engine):
    # CUDA opens the device file of every GPU a process may use: a TP worker computing on GPU 1 holds
    # GPU 0's too, so one foreign process on GPU 0 hides behind it.  Lenient by design, never strict.
    gpu_list = box(2)
    gpu_list[0].holders = [engine]
    install(gpu_list)
    assert Ownership().foreign_on(0, 0, listed((HOST_PID_BASE + 1, 500))).foreign == []


def test_no_listed_process_decides_nothing(install):
    install(box(1))
    verdict = Ownership().foreign_on(0, 0, [])
    assert verdict.foreign == [] and verdict.ownership is None


def test_preflight_in_a_container_lists_every_process_there_before_the_run(install):
    gpu_list = box(1)
    gpu_list[0].processes = [(777, 2048 * MIB)]
    install(gpu_list, container=True)
    assert gpus.preflight()["foreign_processes"] == [
        {"gpu_index": 0, "pid": HOST_PID_BASE + 777, "used_memory_mib": 2048, "pid_namespace": "other"}
    ]
