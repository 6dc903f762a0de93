#!/usr/bin/env python3
"""What a real GPU does to the suite's assumptions, checked on one GPU box in under 10 minutes.

Needs no vLLM and no network: python3, psutil, nvidia-ml-py (module pynvml) and torch with CUDA.
specperf's own modules come from this checkout; describing the device also needs pydantic.

    python3 scripts/gpu_check.py [--out FILE] [--sustain-s SECONDS] [--only NAME[,NAME]]

Checks, in this order (docs/methodology/gpu-check.md explains every figure and what it means for
the suite): device, pids, colocation, batch_variance, sustained_load, release_lag.  A check the
machine cannot run says why under "skipped"; one that broke says how under "error".

Output: one JSON document, written to FILE with --out, else printed on stdout and written to
gpu_check.json in $OUT (when set) or the working directory.  Progress goes to stderr.  Exit
status 1 when NVML sees no GPU this process may use, else 2 when a check that ran broke, else 0.
Every child process is SIGKILLed (with all it started) when its check ends, however it ends.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import multiprocessing
import os
import platform
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specperf.run.engines import child
from specperf.run.hardware import nvml

GIB = 2**30
SPAWN = multiprocessing.get_context("spawn")  # never fork: a forked child would share the parent's CUDA state
CHILD_READY_TIMEOUT_S = 120.0  # importing torch and creating a CUDA context take a few seconds
NVML_LISTING_TIMEOUT_S = 10.0
RELEASE_TIMEOUT_S = 30.0
RELEASE_TOLERANCE_BYTES = 256 * 2**20  # "memory back": within this of what was used before the child
NEXT_ENGINE_GRACE_S = 1.0  # release_verdict says why
ENGINE_UTILIZATION = 0.9  # h100-nightly's gpu_memory_utilization
HIDDEN, VOCAB = 4096, 128256  # Llama-3.1-8B's lm_head (h100-nightly's Llama target)
BATCH_SIZES = range(1, 129)
LOAD_SIDE = 8192
NVIDIA_MAJOR = 195  # the character-device major of /dev/nvidia<minor>


# ------------------------------------------------------------------ the machine and what a check needs


@dataclass(frozen=True)
class Machine:
    """What the checks may use; each *_missing field says why that part cannot be used (None: it can)."""

    nvml_missing: str | None
    cuda_missing: str | None
    nvml_index: int | None  # NVML index of CUDA device 0, the GPU every check uses
    torch_version: str | None


def inspect_machine() -> Machine:
    nvml_missing, nvml_index = _nvml_state()
    cuda_missing, torch_version = _cuda_state()
    return Machine(nvml_missing, cuda_missing, nvml_index, torch_version)


def _nvml_state() -> tuple[str | None, int | None]:
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return "no module pynvml (pip install nvidia-ml-py)", None
    session = nvml.open_nvml()
    if session is None:
        return "NVML did not start (no NVIDIA driver?)", None
    try:
        indices = nvml.visible_nvml_indices(session)
    finally:
        nvml.close_nvml(session)
    if not indices:
        return "NVML sees no GPU this process may use (CUDA_VISIBLE_DEVICES hides them, or names MIG devices)", None
    return None, indices[0]


def _cuda_state() -> tuple[str | None, str | None]:
    try:
        import torch
    except ImportError:
        return "no module torch", None
    if not torch.cuda.is_available():  # initialises the driver, creates no context
        return f"torch {torch.__version__} sees no CUDA device", torch.__version__
    return None, torch.__version__


def missing(needs: tuple[str, ...], machine: Machine) -> str | None:
    """Why the machine cannot run a check that needs `needs` ("nvml", "cuda"); None when it can."""
    reasons = [
        reason
        for need, reason in (("nvml", machine.nvml_missing), ("cuda", machine.cuda_missing))
        if need in needs and reason
    ]
    return "; ".join(reasons) or None


# ------------------------------------------------------------------ child processes


def _answer_job(conn, job, *args) -> None:
    """A child's body: run job(conn, *args); a failure reaches the parent as {"error": ...}."""
    try:
        job(conn, *args)
    except Exception as err:
        conn.send({"error": f"{type(err).__name__}: {err}"})


