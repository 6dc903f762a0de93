"""The suite's hooks (specperf/hookspecs.py), through the real plugin: the example of the root
conftest.py, loaded as a plugin (`-p`, as pytest loads a conftest.py's hooks), on a suite run
whose only scenario needs a workload file that is missing (so it ends without starting an engine,
and its result is written all the same)."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
PERF_TESTS = CHECKOUT / "tests_perf" / "test_speculative_decoding.py"
EXAMPLE = re.search(r"```python\n(.*?)```", (CHECKOUT / "conftest.py").read_text(), re.S).group(1)

PROFILE = """
[profile]
name = "hooks-test"
tier = "cpu"
num_requests = 1
output_len = 8

[models.m]
path = "builtin:smollm2-135m"

[[cells]]
model = "m"
methods = ["nosd"]
batch_sizes = [1]
datasets = ["gsm8k"]
"""


def suite_run(pytester, tmp_path, *hooks: str):
    """A suite run with each of `hooks` (module source) loaded as a plugin."""
    names = [f"team_hooks_{i}" for i in range(len(hooks))]
    pytester.makepyfile(**dict(zip(names, hooks)))
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "hooks-test.toml").write_text(PROFILE)
    empty = tmp_path / "no-datasets"
    empty.mkdir()
    return pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        *[arg for name in names for arg in ("-p", name)],
        "-s",
        str(PERF_TESTS),
        "--profile",
        str(tmp_path / "hooks-test.toml"),
        "--dataset-dir",
        str(empty),
        "--reports-dir",
        str(tmp_path / "reports"),
        "--history",
        "off",
    )


def results_of(tmp_path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (tmp_path / "reports").glob("*/results/*.json")]


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("TEAM_CHAT_WEBHOOK", raising=False)


def test_the_conftest_example_sees_each_result_and_the_finished_run(pytester, tmp_path, offline):
    result = suite_run(pytester, tmp_path, EXAMPLE)
    out = result.stdout.str()
    (stored,) = results_of(tmp_path)
    assert stored["device"]["facts"] == {"kernel": platform.release()}  # pytest_specperf_machine_facts
    assert f"[team] {stored['scenario']['id']}: " in out  # pytest_specperf_result_written
    run_id = next((tmp_path / "reports").glob("*/run.json")).parent.name
    assert f"[team] specperf {run_id}: 1 scenarios, " in out and "report " in out  # pytest_specperf_run_finished


def test_machine_facts_of_several_conftests_merge_and_must_be_json(pytester, tmp_path, offline):
    hook = "def pytest_specperf_machine_facts(config):\n    return {{{}}}\n"
    suite_run(pytester, tmp_path, hook.format("'rack': 'r1', 'bios': 'old'"), hook.format("'bios': 'new'"))
    (stored,) = results_of(tmp_path)
    assert stored["device"]["facts"] == {"rack": "r1", "bios": "new"}  # the plugin loaded last wins
    result = suite_run(pytester, tmp_path / "bad", hook.format("'when': object()"))
    assert "pytest_specperf_machine_facts: not JSON" in result.stdout.str() + result.stderr.str()


def test_the_hooks_are_not_called_outside_the_suites_runs(pytester):
    pytester.makeconftest(
        "def pytest_specperf_run_finished(config, run, results, report):\n"
        "    raise AssertionError('hook ran outside the suite')\n"
    )
    pytester.makepyfile(test_other="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_other.py")
    assert result.ret == 0 and "hook ran outside the suite" not in result.stdout.str()
