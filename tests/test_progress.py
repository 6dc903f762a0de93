"""The run's time left (plan/progress.py) on constructed results: the planner fed with the finished
results, corrected by how long they really took."""

from __future__ import annotations

import pytest
from records import HARDWARE_KEY, make_record
from test_plan import profile, scenario

from specperf.plan import Planner
from specperf.plan.progress import baseline_rows, modelled_s, parallel_time_left_s, time_left_s, timed_result
from specperf.records import Timings

NOSD_GSM8K = "small-nosd-bs1-gsm8k"
NOSD_AIME = "small-nosd-bs1-aime"
NGRAM_GSM8K = "small-ngram-k3-bs1-gsm8k"


def finished(s, measure_s=20.0, start_s=10.0, throughput=(40.0, 41.0, 39.0, 40.0)):
    record = make_record(s, throughput=list(throughput))
    return record.model_copy(update={"timings": Timings(engine_start_s=start_s, warmup_s=1.0, measure_s=measure_s)})


def test_a_finished_result_reads_as_a_history_row(tmp_path):
    prof = profile(tmp_path)
    row = timed_result(finished(scenario(prof, NGRAM_GSM8K)))
    assert (row.model, row.method, row.batch_size, row.dataset) == ("small", "ngram-k3", 1, "gsm8k")
    assert row.scenario_hash == scenario(prof, NGRAM_GSM8K).hash
    assert (row.engine_start_s, row.warmup_s, row.measure_s) == (10.0, 1.0, 20.0)
    assert row.throughput == 40.0 and row.speedup is not None
    assert row.rounds == 4 and row.output_tokens == 400
    assert timed_result(finished(scenario(prof, NOSD_GSM8K))).speedup is None  # a reference has none


def test_the_time_left_scales_with_how_long_the_finished_scenarios_took(tmp_path):
    prof = profile(tmp_path)
    planned = [s for s in prof.scenarios if s.batch_size == 1]
    done = [finished(scenario(prof, NOSD_GSM8K))]
    left = time_left_s(prof, planned, (), done, done, 40.0)
    assert left is not None and left > 0
    assert time_left_s(prof, planned, (), done, done, 80.0) == pytest.approx(2 * left)
    assert time_left_s(prof, planned, (), done, [], 40.0) is None  # nothing measured yet: no estimate


def test_nothing_left_is_no_time_and_more_left_is_more(tmp_path):
    prof = profile(tmp_path)
    done = [finished(scenario(prof, NOSD_GSM8K))]
    assert time_left_s(prof, [scenario(prof, NOSD_GSM8K)], (), done, done, 40.0) == 0
    one = time_left_s(prof, [scenario(prof, NOSD_GSM8K), scenario(prof, NOSD_AIME)], (), done, done, 40.0)
    two = time_left_s(
        prof, [scenario(prof, NOSD_GSM8K), scenario(prof, NOSD_AIME), scenario(prof, NGRAM_GSM8K)], (), done, done, 40.0
    )
    assert 0 < one < two


def test_results_kept_by_resume_take_none_of_the_elapsed_time(tmp_path):
    prof = profile(tmp_path)
    kept, measured = finished(scenario(prof, NOSD_GSM8K)), finished(scenario(prof, NOSD_AIME))
    planned = [s for s in prof.scenarios if s.batch_size == 1]
    one_measured = time_left_s(prof, planned, (), [kept, measured], [measured], 40.0)
    both_measured = time_left_s(prof, planned, (), [kept, measured], [kept, measured], 40.0)
    assert one_measured > 1.3 * both_measured  # the 40 s went to one scenario, not to two
    # a kept result may come after a measured one: the order of the run's results does not matter
    assert time_left_s(prof, planned, (), [measured, kept], [measured], 40.0) == pytest.approx(one_measured)


def test_the_engine_still_up_costs_no_start(tmp_path):
    prof = profile(tmp_path)
    s = scenario(prof, NOSD_AIME)
    planner = Planner(prof, [timed_result(finished(scenario(prof, NOSD_GSM8K)))])
    start = planner.engine_start([s]).value
    assert start == 10.0  # the same engine key's measured start
    assert modelled_s(planner, [s], alive=s.engine_key) == pytest.approx(modelled_s(planner, [s]) - start)


def test_a_baseline_of_this_machine_gives_an_sd_scenario_its_speedup(tmp_path):
    """Without it the planner has the draft model at no speedup until the run measures one."""
    from specperf.judge.baselines import write_baseline

    prof = profile(tmp_path)
    draft = scenario(prof, "small-draft-k3-bs1-gsm8k")
    slow = make_record(draft, throughput=[2.0, 2.0, 2.0, 2.0], reference_throughput=40.0)  # speedup 0.05
    write_baseline(tmp_path / "baselines", slow, HARDWARE_KEY)
    (tmp_path / "baselines" / HARDWARE_KEY / "small-ngram-k3-bs1-gsm8k.json").write_text("{")  # corrupt: left out
    rows = baseline_rows(tmp_path / "baselines", HARDWARE_KEY, [draft, scenario(prof, NGRAM_GSM8K)])
    assert [(r.scenario_hash, r.throughput, r.speedup) for r in rows] == [(draft.hash, 2.0, 0.05)]
    done = [finished(scenario(prof, NOSD_GSM8K))]
    planned = [scenario(prof, NOSD_GSM8K), draft]
    assert time_left_s(prof, planned, rows, done, done, 40.0) > 2 * time_left_s(prof, planned, (), done, done, 40.0)


