"""The xdist controller's progress lines (suite/progress.py) from constructed test reports and
results written into a run directory, as a worker writes them."""

from __future__ import annotations

from types import SimpleNamespace

from test_plan import profile, scenario
from test_progress import NGRAM_GSM8K, NOSD_GSM8K, finished

from specperf.storage import write_result
from specperf.suite.progress import WorkerProgress
from specperf.suite.selection import SCENARIO_PROPERTY


def report(scenario_id, when="call", outcome="passed", verdict="pass", worker="gw0"):
    properties = [(SCENARIO_PROPERTY, scenario_id)] + ([("verdict", verdict)] if verdict else [])
    node = SimpleNamespace(gateway=SimpleNamespace(id=worker))
    return SimpleNamespace(
        user_properties=properties, when=when, outcome=outcome, skipped=outcome == "skipped", node=node
    )


def nodeid(scenario_id):  # as --dist loadgroup sends it: the group after "@"
    return f"tests_perf/test_speculative_decoding.py::test_scenario[{scenario_id}]@small"


def test_the_controller_says_each_finished_scenario_once_with_its_verdict_and_the_time_left(tmp_path):
    prof = profile(tmp_path)
    planned = [s for s in prof.scenarios if s.batch_size == 1 and s.dataset == "gsm8k"]
    lines: list[str] = []
    progress = WorkerProgress(prof, lambda: tmp_path / "run", lines.append, lambda scenarios: [])
    for _ in range(2):  # every worker reports its collection
        progress.pytest_xdist_node_collection_finished(None, [nodeid(s.id) for s in planned] + ["tests/other.py::t"])
    assert progress.planned == planned and progress.workers == 2
    write_result(tmp_path / "run", finished(scenario(prof, NOSD_GSM8K)))
    for when in ("setup", "call", "teardown"):
        progress.pytest_runtest_logreport(report(NOSD_GSM8K, when=when))
    not_the_suites = SimpleNamespace(user_properties=[], when="call", skipped=False)
    progress.pytest_runtest_logreport(not_the_suites)
    assert len(lines) == 1
    assert lines[0].startswith(f"[1/{len(planned)}] {NOSD_GSM8K}: pass, ") and "min left)" in lines[0]
    # a scenario that failed before its result was written is still said, without anything to time
    progress.pytest_runtest_logreport(report(NGRAM_GSM8K, when="setup", outcome="skipped", verdict=None))
    assert lines[1].startswith(f"[2/{len(planned)}] {NGRAM_GSM8K}: skipped, ")
    assert [r.id for r in progress.finished] == [NOSD_GSM8K]
    assert progress.reporting == {"gw0"}
