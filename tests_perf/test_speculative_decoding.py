"""One pytest case per scenario of the selected profile (--profile); see specperf/plugin.py."""

import pytest


def test_scenario(specperf_scenario, specperf_session, benchmark, record_property):
    result = specperf_session.run(specperf_scenario, benchmark)
    if result["status"] == "skipped":
        pytest.skip(result["error"])
    for name, entry in result.get("metrics", {}).items():
        record_property(name, entry["value"])
    verdict = result["verdict"]
    record_property("verdict", verdict["status"])
    if verdict["failed"]:
        pytest.fail(verdict["message"], pytrace=False)