@contextlib.contextmanager
def running(job, *args):
    """Start job(conn, *args) in a child of its own process group; yield (process, connection, its
    first message).  On leaving, the group is SIGKILLed as the suite kills an engine (child.kill_tree)."""
    parent_end, child_end = SPAWN.Pipe()
    process = child.start(SPAWN, _answer_job, child_end, job, *args)
    child_end.close()
    try:
        if not parent_end.poll(CHILD_READY_TIMEOUT_S):
            raise TimeoutError(f"{job.__name__} child sent nothing within {CHILD_READY_TIMEOUT_S:.0f} s")
        try:
            message = parent_end.recv()
        except EOFError:
            process.join(5)
            raise RuntimeError(f"{job.__name__} child died (exit code {process.exitcode})") from None
        if "error" in message:
            raise RuntimeError(f"{job.__name__} child: {message['error']}")
        yield process, parent_end, message
    finally:
        child.kill_tree(process)
        process.join(10)
        parent_end.close()


def bytes_to_fill(fraction: float, free: int, total: int) -> int:
    """What to allocate so the device's used memory reaches `fraction` of its total, as an engine at
    that gpu_memory_utilization leaves it (vLLM's budget counts everything the process uses)."""
    return max(0, math.floor(fraction * total) - (total - free))


def hold_memory(conn, fill_to: float, at_least: int = 0) -> None:
    """Child: create a CUDA context, allocate (plain cudaMalloc through torch's allocator, 1 GiB at a
    time) until the device is `fill_to` full or `at_least` bytes are allocated, whichever is more,
    report, and hold the memory until the parent closes the pipe or kills the child."""
    import torch

    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    wanted = max(at_least, bytes_to_fill(fill_to, free, total))
    blocks = [torch.empty(min(GIB, wanted - done), dtype=torch.uint8, device="cuda") for done in range(0, wanted, GIB)]
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()
    conn.send({"pid": os.getpid(), "total": total, "free_at_start": free, "allocated": wanted, "free": free_after})
    with contextlib.suppress(EOFError):
        conn.recv()
    del blocks


# ------------------------------------------------------------------ 1. device


def check_device(machine: Machine, earlier: dict, options) -> dict:
    """The device as the suite describes it before a run (preflight, hardware key), the GPU
    requirements a test could state, and the GPUs an xdist worker would get.  About 1 s."""
    from specperf.run.hardware import device as hardware  # needs pydantic, through the profiles' registry
    from specperf.run.hardware import gpus

    described = hardware.describe_device()
    visible = gpus.visible_gpu_ids()
    try:
        worker_gpus: str | None = gpus.process_gpus(visible, 1, "gw1", 2)
    except ValueError as err:
        worker_gpus = f"ValueError: {err}"
    return {
        "description": described,
        "unmet_requirement_min_class_h100": gpus.unmet_requirement(described, "H100"),
        "unmet_requirement_count_4": gpus.unmet_requirement(described, count=4),
        "visible_gpu_ids": visible,
        "process_gpus_gw1_of_2_tp1": worker_gpus,
        "verdict": "gpu" if described["kind"] == "gpu" else "no GPU described",
    }


# ------------------------------------------------------------------ 2. pids


def nvml_processes(session, handle) -> dict[int, int | None]:
    """pid -> used memory in MiB (None where NVML does not say) of the processes computing on a GPU."""
    return {
        p.pid: None if p.usedGpuMemory is None else p.usedGpuMemory // nvml.MIB
        for p in nvml.compute_processes(session, handle)
    }


