"""One pytest case per scenario of the selected profile (--profile); see specperf/plugin.py."""

import pytest

from specperf.status import SKIPPED
from specperf.suite.selection import VERDICT_PROPERTY


def test_scenario(specperf_scenario, specperf_session, specperf_rounds, record_property):
    result = specperf_session.run(specperf_scenario, specperf_rounds)
    if result.status == SKIPPED:
        pytest.skip(result.error)
    figures = {name: entry.value for name, entry in result.metrics.items()}
    for name, value in figures.items():
        record_property(name, value)
    specperf_rounds.add_figures(figures)
    record_property(VERDICT_PROPERTY, result.verdict.status)
    if result.verdict.failed:
        pytest.fail(result.verdict.message, pytrace=False)
