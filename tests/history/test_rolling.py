"""Rolling baselines: judged against the median of the last N valid runs in the history, with the
optional two-strike rule."""

from __future__ import annotations

import pytest
from nightly import run_file
from records import HARDWARE_KEY, make_record, make_scenario

from specperf.history import History
from specperf.judge.rolling import MIN_RUNS, RollingJudge
from specperf.status import NO_BASELINE, PASS, REGRESSION, SUSPECT

SPREAD = (0.99, 1.0, 1.01, 1.0, 0.995)


def result(n: int, throughput: float):
    record = make_record(make_scenario(), throughput=[throughput * f for f in SPREAD])
    return record.model_copy(update={"finished_at": f"2026-11-{n + 1:02d}T02:00:00+00:00"})


def night(history: History, n: int, throughput: float, judge: RollingJudge | None = None):
    """Judge run n (when a judge is given), then record it with its verdict, as a suite run does."""
    record = result(n, throughput)
    verdict = judge(record).verdict if judge else None
    record.verdict = verdict
    run = run_file(f"night-{n:03d}", record)
    history.record(run.run_id, run, [record])
    return verdict


def judge_for(history: History, n: int, runs: int = 5, two_strike: bool = False) -> RollingJudge:
    return RollingJudge(history.reader(), HARDWARE_KEY, runs, f"night-{n:03d}", two_strike)


@pytest.fixture
def history(tmp_path):
    with History(f"sqlite:///{tmp_path / 'history.sqlite'}") as opened:
        yield opened


def test_the_baseline_is_the_median_of_the_last_n_runs(history):
    for n, value in enumerate([50, 100, 104, 96, 100, 102]):
        night(history, n, value)
    baseline, previous = judge_for(history, 6).baseline(result(6, 100))
    assert baseline.metrics["throughput_tok_s"].samples == pytest.approx([100, 104, 96, 100, 102])  # not 50
    assert baseline.metrics["throughput_tok_s"].value == pytest.approx(100)
    assert baseline.metrics["per_position_acceptance"].value == pytest.approx([0.7, 0.5, 0.3])
    assert previous["throughput_tok_s"] is None  # those runs were recorded unjudged


def test_a_slower_run_regresses_against_the_history(history):
    for n in range(5):
        night(history, n, 100 + n % 2)
    verdict = judge_for(history, 5)(result(5, 80)).verdict
    throughput = next(m for m in verdict.metrics if m.metric == "throughput_tok_s")
    assert (verdict.status, throughput.status, throughput.judged_by) == (REGRESSION, REGRESSION, "history")
    assert throughput.baseline == pytest.approx(100)


def test_too_little_history_is_no_baseline_yet(history):
    for n in range(MIN_RUNS - 1):
        night(history, n, 100)
    verdict = judge_for(history, MIN_RUNS - 1)(result(MIN_RUNS - 1, 50)).verdict
    assert verdict.status == NO_BASELINE
    assert f"fewer than {MIN_RUNS} valid runs" in verdict.note


def test_two_strikes_a_regression_fails_only_when_the_next_run_confirms_it(history):
    for n in range(5):
        night(history, n, 100)
    first = night(history, 5, 80, judge_for(history, 5, two_strike=True))
    assert first.status == SUSPECT and not first.failed
    assert "first strike" in next(m.note for m in first.metrics if m.metric == "throughput_tok_s")
    second = night(history, 6, 80, judge_for(history, 6, two_strike=True))
    assert second.status == REGRESSION and second.failed


def test_two_strikes_a_single_slow_night_never_fails(history):
    for n in range(5):
        night(history, n, 100)
    assert night(history, 5, 80, judge_for(history, 5, two_strike=True)).status == SUSPECT
    assert night(history, 6, 100, judge_for(history, 6, two_strike=True)).status == PASS


def test_the_rolling_judge_returns_a_judgement_and_leaves_the_result_as_it_was(history):
    """verdicts.Judge's contract, as tests/test_judge_contract.py checks it for the other judges."""
    for n in range(5):
        night(history, n, 100)
    given = result(5, 80)
    before = given.model_dump()
    judgement = judge_for(history, 5)(given)
    assert judgement.verdict.status == REGRESSION
    assert given.model_dump() == before and given.verdict is None
