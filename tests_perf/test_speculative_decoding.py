"""One pytest case per scenario of the selected profile (--profile); see specperf/plugin.py."""

import pytest

from specperf.status import SKIPPED
from specperf.suite.selection import VERDICT_PROPERTY


def test_scenario(specperf_scenario, specperf_session, benchmark, record_property):
    result = specperf_session.run(specperf_scenario, benchmark)
    if result.status == SKIPPED:
        pytest.skip(result.error)
    for name, entry in result.metrics.items():
        record_property(name, entry.value)
    record_property(VERDICT_PROPERTY, result.verdict.status)
    if result.verdict.failed:
        pytest.fail(result.verdict.message, pytrace=False)
