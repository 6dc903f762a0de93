"""The GPUs each process of a suite run takes: a block of its own per xdist worker, named in
CUDA_VISIBLE_DEVICES before vLLM starts, and checked by the controller before any test runs."""

from __future__ import annotations

import os

import pytest

from ..run.hardware.device import has_nvidia_gpu
from .scope import worker_input


def own_gpus(config, scenarios) -> None:
    """Give this process (an xdist worker, or the only one) its own GPUs before vLLM starts: as many
    as the largest TP size among the scenarios the run selected (after -k, -m and --shard; every
    worker collects the same selection, so their blocks of GPUs do not overlap).  The hardware key
    names the GPU, not how many were reserved (run/hardware/device.py), so every selection files a scenario
    under the same key.  A worker
    leaves a selection that does not fit to the controller (check_worker_gpus), whose usage error
    ends the run before any test is scheduled: one raised on a worker would crash it."""
    from ..run.hardware.gpus import visible_gpu_ids

    if not has_nvidia_gpu() or not (visible := visible_gpu_ids()):
        return
    worker = worker_input(config)
    try:
        gpus = _process_gpus(visible, scenarios, worker)
    except ValueError as err:
        if worker is not None:
            return
        raise pytest.UsageError(str(err)) from None
    if gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus


def check_worker_gpus(config, scenarios, worker: dict) -> None:
    """In the xdist controller, once a worker has collected: its GPUs for the selection exist, else a
    usage error (the worker took none: own_gpus)."""
    from ..run.hardware.gpus import visible_gpu_ids

    if has_nvidia_gpu() and (visible := visible_gpu_ids()):
        try:
            _process_gpus(visible, scenarios, worker)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None


def _process_gpus(visible: list[str], scenarios, worker: dict | None) -> str | None:
    """CUDA_VISIBLE_DEVICES for this worker (or the only process) and the selected scenarios; None
    when none is selected."""
    from ..run.hardware.gpus import process_gpus

    tp = max((s.model.tp for s in scenarios), default=None)
    if tp is None:
        return None
    worker = worker or {}
    return process_gpus(visible, tp, worker.get("workerid"), worker.get("workercount", 1))
