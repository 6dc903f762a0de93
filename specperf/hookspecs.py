"""Hooks a team's conftest.py implements to customise a run without forking the suite.

Declared as pytest declares its own (plugin.py registers them in pytest_addhooks); each is called
only in the suite's own runs.  conftest.py at the top of the checkout shows one of each.
"""

from __future__ import annotations

import pluggy
import pytest

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_specperf_machine_facts(config: pytest.Config) -> dict | None:
    """Facts about this machine to record with every result (the device's `facts`), such as a
    rack, a BIOS setting or a driver flag the suite cannot see.  Every implementation's dict is
    merged, later ones winning; values must be JSON (strings, numbers, booleans, lists, dicts).
    They are shown in the report and never change the hardware key."""


@hookspec
def pytest_specperf_result_written(config: pytest.Config, result, path) -> None:
    """A scenario's result has just been written, judged, to `path` (result: records.ScenarioResult;
    its `verdict` says how it compared).  Called in the process that measured it."""


@hookspec
def pytest_specperf_run_finished(config: pytest.Config, run, results: list, report) -> None:
    """The run is over: run.json written (run: records.RunFile), `results` its judged
    records.ScenarioResult, `report` the path of report.html (None when it could not be written).
    Called once, in the process that closes the run (the xdist controller); for example to post
    the verdicts to a chat channel."""