def wait_for_new_processes(session, handle, before: set[int]) -> dict[int, int | None]:
    """The processes NVML lists on the GPU that were not in `before`, once there are any ({} on timeout)."""
    deadline = time.monotonic() + NVML_LISTING_TIMEOUT_S
    while True:
        new = {pid: mib for pid, mib in nvml_processes(session, handle).items() if pid not in before}
        if new or time.monotonic() > deadline:
            return new
        time.sleep(0.05)


def nspid(pid: int | str) -> list[int] | None:
    """The NSpid line of /proc/<pid>/status: the pid in each PID namespace from /proc's down (None: unreadable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(field) for field in line.split()[1:]]
    except OSError:
        pass
    return None


def nvidia_files(pid: int) -> list[dict]:
    """The /dev/nvidia* files process `pid` holds open, each with its device number (None: not a device)."""
    held = {}
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                path, found = os.readlink(f"/proc/{pid}/fd/{fd}"), os.stat(f"/proc/{pid}/fd/{fd}")
                if path.startswith("/dev/nvidia"):
                    device = stat.S_ISCHR(found.st_mode)
                    held[path] = {
                        "path": path,
                        "major": os.major(found.st_rdev) if device else None,
                        "minor": os.minor(found.st_rdev) if device else None,
                    }
    return sorted(held.values(), key=lambda file: file["path"])


def holds_gpu_device_file(files: list[dict], minor: int | None) -> bool | None:
    """Does a process holding `files` hold the GPU's device file (/dev/nvidia<minor>, major 195)?"""
    if minor is None:
        return None
    return any((file["major"], file["minor"]) == (NVIDIA_MAJOR, minor) for file in files)


def pid_verdict(child_pid: int, new_pids: set[int]) -> str:
    if child_pid in new_pids:
        return "namespace_pids"  # NVML's pid is the one this process sees
    if len(new_pids) == 1:
        return "other_pids"  # another PID namespace's number, a container's host pid
    return "not_listed" if not new_pids else "ambiguous"


def suite_ownership(gpu_index: int, minor: int | None, processes: list, child_pids: set[int]) -> dict:
    """What the suite's own foreign-process check (specperf.run.hardware.ownership) concludes, given all of
    NVML's `processes` on the GPU, for the child's entries among them (pids `child_pids`).

    The one place that asks the suite; where its check is not there to ask, the reason instead."""
    try:
        from specperf.run.hardware import ownership
    except ImportError as err:
        return {"suite_verdict": None, "suite_verdict_reason": f"specperf.run.hardware.ownership: {err}"}
    if not hasattr(getattr(ownership, "Ownership", None), "foreign_on"):
        return {
            "suite_verdict": None,
            "suite_verdict_reason": "specperf.run.hardware.ownership has no Ownership.foreign_on",
        }
    if not child_pids:
        return {"suite_verdict": None, "suite_verdict_reason": "NVML listed no process for the child"}
    judged = ownership.Ownership().foreign_on(gpu_index, minor, processes)
    foreign = child_pids & {entry["pid"] for entry in judged.foreign}
    return {"suite_verdict": "foreign" if foreign else "ours", "suite_ownership": judged.ownership}


def check_pids(machine: Machine, earlier: dict, options) -> dict:
    """Does NVML report a process by the pid this PID namespace gives it?  A child creates a CUDA
    context and holds 256 MiB; NVML's compute processes on that GPU are compared with its pid, and
    the suite's ownership check is asked about it.  About 10 s."""
    session = nvml.open_nvml()
    try:
        handle = session.nvmlDeviceGetHandleByIndex(machine.nvml_index)
        minor = nvml.query(session, "nvmlDeviceGetMinorNumber", handle)
        before = set(nvml_processes(session, handle))
        with running(hold_memory, 0.0, 256 * 2**20) as (_, _, held):
            new = wait_for_new_processes(session, handle, before)
            files, child_nspid = nvidia_files(held["pid"]), nspid(held["pid"])
            ownership = suite_ownership(machine.nvml_index, minor, nvml.compute_processes(session, handle), set(new))
    finally:
        nvml.close_nvml(session)
    return {
        "child_pid": held["pid"],
        "child_nspid": child_nspid,
        "self_nspid": nspid("self"),
        "nvml_new_processes": [{"pid": pid, "used_memory_mib": mib} for pid, mib in new.items()],
        "gpu_minor_number": minor,
        "child_nvidia_files": files,
        "child_holds_gpu_device_file": holds_gpu_device_file(files, minor),
        **ownership,
        "verdict": pid_verdict(held["pid"], set(new)),
    }