def by_dataset(s) -> str:
    return s.dataset  # a made-up grouping: each workload's scenarios on one worker


def own_s(result) -> float:
    return result.timings.engine_start_s + result.timings.warmup_s + result.timings.measure_s


def test_on_workers_the_work_left_is_shared_but_a_group_never_splits(tmp_path):
    prof = profile(tmp_path)
    planned = [s for s in prof.scenarios if s.batch_size == 1]
    done = [finished(scenario(prof, NOSD_GSM8K))]
    planner = Planner(prof, [timed_result(done[0])])
    scale = own_s(done[0]) / modelled_s(planner, [done[0].scenario])  # what it took itself, not the run's time
    rest = [s for s in planned if s.id != NOSD_GSM8K]
    one_group = parallel_time_left_s(prof, planned, (), done, 40.0, 2, lambda s: "all")
    assert one_group == pytest.approx(modelled_s(planner, rest, alive=done[0].scenario.engine_key) * scale)
    assert parallel_time_left_s(prof, planned, (), done, 400.0, 2, lambda s: "all") == pytest.approx(one_group)
    # groups of their own: the work left per worker, or the longest group where that is longer
    per_group = parallel_time_left_s(prof, planned, (), done, 40.0, 2, lambda s: s.id)
    groups = [modelled_s(planner, [s]) * scale for s in rest]
    assert per_group == pytest.approx(max(sum(groups) / 2, max(groups)))
    assert per_group < one_group


def test_on_workers_nothing_finished_or_nothing_that_started_is_no_estimate(tmp_path):
    prof = profile(tmp_path)
    gsm8k = [s for s in prof.scenarios if s.batch_size == 1 and s.dataset == "gsm8k"]
    assert parallel_time_left_s(prof, gsm8k, (), [], 40.0, 2, by_dataset) is None
    failed = finished(scenario(prof, NOSD_GSM8K), measure_s=0.0, start_s=0.0)
    failed = failed.model_copy(update={"timings": failed.timings.model_copy(update={"warmup_s": 0.0})})
    assert parallel_time_left_s(prof, gsm8k, (), [failed], 40.0, 2, by_dataset) is None


def test_on_workers_a_silent_workers_group_has_run_since_the_start(tmp_path):
    prof = profile(tmp_path)
    planned = [s for s in prof.scenarios if s.batch_size == 1]
    done = [finished(scenario(prof, NOSD_GSM8K))]
    planner = Planner(prof, [timed_result(done[0])])
    scale = own_s(done[0]) / modelled_s(planner, [done[0].scenario])
    # one worker has finished a scenario; the other has been on the first group not yet seen for 40 s
    left = parallel_time_left_s(prof, planned, (), done, 40.0, 2, by_dataset, reporting=1)
    gsm8k = [s for s in planned if s.dataset == "gsm8k" and s.id != NOSD_GSM8K]
    others = [s for s in planned if s.dataset != "gsm8k"]
    mine = modelled_s(planner, gsm8k, alive=done[0].scenario.engine_key) * scale
    silent = max(0.0, modelled_s(planner, others) * scale - 40.0)
    assert left == pytest.approx(max((mine + silent) / 2, mine, silent))
    assert left < parallel_time_left_s(prof, planned, (), done, 40.0, 2, by_dataset)  # both reporting


def test_a_checkpoint_still_to_build_is_counted_once_however_many_engines_load_it(tmp_path):
    prof = profile(tmp_path)
    planner = Planner(prof)
    draft = {"builtin:smollm2-135m-draft": "smollm2-135m-draft-v2"}
    loading = [scenario(prof, sid).model_copy(update={"checkpoints": draft}) for sid in (NOSD_GSM8K, NGRAM_GSM8K)]
    assert len({s.engine_key for s in loading}) == 2
    plain = modelled_s(planner, loading)
    assert modelled_s(planner, loading, builds={"builtin:smollm2-135m-draft": 80.0}) == pytest.approx(plain + 80.0)
    assert modelled_s(planner, loading, builds={"builtin:tiny-llama": 5.0}) == pytest.approx(plain)  # not theirs
    done = [finished(scenario(prof, NOSD_AIME))]
    without = time_left_s(prof, [*loading, done[0].scenario], (), done, done, 40.0)
    with_build = time_left_s(
        prof, [*loading, done[0].scenario], (), done, done, 40.0, {"builtin:smollm2-135m-draft": 80.0}
    )
    assert with_build > without
