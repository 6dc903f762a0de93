"""pytest-benchmark in the suite's runs (suite/benchmark.py): it times a case's rounds in a run
without xdist, with its JSON, and warns of nothing in a run under xdist (`tox -e perf`) or in a gate
(`tox -e gate`).

Each run is a real pytest run of tests_perf/'s case through the real plugin, the session measuring
with fake engines (tests/test_session.py's), so that the rounds reach pytest-benchmark as they do
with vLLM; only the engines are stand-ins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PERF_TESTS = TESTS.parent / "tests_perf" / "test_speculative_decoding.py"
ROUNDS = 4

PROFILE = f"""
[profile]
name = "benchmark-test"
tier = "cpu"
rounds = {ROUNDS}
num_requests = 1
output_len = 8
{{gate_settings}}

[models.tiny]
path = "builtin:tiny-llama"

[methods.ngram-k3]
method = "ngram"
num_speculative_tokens = 3
prompt_lookup_min = 3
prompt_lookup_max = 7

[[cells]]
model = "tiny"
methods = ["ngram-k3"]
batch_sizes = [1]
datasets = ["gsm8k"]
"""

# The run session of the cases: fake engines; a gate's, current against candidate, when GATE.
CONFTEST = """
import pytest
from test_gate import gate
from test_session import Starter, session

GATE = {gate}


@pytest.fixture(scope="session")
def specperf_session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    return gate(folder, Starter()) if GATE else session(folder)
"""


def suite_run(pytester, monkeypatch, *args, gate: bool = False):
    """The suite's case on a two-scenario profile (the no-SD reference and n-gram), in a subprocess;
    a gate's spreads its rounds over two sets of engines, as cpu-gate's do."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest(CONFTEST.format(gate=gate))
    pytester.makepyfile(test_speculative_decoding=PERF_TESTS.read_text())
    profile = pytester.path / "benchmark-test.toml"
    profile.write_text(PROFILE.format(gate_settings="gate_engine_sets = 2" if gate else ""))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--profile", str(profile), "--reports-dir", str(pytester.path / "reports"), *args
    )
    result.assert_outcomes(passed=2)
    return result


def benchmark_warnings(result) -> list[str]:
    return [line for line in result.outlines + result.errlines if "PytestBenchmarkWarning" in line]


def timed(pytester) -> dict[str, dict]:
    """pytest-benchmark's JSON (--benchmark-json): each timed case's stats and extra_info, by case."""
    data = json.loads((pytester.path / "benchmark.json").read_text())
    return {b["param"]: b for b in data["benchmarks"]}


def test_a_run_without_xdist_times_every_case_with_pytest_benchmark_and_its_json(pytester, monkeypatch):
    result = suite_run(pytester, monkeypatch, "--benchmark-json", "benchmark.json")
    assert benchmark_warnings(result) == []
    cases = timed(pytester)
    assert sorted(cases) == ["tiny-ngram-k3-bs1-gsm8k", "tiny-nosd-bs1-gsm8k"]
    assert all(case["stats"]["rounds"] == ROUNDS for case in cases.values())
    assert cases["tiny-ngram-k3-bs1-gsm8k"]["extra_info"]["mean_acceptance_length"] == pytest.approx(2.5)
    result.stdout.fnmatch_lines(["*Median*Rounds*"])  # the suite's table: the median round and the round count


def test_a_run_under_xdist_warns_of_nothing(pytester, monkeypatch):
    """pytest-benchmark switches itself off under xdist, and says so at the end of a run whose cases
    asked for its fixture up front."""
    result = suite_run(pytester, monkeypatch, "-n", "2")
    assert benchmark_warnings(result) == []
    assert "automatically disabled" not in result.stdout.str() + result.stderr.str()


def test_a_gate_warns_of_nothing_and_times_nothing(pytester, monkeypatch):
    """A gate's rounds alternate over engine sets, which pytest-benchmark cannot time as one call: a
    case that asked for its fixture up front would leave it unused, and it would warn at every case."""
    result = suite_run(pytester, monkeypatch, gate=True)
    assert benchmark_warnings(result) == []
    assert "not used at all" not in result.stdout.str() + result.stderr.str()
    assert "Median" not in result.stdout.str()  # no table: nothing was timed


@pytest.mark.parametrize("switch", [["--benchmark-disable"], ["--benchmark-skip"], ["-p", "no:benchmark"]])
def test_without_pytest_benchmark_the_rounds_run_untimed(pytester, monkeypatch, switch):
    """Switched off, skipping, or not loaded at all, pytest-benchmark times nothing; every case still
    measures its rounds, and nothing warns."""
    result = suite_run(pytester, monkeypatch, *switch)
    assert benchmark_warnings(result) == []
    assert "Median" not in result.stdout.str()
