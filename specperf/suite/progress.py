"""A run's progress on pytest-xdist workers, said by the controller.

Each worker's own lines stay in its output capture, so the controller writes one line per finished
scenario instead: its verdict, the minutes so far and the time left (plan/progress.py), from the
result the worker has written into the run directory.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ..history.queries import TimedResult
from ..options import options
from ..profiles.scenarios import Profile, Scenario
from ..records import ScenarioResult
from ..storage import ResultFileError, read_record, result_path
from .machine import machine
from .profile import chosen_profile
from .selection import SCENARIO_PROPERTY, worker_group

_PARAM = re.compile(r"\[(.+)\](@[^\]]*)?$")  # loadgroup appends "@" and the group to a test's id


class WorkerProgress:
    """Registered in the xdist controller of a suite run; `run_dir` is called once a result is there."""

    def __init__(
        self,
        profile: Profile,
        run_dir: Callable[[], Path],
        write: Callable[[str], None],
        known: Callable[[list[Scenario]], list[TimedResult]],
    ):
        """`known`: the history rows from before the run of the planned scenarios (baseline_rows)."""
        self.profile, self.run_dir, self.write, self.known = profile, run_dir, write, known
        self.known_rows: list[TimedResult] | None = None
        self.started = time.monotonic()
        self.planned: list[Scenario] | None = None
        self.workers = 0
        self.finished: list[ScenarioResult] = []
        self.said: set[str] = set()
        self.reporting: set[str] = set()  # the workers that finished a scenario

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """Every worker collects the same items (after the suite's selection and order)."""
        self.workers += 1
        if self.planned is None:
            by_id = {s.id: s for s in self.profile.scenarios}
            params = (match.group(1) for nodeid in ids if (match := _PARAM.search(nodeid)))
            self.planned = [by_id[param] for param in params if param in by_id]

    def pytest_runtest_logreport(self, report):
        scenario_id = next((value for name, value in report.user_properties if name == SCENARIO_PROPERTY), None)
        if scenario_id is None or scenario_id in self.said or not (report.when == "call" or report.skipped):
            return
        self.said.add(scenario_id)
        node = getattr(report, "node", None)  # xdist: the worker that ran it
        self.reporting.add(node.gateway.id if node is not None else "")
        verdict = next((value for name, value in report.user_properties if name == "verdict"), report.outcome)
        try:
            self.finished.append(read_record(result_path(self.run_dir(), scenario_id), ScenarioResult, "result"))
        except ResultFileError:
            pass  # skipped, or failed before its result was written: nothing to time it by
        elapsed = time.monotonic() - self.started
        planned = self.planned or []
        line = f"[{len(self.said)}/{len(planned) or '?'}] {scenario_id}: {verdict}, {elapsed / 60:.1f} min in"
        if planned and len(self.said) < len(planned):
            from ..plan.progress import builds_left_s, parallel_time_left_s  # numpy, scipy: not at start

            if self.known_rows is None:
                self.known_rows = self.known(planned)
            left = parallel_time_left_s(
                self.profile,
                planned,
                self.known_rows,
                self.finished,
                elapsed,
                max(self.workers, 1),
                worker_group,
                len(self.reporting),
                builds_left_s(planned),
            )
            if left is not None:
                line += f" (about {left / 60:.1f} min left)"
        self.write(line)


def controller_progress(config, run_dir: Callable[[], Path]) -> WorkerProgress:
    """The xdist controller's progress for this run; `run_dir` names the run directory once asked."""

    def write(line: str) -> None:
        if (reporter := config.pluginmanager.get_plugin("terminalreporter")) is not None:
            reporter.write_line(f"[specperf] {line}")

    def known(planned: list[Scenario]) -> list[TimedResult]:
        from ..plan.progress import baseline_rows

        return baseline_rows(options(config).baseline_dir, machine(config)["hardware_key"], planned)

    return WorkerProgress(chosen_profile(config), run_dir, write, known)
