"""Portable baselines: acceptance and lossless are judged on a machine whose hardware has no baseline."""

from __future__ import annotations

import pytest
from records import make_record, make_scenario, scaled_counters

from specperf.judge.baselines import (
    PORTABLE,
    baseline_path,
    load_baseline,
    portable_from_result,
    write_baseline,
    write_portable_baseline,
)
from specperf.judge.rules import DEFAULT_RULES, Rules
from specperf.judge.stored import StoredJudge
from specperf.profiles.scenarios import load_profile
from specperf.records import Metric

NEW_MACHINE = "cpu-made-up-riscv-64c"


@pytest.fixture
def store(tmp_path):
    recorded = make_record(hardware_key="cpu-recorder-2c")
    assert write_portable_baseline(tmp_path, recorded) == baseline_path(tmp_path, PORTABLE, recorded.id)
    return tmp_path


def judged(store, result, key=NEW_MACHINE, rules=DEFAULT_RULES):
    return StoredJudge(store, key)(result, rules).verdict


def test_a_new_machine_judges_acceptance_against_the_portable_baseline(store):
    verdict = judged(store, make_record(hardware_key=NEW_MACHINE))
    by_metric = {m.metric: m for m in verdict.metrics}
    assert by_metric["mean_acceptance_length"].status == "pass"
    assert by_metric["mean_acceptance_length"].judged_by == PORTABLE
    assert by_metric["lossless_fraction"].judged_by == PORTABLE
    assert by_metric["throughput_tok_s"].status == "no-baseline" and by_metric["throughput_tok_s"].judged_by == ""
    assert verdict.status == "no-baseline"  # speed gates here and has no baseline yet
    assert f"speed has no baseline on {NEW_MACHINE} yet: record one with --update-baselines" in verdict.note


@pytest.mark.parametrize(
    "recorded_s, judged_s, speed_judged",
    [
        (0.04, 0.04, True),
        (0.05, 0.04, True),  # within SPEED_MATCH: one machine's load
        (0.06, 0.04, False),  # the baseline's machine half again as slow
        (0.028, 0.04, False),
        (None, 0.04, False),  # a baseline from before the calibration
    ],
)
def test_a_speed_baseline_judges_only_a_machine_of_its_own_speed(store, recorded_s, judged_s, speed_judged):
    """Machines of one CPU key differ in speed: a speed baseline whose calibration is not this
    machine's leaves speed without a baseline (not +90%), and acceptance still judged by the
    portable one."""
    recorded = make_record(hardware_key=NEW_MACHINE, throughput=[200.0, 201.0, 199.0, 200.5, 199.5])
    recorded.device.calibration_s = recorded_s
    write_baseline(store, recorded, NEW_MACHINE)
    result = make_record(hardware_key=NEW_MACHINE, throughput=[100.0, 101.0, 99.0, 100.5, 99.5])
    result.device.calibration_s = judged_s
    verdict = judged(store, result)
    by_metric = {m.metric: m for m in verdict.metrics}
    assert by_metric["mean_acceptance_length"].status == "pass"
    if speed_judged:
        assert by_metric["throughput_tok_s"].status == "regression" and verdict.status == "regression"
        return
    assert (
        by_metric["throughput_tok_s"].status == "no-baseline"
        and by_metric["mean_acceptance_length"].judged_by == PORTABLE
    )
    assert verdict.status == "no-baseline"
    why = "has no calibration" if recorded_s is None else ("slower" if recorded_s > judged_s else "faster")
    assert why in verdict.note and "so speed has no baseline here" in verdict.note


def test_a_scenario_with_no_baseline_anywhere_says_how_to_record_one(tmp_path):
    verdict = judged(tmp_path, make_record(hardware_key=NEW_MACHINE))
    assert verdict.status == "no-baseline"
    assert verdict.note == (f"no baseline yet, for {NEW_MACHINE} or portable: record one with --update-baselines")


def test_where_speed_is_informational_the_new_machine_passes(store):
    scenario = make_scenario()
    result = make_record(scenario, hardware_key=NEW_MACHINE)
    rules = Rules(informational=frozenset({"throughput_tok_s", "speedup"}))
    assert judged(store, result, rules=rules).status == "pass"


