"""Whether a pytest run is the suite's, and what the plugin needs of it besides its scenarios: the
process's GPUs, SIGTERM as an interrupt, what was measured, the history database, the machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .. import paths
from ..options import options
from ..run.device import has_nvidia_gpu
from ..status import INVALID
from .selection import SCENARIO_PROPERTY, VERDICT_PROPERTY


def is_suite_run(config) -> bool:
    """Whether this pytest run is the suite's: --profile or --resume given, or a path argument at or
    inside tests_perf/ (or above it, as `pytest .` in the checkout)."""
    if options(config).profile or options(config).resume:
        return True
    suite_tests = paths.perf_tests().resolve()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == suite_tests or suite_tests in path.parents or path in suite_tests.parents:
            return True
    return False


def worker_input(config) -> dict | None:
    """The pytest-xdist worker input of this process, or None in the controller or without xdist."""
    return getattr(config, "workerinput", None)


def own_gpus(config, scenarios) -> None:
    """Give this process (an xdist worker, or the only one) its own GPUs before vLLM starts: as many
    as the largest TP size among the scenarios the run selected (after -k, -m and --shard; every
    worker collects the same selection, so their blocks of GPUs do not overlap).  The hardware key
    names the GPU, not how many were reserved (run/device.py), so every selection files a scenario
    under the same key.  A worker
    leaves a selection that does not fit to the controller (check_worker_gpus), whose usage error
    ends the run before any test is scheduled: one raised on a worker would crash it."""
    from ..run.gpus import visible_gpu_ids

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
    from ..run.gpus import visible_gpu_ids

    if has_nvidia_gpu() and (visible := visible_gpu_ids()):
        try:
            _process_gpus(visible, scenarios, worker)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None


def _process_gpus(visible: list[str], scenarios, worker: dict | None) -> str | None:
    """CUDA_VISIBLE_DEVICES for this worker (or the only process) and the selected scenarios; None
    when none is selected."""
    from ..run.gpus import process_gpus

    tp = max((s.model.tp for s in scenarios), default=None)
    if tp is None:
        return None
    worker = worker or {}
    return process_gpus(visible, tp, worker.get("workerid"), worker.get("workercount", 1))


def terminate_as_interrupt() -> None:
    """SIGTERM (a CI job cancelled, a node drained) ends the run like Ctrl-C: results kept, report written."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:

        def interrupt(signum, frame):
            raise KeyboardInterrupt("SIGTERM")

        signal.signal(signal.SIGTERM, interrupt)


SKIPPED = "skipped"


class ScenarioOutcomes:
    """Each scenario's outcome, from the test reports (in the xdist controller too): skipped, or
    measured with its verdict."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        properties = dict(report.user_properties)
        if SCENARIO_PROPERTY not in properties:
            return
        if report.skipped:
            self.outcomes[report.nodeid] = SKIPPED
        elif report.when == "call":
            self.outcomes.setdefault(report.nodeid, properties.get(VERDICT_PROPERTY, "measured"))

    def why_nothing_counts(self) -> str | None:
        """Why a run that failed no case must still fail: it measured nothing, or judged nothing
        (every measurement invalid: a shared or throttled GPU, say); None when something counts."""
        measured = [outcome for outcome in self.outcomes.values() if outcome != SKIPPED]
        if self.outcomes and not measured:
            return "every scenario was skipped: this run measured nothing, so it fails"
        if measured and all(outcome == INVALID for outcome in measured):
            return f"no scenario was judged: all {len(measured)} measurements were invalid, so this run fails"
        return None


def why_nothing_counts(session, outcomes: ScenarioOutcomes) -> str | None:
    """In the process that closes the run (not an xdist worker): ScenarioOutcomes.why_nothing_counts."""
    return None if worker_input(session.config) is not None else outcomes.why_nothing_counts()


def run_history_url(config) -> str | None:
    """The history database of this run (--history, $SPECPERF_HISTORY, else beside the reports); None: off."""
    from ..history.database import history_url

    return history_url(options(config).history, options(config).reports_dir)


def machine(config) -> dict:
    """This machine as results record it, with the facts conftest.py hooks add (hookspecs.py)."""
    import json

    from ..run.device import describe_device

    device = describe_device()
    facts: dict = {}
    for part in reversed(config.hook.pytest_specperf_machine_facts(config=config)):  # pluggy: last first
        if not isinstance(part, dict):
            raise pytest.UsageError(f"pytest_specperf_machine_facts returned {type(part).__name__}, not a dict")
        facts |= part
    try:
        json.dumps(facts, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise pytest.UsageError(f"pytest_specperf_machine_facts: not JSON: {err}") from None
    if url := options(config).serve_url:  # what is measured is that server, not this machine
        from ..run.remote import hardware_key

        facts = {"serve_url": url, "client_hardware_key": device["hardware_key"]} | facts
        device = device | {"hardware_key": hardware_key(url)}
    return device | ({"facts": facts} if facts else {})
