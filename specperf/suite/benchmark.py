"""pytest-benchmark in the suite's runs: it times a scenario's rounds where it measures them (a run
without xdist, the rounds of one phase), its table fits a terminal, and it is never asked for where
it would not measure, so it has nothing to warn about.

A case that asked for the `benchmark` fixture up front would make pytest-benchmark warn at the end
of every run under xdist (it switches itself off there) and at every case it did not time (a gate's
engine sets, a result kept by --resume); so the fixture is requested only when the rounds run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

TABLE_COLUMNS = ("median", "rounds")  # pytest-benchmark's table in a suite run, unless --benchmark-columns


def choose_table_columns(config: pytest.Config) -> None:
    """pytest-benchmark's table shows each case's median round and round count, unless asked otherwise."""
    if config.getoption("benchmark_columns", "absent") is None:  # not chosen: a table that fits a terminal
        config.option.benchmark_columns = list(TABLE_COLUMNS)


class BenchmarkedRounds:
    """A scenario's rounds (run/measurement.py's rounds_runner), timed by pytest-benchmark's fixture,
    requested when they run.  Switched off (under xdist, or --benchmark-disable) pytest-benchmark runs
    its target once: the loop of all rounds.  With --benchmark-skip, or without pytest-benchmark
    (-p no:benchmark), the rounds run untimed."""

    def __init__(self, request: pytest.FixtureRequest):
        self._request = request
        self._benchmark = None

    def __call__(self, step: Callable[[], None], count: int) -> None:
        from ..run.loop import run_rounds  # not at the plugin's import: it imports numpy

        config = self._request.config
        if not config.pluginmanager.has_plugin("benchmark") or config.getoption("benchmark_skip"):
            run_rounds(step, count)
            return
        self._benchmark = self._request.getfixturevalue("benchmark")
        if self._benchmark.disabled:
            self._benchmark.pedantic(run_rounds, args=(step, count))
        else:
            self._benchmark.pedantic(step, rounds=count, iterations=1, warmup_rounds=0)

    def add_figures(self, figures: dict) -> None:
        """The scenario's figures beside pytest-benchmark's timing (its JSON's extra_info), where it
        timed the rounds."""
        if self._benchmark is not None:
            self._benchmark.extra_info.update(figures)
