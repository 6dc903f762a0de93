"""Every judge keeps verdicts.Judge's contract: it returns a Judgement and changes nothing it is given."""

from __future__ import annotations

import pytest
from records import HARDWARE_KEY, make_record, make_scenario

from specperf.judge.baselines import write_baseline
from specperf.judge.gate import GateJudge
from specperf.judge.rules import DEFAULT_RULES, Judgement
from specperf.judge.stored import StoredJudge
from specperf.records import Gate, Side


def gate_result():
    """A candidate's result with its current build's side, 10 rounds on 2 engine pairs."""
    current = make_record(make_scenario(), throughput=[100.0 + i % 3 for i in range(10)])
    candidate = make_record(make_scenario(), throughput=[90.0 + i % 3 for i in range(10)])
    rounds = [r.model_copy(update={"engine_instance": i % 2}) for i, r in enumerate(candidate.rounds)]
    side = Side(rounds=current.rounds, metrics=current.metrics, output_hashes=current.output_hashes)
    gate = Gate(current=side, candidate_python="/candidate/bin/python", pairing="interleaved")
    return candidate.model_copy(update={"gate": gate, "rounds": rounds})


def stored_judge(tmp_path):
    write_baseline(tmp_path, make_record(make_scenario(), throughput=[120.0] * 5), HARDWARE_KEY)
    return StoredJudge(tmp_path, HARDWARE_KEY)


@pytest.mark.parametrize(
    "judge, result",
    [
        (stored_judge, lambda: make_record(make_scenario(), throughput=[90.0] * 5)),
        (lambda tmp_path: GateJudge(), gate_result),
    ],
    ids=["stored", "gate"],
)
def test_a_judge_returns_a_judgement_and_leaves_the_result_as_it_was(tmp_path, judge, result):
    given = result()
    before = given.model_dump()
    judgement = judge(tmp_path)(given, DEFAULT_RULES)
    assert isinstance(judgement, Judgement)
    assert judgement.verdict.status == "regression"  # each judged something: a slower candidate
    assert given.model_dump() == before
    assert given.verdict is None