@pytest.mark.parametrize(
    "corrupt",
    [
        {"metrics": {}},
        {"metrics": {"lossless_fraction": {"value": 1.0, "samples": []}}},
        {"metrics": {"lossless_fraction": {"value": 1.0, "samples": [None]}}},  # once no-baseline, and a pass
    ],
)
def test_an_empty_hardware_baseline_is_corrupt_and_never_hides_the_portable_one(store, corrupt):
    import json

    result = make_record(lossless=0.0, hardware_key=NEW_MACHINE)
    path = write_baseline(store, make_record(hardware_key=NEW_MACHINE), NEW_MACHINE)
    path.write_text(json.dumps({**json.loads(path.read_text()), **corrupt}))
    verdict = judged(store, result)
    assert verdict.status == "error" and verdict.failed
    assert str(path) in verdict.note and "corrupt baseline" in verdict.note


@pytest.mark.parametrize(
    "kind, throughput, problem",
    [
        ("cpu", 1e-5, "outside what a cpu measures, [0.01, 100000]"),
        ("gpu", 0.05, "outside what a gpu measures, [0.1, 1e+07]"),
        ("gpu", 5e7, "outside what a gpu measures"),
    ],
)
def test_a_speed_no_machine_of_its_kind_measures_makes_a_baseline_corrupt(store, kind, throughput, problem):
    import json

    path = write_baseline(store, make_record(hardware_key=NEW_MACHINE), NEW_MACHINE)
    data = json.loads(path.read_text())
    data["device"]["kind"] = kind
    data["metrics"]["throughput_tok_s"]["samples"][0] = throughput
    path.write_text(json.dumps(data))
    verdict = judged(store, make_record(hardware_key=NEW_MACHINE))
    assert verdict.status == "error" and f"a sample of throughput_tok_s {throughput!r} is {problem}" in verdict.note


def test_a_metric_the_hardware_baseline_lacks_is_judged_by_the_portable_one(store):
    """A hardware baseline without lossless_fraction once made a lossless drop from 1 to 0 a
    no-baseline pass, while baselines/portable/ held lossless 1."""
    import json

    path = write_baseline(store, make_record(hardware_key=NEW_MACHINE), NEW_MACHINE)
    data = json.loads(path.read_text())
    del data["metrics"]["lossless_fraction"]
    path.write_text(json.dumps(data))
    verdict = judged(store, make_record(lossless=0.0, hardware_key=NEW_MACHINE))
    lossless = next(m for m in verdict.metrics if m.metric == "lossless_fraction")
    assert lossless.status == "regression" and lossless.judged_by == PORTABLE
    assert verdict.status == "regression" and verdict.failed
    assert {m.judged_by for m in verdict.metrics if m.metric != "lossless_fraction" and m.baseline} == {"hardware"}


def test_an_acceptance_drop_on_a_new_machine_fails(store):
    result = make_record(counters=scaled_counters(0.8), hardware_key=NEW_MACHINE)
    verdict = judged(store, result)
    assert verdict.status == "regression" and verdict.failed
    assert {m.metric for m in verdict.metrics if m.status == "regression"} >= {"mean_acceptance_length"}


def test_a_baseline_of_the_hardware_itself_wins(store):
    own = make_record(counters=scaled_counters(0.8), hardware_key=NEW_MACHINE)
    write_baseline(store, own, NEW_MACHINE)
    verdict = judged(store, make_record(counters=scaled_counters(0.8), hardware_key=NEW_MACHINE))
    assert verdict.status == "pass"
    assert {m.judged_by for m in verdict.metrics} == {"hardware"}


def test_portable_baselines_hold_deterministic_metrics_only():
    record = make_record()  # the distribution check's p is judged on its own value, from this machine's draws
    record.metrics["distribution_match_p"] = Metric(value=0.5, samples=[0.5])
    portable = portable_from_result(record)
    assert set(portable.metrics) == {
        "mean_acceptance_length",
        "draft_acceptance_rate",
        "per_position_acceptance",
        "lossless_fraction",
    }
    assert portable.hardware_key == PORTABLE and portable.device is None


@pytest.mark.parametrize("profile", ["cpu-smoke", "cpu-full"])
def test_committed_portable_baselines_match_the_cpu_profiles(profile):
    """cpu-smoke's and cpu-full's SD scenarios each have a portable baseline of their definition (the
    cells they share are the same cells: one id, one baseline)."""
    from specperf.paths import baseline_dir

    sd = [s for s in load_profile(profile).scenarios if not s.method.is_reference]
    for scenario in sd:
        baseline = load_baseline(baseline_dir(), PORTABLE, scenario.id)
        assert baseline is not None, scenario.id
        assert baseline.scenario_hash == scenario.hash, scenario.id