# ------------------------------------------------------------------ 3. colocation


def vllm_memory_rule(free: int, total: int, utilization: float) -> dict:
    """vLLM's startup check (v1/worker/utils.py request_memory): the free memory a new engine sees
    must be at least ceil(gpu_memory_utilization x total), or it stops with "Free memory on device
    ... is less than desired GPU memory utilization"."""
    requested = math.ceil(total * utilization)
    return {
        "utilization": utilization,
        "requested_mib": requested // nvml.MIB,
        "free_mib": free // nvml.MIB,
        "passes": free >= requested,
        "largest_passing_utilization": math.floor(free / total * 100) / 100,
    }


def colocated(first: float, second: float) -> dict:
    """One process fills the device to `first` of its memory; a second creates its context and
    reads the free memory vLLM's check would read, asking for `second`."""
    with running(hold_memory, first) as (_, _, held):
        with running(hold_memory, 0.0) as (_, _, asker):
            total = asker["total"]
            return {
                "total_mib": total // nvml.MIB,
                "first_fills_to": first,
                "first_allocated_mib": held["allocated"] // nvml.MIB,
                "device_used_by_first_mib": (held["total"] - held["free"]) // nvml.MIB,
                "second_asks_for": vllm_memory_rule(asker["free"], total, second),
            }


def check_colocation(machine: Machine, earlier: dict, options) -> dict:
    """Can two engines share the GPU: the current and candidate engines of a gate, both at
    h100-nightly's 0.9, and a 0.45/0.45 split.  Four children, about 25 s."""
    full = colocated(ENGINE_UTILIZATION, ENGINE_UTILIZATION)
    split = colocated(ENGINE_UTILIZATION / 2, ENGINE_UTILIZATION / 2)
    return {
        "rule": "free memory at the second engine's start >= ceil(gpu_memory_utilization x total memory)",
        "total_mib": full["total_mib"],
        "both_at_0.9": full,
        "split_0.45_0.45": split,
        "verdict": {
            "0.9_beside_0.9_passes": full["second_asks_for"]["passes"],
            "0.45_split_passes": split["second_asks_for"]["passes"],
        },
    }


# ------------------------------------------------------------------ 4. batch_variance


def first_row_drift(x, weight, sizes, matmul=None) -> tuple[int, float, list[dict]]:
    """The first row of x[:M] @ weight for each M against M = 1's: (M = 1's argmax, the gap between
    its two largest logits, and per M the largest absolute difference and the argmax)."""
    matmul = matmul or (lambda a, b: a @ b)
    reference = matmul(x[:1], weight)[0].float()
    top2 = reference.topk(2).values
    rows = []
    for m in sizes:
        row = matmul(x[:m], weight)[0].float()
        rows.append({"m": m, "max_abs_diff": float((row - reference).abs().max()), "argmax": int(row.argmax())})
    return int(reference.argmax()), float(top2[0] - top2[1]), rows


def drift_summary(reference_argmax: int, rows: list[dict]) -> dict:
    differs = [row["m"] for row in rows if row["max_abs_diff"] > 0]
    flipped = [row["m"] for row in rows if row["argmax"] != reference_argmax]
    verdict = "argmax_depends_on_batch" if flipped else "logits_depend_on_batch" if differs else "batch_invariant"
    return {
        "differs_at_m": differs,
        "argmax_changed_at_m": flipped,
        "max_abs_diff": max((row["max_abs_diff"] for row in rows), default=0.0),
        "verdict": verdict,
    }


