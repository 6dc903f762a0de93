"""Whether a pytest run is the suite's, and what the plugin needs of it besides its scenarios: the
process's GPUs, SIGTERM as an interrupt, what was measured, the history database, the machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .. import paths
from ..options import options
from ..run.device import has_nvidia_gpu
from .profile import chosen_profile
from .selection import SCENARIO_PROPERTY


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


def own_gpus(config) -> None:
    """Give this process (an xdist worker, or the only one) its own GPUs before vLLM starts: as many
    as the largest TP size of the profile.  The hardware key counts these, so a baseline recorded
    with or without xdist files under the same key."""
    from ..run.gpus import process_gpus, visible_gpu_ids

    if not has_nvidia_gpu() or not (visible := visible_gpu_ids()):
        return
    tp = max(s.model.tp for s in chosen_profile(config).scenarios)
    worker = worker_input(config) or {}
    try:
        os.environ["CUDA_VISIBLE_DEVICES"] = process_gpus(
            visible, tp, worker.get("workerid"), worker.get("workercount", 1)
        )
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


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


class ScenarioOutcomes:
    """Counts each scenario as measured or skipped, from the test reports (in the xdist controller too)."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        if not any(name == SCENARIO_PROPERTY for name, _ in report.user_properties):
            return
        if report.skipped:
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call":
            self.outcomes.setdefault(report.nodeid, "measured")

    def nothing_measured(self) -> bool:
        """Every scenario was skipped: the run measured nothing, so it must not pass."""
        return bool(self.outcomes) and "measured" not in self.outcomes.values()


def nothing_measured(session, outcomes: ScenarioOutcomes) -> bool:
    """In the process that closes the run (not an xdist worker): were all scenarios skipped?"""
    return worker_input(session.config) is None and outcomes.nothing_measured()


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