def invariance_friendly_settings(torch) -> dict:
    """torch's own settings that take batch-dependent numerics out of a cuBLAS matmul, as far as torch
    alone can (vLLM's batch-invariant mode replaces the kernels instead): what was set."""
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # read when cuBLAS starts; deterministic mode needs it
    torch.use_deterministic_algorithms(True)
    try:  # (reduced-precision reduction, split-K) where this torch takes the pair
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = (False, False)
        split_k: bool | None = False
    except TypeError:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        split_k = None
    return {
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "use_deterministic_algorithms": True,
        "allow_bf16_reduced_precision_reduction": False,
        "allow_bf16_reduced_precision_reduction_split_k": split_k,
    }


def measure_batch_variance(conn, invariance_friendly: bool) -> None:
    """Child (so that settings and cuBLAS's workspace start fresh): first_row_drift in bf16 on the GPU."""
    import torch

    settings = invariance_friendly_settings(torch) if invariance_friendly else {"torch_defaults": True}
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(max(BATCH_SIZES), HIDDEN, device="cuda", generator=generator).to(torch.bfloat16)
    weight = (torch.randn(HIDDEN, VOCAB, device="cuda", generator=generator) / HIDDEN**0.5).to(torch.bfloat16)
    argmax, margin, rows = first_row_drift(x, weight, BATCH_SIZES)
    torch.cuda.synchronize()
    conn.send({"settings": settings, "reference_argmax": argmax, "reference_top2_gap": margin, "rows": rows})


def check_batch_variance(machine: Machine, earlier: dict, options) -> dict:
    """Does a greedy token depend on the batch it was computed in?  The lm_head of Llama-3.1-8B
    (4096 x 128256, h100-nightly's Llama target) in bf16 for M = 1..128, once with torch's defaults and
    once with invariance_friendly_settings.  Two children, about 20 s."""
    section: dict = {"hidden": HIDDEN, "vocab": VOCAB, "m": [min(BATCH_SIZES), max(BATCH_SIZES)]}
    for name, friendly in (("default", False), ("invariance_friendly", True)):
        with running(measure_batch_variance, friendly) as (_, _, result):
            section[name] = {
                "settings": result["settings"],
                "reference_argmax": result["reference_argmax"],
                "reference_top2_gap": result["reference_top2_gap"],
                **drift_summary(result["reference_argmax"], result["rows"]),
            }
    section["verdict"] = {name: section[name]["verdict"] for name in ("default", "invariance_friendly")}
    return section


# ------------------------------------------------------------------ 5. sustained_load


def matmul_load(conn, seconds: float) -> None:
    """Child, as an engine computes in a child of the suite's process: bf16 LOAD_SIDE^3 matrix
    products back to back for `seconds`, from the parent's go (its sampler is running by then)."""
    import torch

    a = torch.randn(LOAD_SIDE, LOAD_SIDE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(LOAD_SIDE, LOAD_SIDE, device="cuda", dtype=torch.bfloat16)
    conn.send({"pid": os.getpid()})
    conn.recv()
    started, products = time.monotonic(), 0
    while products == 0 or time.monotonic() - started < seconds:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        products += 20
    elapsed = time.monotonic() - started
    conn.send(
        {
            "products": products,
            "seconds": round(elapsed, 1),
            "tflops": round(products * 2 * LOAD_SIDE**3 / elapsed / 1e12),
        }
    )


def check_sustained_load(machine: Machine, earlier: dict, options) -> dict:
    """Minutes of bf16 matrix products in a child while the suite's TelemetrySampler watches the GPU
    from this process: its summary, and the problems that would make a measurement invalid (given the
    foreign processes the device check saw at preflight, as the suite gives them).  --sustain-s
    seconds (default 240) plus about 10 s."""
    from specperf.run.hardware import telemetry

    preflight = earlier.get("device", {}).get("description", {}).get("foreign_processes", [])
    preflight_pids = [p["pid"] for p in preflight]
    with running(matmul_load, options.sustain_s) as (_, conn, ready):
        with telemetry.TelemetrySampler([machine.nvml_index]) as sampler:
            conn.send("go")
            if not conn.poll(options.sustain_s + CHILD_READY_TIMEOUT_S):
                raise TimeoutError(f"the load did not end within {options.sustain_s + CHILD_READY_TIMEOUT_S:.0f} s")
            load = conn.recv()
    summary = sampler.summary()
    problems = telemetry.telemetry_problems(summary, preflight_pids)
    return {
        "load": {**load, "child_pid": ready["pid"]},
        "preflight_foreign_pids": preflight_pids,
        "telemetry": summary,
        "problems": problems,
        "verdict": "valid" if not problems else "invalid",
    }


# ------------------------------------------------------------------ 6. release_lag


def wait_for_release(
    conditions: dict, started: float, clock=time.monotonic, sleep=time.sleep, timeout_s=RELEASE_TIMEOUT_S
):
    """Poll the zero-argument conditions until each holds: the ms after `started` at which each was
    first seen to hold (None: not within `timeout_s`).  Conditions first seen in the same pass get the
    same time, taken after the pass; one that held is not asked again."""
    held: dict[str, float | None] = dict.fromkeys(conditions)
    while True:
        now_holding = [name for name, condition in conditions.items() if held[name] is None and condition()]
        elapsed = clock() - started
        for name in now_holding:
            held[name] = round(elapsed * 1000, 1)
        if all(ms is not None for ms in held.values()) or elapsed >= timeout_s:
            return held
        sleep(0.002)


def release_conditions(session, handle, process, child_nvml_pids: set[int], used_before: int, free_before: int):
    """What "released" means, one condition per signal the suite could wait on."""
    import torch

    conditions = {
        "process_reaped": lambda: not process.is_alive(),
        "nvml_memory_back": lambda: (
            session.nvmlDeviceGetMemoryInfo(handle).used <= used_before + RELEASE_TOLERANCE_BYTES
        ),
        "cuda_free_back": lambda: torch.cuda.mem_get_info()[0] >= free_before - RELEASE_TOLERANCE_BYTES,
    }
    if child_nvml_pids:
        conditions["nvml_process_gone"] = lambda: not child_nvml_pids & set(nvml_processes(session, handle))
    return conditions


def check_release_lag(machine: Machine, earlier: dict, options) -> dict:
    """How long after SIGKILL an engine's memory is free again.  A child fills the device to 0.9
    (an engine of h100-nightly); the parent kills its process group as the suite does and polls NVML
    and torch.cuda.mem_get_info, in a CUDA context of its own that it keeps to the end.  About 15 s."""
    import torch

    torch.cuda.init()
    free_before, _ = torch.cuda.mem_get_info()
    session = nvml.open_nvml()
    try:
        handle = session.nvmlDeviceGetHandleByIndex(machine.nvml_index)
        used_before = session.nvmlDeviceGetMemoryInfo(handle).used
        before = set(nvml_processes(session, handle))
        with running(hold_memory, ENGINE_UTILIZATION) as (process, _, held):
            child_pids = set(wait_for_new_processes(session, handle, before))
            conditions = release_conditions(session, handle, process, child_pids, used_before, free_before)
            killed_at = time.monotonic()
            child.kill_tree(process)
            lag = wait_for_release(conditions, killed_at)
    finally:
        nvml.close_nvml(session)
    return {"held_mib": held["allocated"] // nvml.MIB, "lag_ms": lag, **release_verdict(lag)}


def release_verdict(lag: dict) -> dict:
    """How long after the reap the memory was back.  The suite reaps a killed engine (join) before it
    starts the next, whose memory check comes seconds later, after vLLM's imports and its CUDA
    context: memory back within NEXT_ENGINE_GRACE_S of the reap cannot fail that check."""
    memory = [lag[name] for name in ("nvml_memory_back", "cuda_free_back")]
    if None in memory or lag["process_reaped"] is None:
        return {"memory_back_after_reap_ms": None, "verdict": f"not released within {RELEASE_TIMEOUT_S:.0f} s"}
    after_reap = round(max(memory) - lag["process_reaped"], 1)
    if after_reap <= 0:
        verdict = "back by the reap"
    elif after_reap <= NEXT_ENGINE_GRACE_S * 1000:
        verdict = f"back within {NEXT_ENGINE_GRACE_S:g} s of the reap"
    else:
        verdict = f"back more than {NEXT_ENGINE_GRACE_S:g} s after the reap"
    return {"memory_back_after_reap_ms": after_reap, "verdict": verdict}


# ------------------------------------------------------------------ the run


# name -> (what it needs, the check).  release_lag runs last: it alone gives this process a CUDA
# context, which the suite's own process never has (the checks before it see the GPU as the suite would).
CHECKS = {
    "device": ((), check_device),
    "pids": (("nvml", "cuda"), check_pids),
    "colocation": (("cuda",), check_colocation),
    "batch_variance": (("cuda",), check_batch_variance),
    "sustained_load": (("nvml", "cuda"), check_sustained_load),
    "release_lag": (("nvml", "cuda"), check_release_lag),
}


def run_check(name: str, machine: Machine, earlier: dict, options) -> dict:
    needs, check = CHECKS[name]
    reason = missing(needs, machine)
    if reason:
        return {"skipped": reason}
    print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        section = check(machine, earlier, options)
    except Exception as err:
        section = {"error": f"{type(err).__name__}: {err}"}
    section["seconds"] = round(time.monotonic() - started, 1)
    return section


def exit_status(machine: Machine, sections: dict) -> int:
    if machine.nvml_missing:
        return 1
    return 2 if any("error" in section for section in sections.values()) else 0


def progress(name: str, section: dict) -> str:
    if "skipped" in section:
        return f"gpu_check: {name}: skipped ({section['skipped']})"
    if "error" in section:
        return f"gpu_check: {name}: error: {section['error']}"
    return f"gpu_check: {name}: {json.dumps(section.get('verdict'))} ({section['seconds']} s)"


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the JSON here (default: stdout and gpu_check.json)")
    parser.add_argument("--sustain-s", type=_seconds, default=240.0, help="sustained_load's duration (default 240)")
    parser.add_argument("--only", type=_check_names, default=list(CHECKS), help=f"comma-separated: {','.join(CHECKS)}")
    options = parser.parse_args(argv)
    if options.out is not None and not options.out.parent.is_dir():
        parser.error(f"argument --out: {options.out.parent} is not a folder")
    return options


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def _check_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CHECKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown check {', '.join(unknown) or '(none named)'} (known: {', '.join(CHECKS)})"
        )
    return [name for name in CHECKS if name in names]  # always in the documented order


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA device 0 is then NVML's first visible GPU
    started = time.monotonic()
    machine = inspect_machine()
    out = options.out or Path(os.environ.get("OUT") or ".") / "gpu_check.json"
    document = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": machine.torch_version,
        "nvml_missing": machine.nvml_missing,
        "cuda_missing": machine.cuda_missing,
        "nvml_index": machine.nvml_index,
        "options": {"sustain_s": options.sustain_s, "only": options.only},
        "checks": {},
    }
    for name in options.only:
        document["checks"][name] = run_check(name, machine, document["checks"], options)
        print(progress(name, document["checks"][name]), file=sys.stderr, flush=True)
        out.write_text(as_json(document))  # so far: what a run cut short leaves
    status = exit_status(machine, document["checks"])
    document.update(seconds=round(time.monotonic() - started, 1), exit_status=status)
    out.write_text(as_json(document))
    if options.out is None:
        sys.stdout.write(as_json(document))
    print(f"gpu_check: wrote {out}", file=sys.stderr)
    return status


def as_json(document: dict) -> str:
    return json.dumps(document, indent=2, default=str) + "\n"


if __name__ == "__main__":
    sys.exit(main())
