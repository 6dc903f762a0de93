"""The measured best k (analysis/best_k.py), the schedule `specperf tune` builds from it
(analysis/tune.py, cli/tune.py), on constructed results."""

from __future__ import annotations

import json

import pytest

from specperf.analysis.best_k import best_k_table
from specperf.analysis.tune import tune
from specperf.cli import main
from specperf.profiles.scenarios import Method
from tests.records import make_record, reference_scenario, write_run
from tests.records import make_scenario as unit_scenario

REFERENCE = 100.0  # no-SD tokens/s


def ngram(k: int) -> Method:
    return Method(
        label=f"ngram-k{k}",
        name="ngram",
        params={"num_speculative_tokens": k, "prompt_lookup_min": 3, "prompt_lookup_max": 7},
    )


def swept(k: int, speedups: list[float], batch_size: int = 1, dataset: str = "gsm8k", **kwargs):
    """The result of k at one batch size whose paired rounds measured `speedups` over no SD."""
    scenario = unit_scenario(ngram(k), batch_size=batch_size, dataset=dataset).replace(paired_reference=True)
    return make_record(scenario, throughput=[REFERENCE * s for s in speedups], reference_throughput=REFERENCE, **kwargs)


def reference(batch_size: int = 1, dataset: str = "gsm8k", throughput: float = REFERENCE):
    return make_record(reference_scenario(batch_size=batch_size, dataset=dataset), throughput=[throughput] * 5)


TIGHT = [-0.01, 0.0, 0.01, 0.005, -0.005]  # round-to-round spread around a speedup
NOISY = [-0.3, 0.3, -0.2, 0.2, 0.0]


def around(value: float, spread: list[float] = TIGHT) -> list[float]:
    return [value + d for d in spread]


def test_the_fastest_k_is_best_and_run_when_it_is_clearly_fastest():
    [row] = best_k_table([swept(1, around(1.2)), swept(3, around(1.5)), swept(5, around(1.3))])
    assert (row.model, row.method, row.dataset, row.batch_size) == ("tiny-llama", "ngram", "gsm8k", 1)
    assert [s.k for s in row.ks] == [0, 1, 3, 5]
    assert (row.best, row.chosen) == (3, 3)
    k3 = row.speedup_of(3)
    assert k3.low < 1.5 < k3.high and k3.high - k3.low < 0.05 and k3.paired


def test_a_noisy_k_is_not_picked_on_the_strength_of_its_noise():
    [row] = best_k_table([swept(1, around(1.2)), swept(3, around(1.5)), swept(5, around(1.6, NOISY))])
    assert row.speedup_of(5).speedup > row.speedup_of(3).speedup
    assert (row.best, row.chosen) == (3, 3)


def test_the_smallest_k_shown_within_the_gate_tolerance_of_the_best_is_run():
    [row] = best_k_table([swept(1, around(1.2)), swept(3, around(1.5)), swept(5, around(1.51))])
    assert (row.best, row.chosen) == (5, 3)
    [row] = best_k_table([swept(1, around(1.2)), swept(3, around(1.5)), swept(5, around(1.6))])
    assert (row.best, row.chosen) == (5, 5)  # 6% apart: more than the tolerance


@pytest.mark.parametrize(
    "speedups, best, chosen",
    [
        ((around(0.8), around(0.7)), 0, 0),  # SD loses: no SD is best
        ((around(1.05, NOISY), around(1.02, NOISY)), 0, 0),  # faster by a margin within the noise
    ],
)
def test_no_sd_is_chosen_where_no_k_is_shown_to_beat_it(speedups, best, chosen):
    [row] = best_k_table([swept(1, speedups[0]), swept(3, speedups[1])])
    assert (row.best, row.chosen) == (best, chosen)


def test_only_usable_results_of_two_or_more_k_make_a_row():
    results = [
        swept(1, around(1.2)),
        swept(3, around(1.5), reasons=["a foreign process used the GPU"]),  # invalid
        swept(5, around(1.3), status="error", error="engine died"),
        swept(3, around(1.4), batch_size=4),  # one k at bs4: nothing to choose between
        reference(),
    ]
    assert best_k_table(results) == []
    results.append(swept(5, around(1.3), batch_size=4))
    [row] = best_k_table(results)
    assert (row.batch_size, [s.k for s in row.ks]) == (4, [0, 3, 5])


def sweep_results(dataset: str = "gsm8k", at_bs1=(1.2, 1.5, 1.6), at_bs4=(1.1, 1.3, 1.0)):
    results = [reference(1, dataset), reference(4, dataset)]
    for batch_size, speedups in ((1, at_bs1), (4, at_bs4)):
        results += [swept(k, around(s), batch_size, dataset) for k, s in zip((1, 3, 5), speedups)]
    return results


def test_tune_hands_vllm_the_chosen_k_per_batch_size_as_one_schedule():
    [tuned] = tune(sweep_results())
    assert [r.chosen for r in tuned.rows] == [5, 3]
    assert tuned.schedule == [(1, 2, 5), (3, 4, 3)]
    config = tuned.speculative_config()
    assert config == {
        "method": "ngram",
        "prompt_lookup_min": 3,
        "prompt_lookup_max": 7,
        "num_speculative_tokens": 5,
        "num_speculative_tokens_per_batch_size": [[1, 2, 5], [3, 4, 3]],
    }


def test_a_mix_of_workloads_weighs_each_by_its_share_of_the_time():
    code = sweep_results("instructcoder", at_bs1=(1.1, 2.0, 1.5), at_bs4=(1.1, 2.0, 1.5))
    chat = sweep_results("sharegpt", at_bs1=(1.1, 0.7, 0.6), at_bs4=(1.1, 0.7, 0.6))
    even = tune(code + chat, {"instructcoder": 1, "sharegpt": 1})
    [row] = even[0].rows[:1]
    # half the tokens each at 100 tok/s without SD: k3 takes .5/200 + .5/70 of the time, k1 1/110
    assert row.speedup_of(3).speedup == pytest.approx(0.01 / (0.5 / 200 + 0.5 / 70), rel=1e-3)
    assert row.speedup_of(1).speedup == pytest.approx(1.1, rel=1e-3)
    assert (row.best, row.chosen) == (1, 1)
    mostly_code = tune(code + chat, {"instructcoder": 9, "sharegpt": 1})
    assert mostly_code[0].rows[0].best == 3
    assert mostly_code[0].dataset == "mix instructcoder 90%, sharegpt 10%"
    assert tune(code + chat, {"instructcoder": 1, "gsm8k": 1}) == []  # gsm8k was not measured


def test_specperf_tune_prints_the_config_and_writes_json(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run", sweep_results())
    out = tmp_path / "tuned.json"
    assert main(["tune", str(run_dir), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "bs1: best k5, run k5" in printed
    assert '"num_speculative_tokens_per_batch_size": [[1, 2, 5], [3, 4, 3]]' in printed
    assert "[methods.ngram-tuned]" in printed
    [written] = json.loads(out.read_text())
    assert written["schedule"] == [[1, 2, 5], [3, 4, 3]]
    assert [m["chosen_k"] for m in written["measured"]] == [5, 3]


def test_specperf_tune_says_in_one_line_when_there_is_nothing_to_tune(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run", [reference(), swept(3, around(1.5))])
    assert main(["tune", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no k sweep in" in err
    assert main(["tune", str(run_dir), "--mix", "gsm8k=-1"]) == 2
    assert "--mix: 'gsm8k=-1' is not DATASET=WEIGHT" in capsys.readouterr().err


def test_the_report_shows_each_k_with_its_interval_and_the_json_holds_them(tmp_path):
    from specperf.report import write_report

    run_dir = write_run(tmp_path / "run", sweep_results())
    page = write_report([run_dir]).read_text()
    assert 'id="best-k"' in page and "k5: 1.60x [" in page
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {row["batch_size"]: row for row in summary["best_k"]}
    assert (rows[1]["best_k"], rows[1]["chosen_k"], rows[4]["chosen_k"]) == (5, 5, 3)
    low, high = rows[1]["ks"][2]["interval"]
    assert low < 1.6 < high


def dynamic(speedups: list[float], batch_size: int, schedule=((1, 1, 5), (2, 4, 3))):
    method = Method(
        label="ngram-dynamic",
        name="ngram",
        params={
            "num_speculative_tokens": 5,
            "prompt_lookup_min": 3,
            "prompt_lookup_max": 7,
            "num_speculative_tokens_per_batch_size": [list(r) for r in schedule],
        },
    )
    scenario = unit_scenario(method, batch_size=batch_size).replace(paired_reference=True)
    return make_record(scenario, throughput=[REFERENCE * s for s in speedups], reference_throughput=REFERENCE)


def test_a_dynamic_schedule_is_set_against_the_best_fixed_k_and_the_k_it_runs():
    from specperf.analysis.dynamic_sd import dynamic_against_fixed

    results = sweep_results(at_bs1=(1.2, 1.5, 1.6), at_bs4=(1.1, 1.3, 1.45))
    results += [dynamic(around(1.6), 1), dynamic(around(1.3), 4)]
    at_1, at_4 = dynamic_against_fixed(results)
    assert (at_1.batch_size, at_1.k_run, at_1.best.against_k, at_1.same_k.against_k) == (1, 5, 5, 5)
    assert at_1.best.low < 1.0 < at_1.best.high and not at_1.best.shown_slower
    # at batch 4 the schedule runs k 3, which the sweep shows 10% slower than k 5
    assert (at_4.k_run, at_4.best.against_k, at_4.same_k.against_k) == (3, 5, 3)
    assert at_4.best.value == pytest.approx(1.3 / 1.45, rel=0.01) and at_4.best.shown_slower
    assert at_4.same_k.low < 1.0 < at_4.same_k.high and not at_4.same_k.shown_slower
    assert dynamic_against_fixed(sweep_results()[:2] + [dynamic(around(1.6), 1)]) == []  # no sweep beside it


def test_the_report_sets_a_dynamic_schedule_against_the_fixed_k(tmp_path):
    from specperf.report import write_report

    results = sweep_results(at_bs1=(1.2, 1.5, 1.6), at_bs4=(1.1, 1.3, 1.45)) + [dynamic(around(1.3), 4)]
    run_dir = write_run(tmp_path / "run", results)
    page = write_report([run_dir]).read_text()
    assert "Dynamic SD against the fixed k" in page and "vs k5" in page
    [row] = json.loads((run_dir / "summary.json").read_text())["dynamic_sd"]
    assert (row["k_run"], row["against_best"]["k"], row["against_best"]["slower"]) == (3, 5, True)


def test_the_profile_tune_writes_runs_each_schedule_beside_the_fixed_k(tmp_path, capsys):
    """Switching at batch 3, the schedule [[1, 2, 5], [3, 4, 3]] runs at 1, 2, 3 and 4, and so does
    the sweep beside it (4 references, 12 fixed, 4 dynamic), paired, with the sweep's settings;
    behind the server at the same concurrencies (20 more), and under Poisson arrivals at
    concurrency 4 (5 more) at the no-SD service rate of batch 4, the measured size nearest the switch."""
    from specperf.profiles.scenarios import load_profile

    run_dir = write_run(tmp_path / "run", sweep_results())
    out = tmp_path / "tuned.toml"
    assert main(["tune", str(run_dir), "--profile-out", str(out)]) == 0
    assert f"profile written: {out} (45 scenarios)" in capsys.readouterr().out
    profile = load_profile(str(out))
    assert (profile.name, profile.tier) == ("tuned-unit", "cpu")
    by_id = {s.id: s for s in profile.scenarios}
    for size in (1, 2, 3, 4):
        dynamic = by_id[f"tiny-llama-ngram-tuned-gsm8k-bs{size}-gsm8k"]
        assert dynamic.method.speculative_config()["num_speculative_tokens_per_batch_size"] == [[1, 2, 5], [3, 4, 3]]
        assert dynamic.paired_reference and dynamic.engine_args == {"enforce_eager": True}
        for k in (1, 3, 5):
            fixed = by_id[f"tiny-llama-ngram-k{k}-bs{size}-gsm8k"]
            assert fixed.paired_reference and fixed.method.params["prompt_lookup_max"] == 7
            assert fixed.num_requests == 2 and fixed.output_len == 32
    served = [s for s in profile.scenarios if s.serves]
    assert {(s.concurrency, s.request_rate) for s in served} == {(1, None), (2, None), (3, None), (4, None), (4, 3.12)}
    assert all(s.num_requests == 2 * 4 and not s.trace for s in served)  # as many sequences as batch 4 held
    poisson = [s for s in served if s.request_rate]
    assert sorted(s.method.label for s in poisson) == ["ngram-k1", "ngram-k3", "ngram-k5", "ngram-tuned-gsm8k", "nosd"]
    assert len({s.engine_key for s in profile.scenarios}) == 10  # no SD, k 1, 3, 5 and the schedule; served too
    losing = write_run(tmp_path / "losing", sweep_results(at_bs1=(0.9, 0.8, 0.7), at_bs4=(0.9, 0.8, 0.7)))
    assert main(["tune", str(losing), "--profile-out", str(tmp_path / "none.toml")]) == 2
    assert "--profile-out: no schedule to run" in capsys.readouterr().err


def served(method: Method, speedups: list[float], concurrency: int, rate: float | None = None):
    """A served result at `concurrency` (Poisson arrivals at `rate`): its throughput speedup, or at a
    rate its TPOT speedup, is `speedups`; the other is 1 (a rate's throughput follows the arrivals)."""
    from specperf.records import Metric

    scenario = unit_scenario(method, batch_size=1).replace(
        mode="serve", concurrency=concurrency, request_rate=rate, paired_reference=True
    )
    throughput = [REFERENCE] * len(speedups) if rate else [REFERENCE * s for s in speedups]
    record = make_record(scenario, throughput=throughput, reference_throughput=REFERENCE)
    if rate:
        record.metrics["tpot_speedup"] = Metric(value=sorted(speedups)[len(speedups) // 2], samples=speedups)
    return record


def test_behind_the_server_the_concurrency_is_the_batch_and_poisson_sweeps_go_by_tpot():
    from specperf.analysis.dynamic_sd import dynamic_against_fixed

    results = [
        served(ngram(k), around(s), c) for c, row in ((1, (1.2, 1.6)), (4, (1.3, 1.1))) for k, s in zip((1, 5), row)
    ]
    results += [served(ngram(k), around(s), 4, rate=2.0) for k, s in zip((1, 5), (1.05, 1.4))]
    results += sweep_results()  # offline, a series of its own
    rows = {(r.served, r.request_rate, r.batch_size): r for r in best_k_table(results)}
    assert (rows[True, 0.0, 1].chosen, rows[True, 0.0, 4].chosen, rows[True, 2.0, 4].chosen) == (5, 1, 5)
    assert rows[True, 2.0, 4].load == "served c4 at 2 req/s" and rows[False, 0.0, 4].load == "bs4"
    assert rows[True, 2.0, 4].speedup_of(5).speedup == pytest.approx(1.4, rel=0.01)  # TPOT's, not throughput's
    schedules = {(t.rows[0].served, t.rows[0].request_rate): t.schedule for t in tune(results)}
    assert schedules == {
        (True, 0.0): [(1, 2, 5), (3, 4, 1)],
        (True, 2.0): [(1, 4, 5)],
        (False, 0.0): [(1, 2, 5), (3, 4, 3)],
    }
    [at_4] = dynamic_against_fixed(results + [served(dynamic(around(1.0), 4).scenario.method, around(1.1), 4)])
    assert (at_4.served, at_4.batch_size, at_4.k_run, at_4.best.against_k, at_4.load) == (
        True,
        4,
        3,
        1,
        "concurrency 4",
    )
    assert at_4.same_k is None  # k 3 was not swept behind the server


def test_greedy_and_sampled_k_are_separate_sweeps_and_a_sampled_schedule_runs_sampled(tmp_path, capsys):
    """k measured greedy and k measured sampled at one model, dataset and batch size were one sweep
    (where_of left sampling out): the best k of each is its own, and the tuned profile runs the
    sampled schedule sampled."""
    from specperf.profiles.scenarios import load_profile
    from specperf.records.scenario import Sampling

    sampled = Sampling(temperature=0.8, top_p=0.95, seed=7)

    def at(k, value, sampling=None):
        record = swept(k, around(value))
        if sampling is not None:
            record.scenario = record.scenario.replace(sampling=sampling)
        return record

    results = [reference(), at(1, 1.5), at(3, 1.1), at(1, 1.1, sampled), at(3, 1.6, sampled)]
    rows = best_k_table(results)
    found = [(row.sampling, row.best, row.load) for row in rows]
    assert found == [("", 1, "bs1"), ("-t0.8-p0.95", 3, "bs1 t0.8-p0.95")]
    run_dir = write_run(tmp_path / "run", results)
    out = tmp_path / "tuned.toml"
    assert main(["tune", str(run_dir), "--profile-out", str(out)]) == 0
    by_id = {s.id: s for s in load_profile(str(out)).scenarios}
    tuned = by_id["tiny-llama-ngram-tuned-gsm8k-t0.8-p0.95-bs1-gsm8k-t0.8-p0.95"]
    assert tuned.sampling == sampled and tuned.method.speculative_config()["num_speculative_tokens"] == 3
    assert by_id["tiny-llama-ngram-tuned-gsm8k-bs1-gsm8k"].sampling.greedy


def test_each_series_of_one_method_and_dataset_gets_a_schedule_of_its_own_in_the_tuned_profile(tmp_path):
    """An offline and a served sweep of one method and dataset were tuned apart but written under one
    label, so the profile ran the last schedule for both; behind the server the served sweep's
    schedule runs (the offline one's serve loads would declare its scenarios twice)."""
    from specperf.profiles.scenarios import load_profile

    results = [
        served(ngram(k), around(s), c) for c, row in ((1, (1.2, 1.6)), (4, (1.3, 1.1))) for k, s in zip((1, 5), row)
    ]
    results += sweep_results()
    run_dir = write_run(tmp_path / "run", results)
    out = tmp_path / "tuned.toml"
    assert main(["tune", str(run_dir), "--profile-out", str(out)]) == 0
    schedules = {
        s.method.label: s.method.speculative_config()["num_speculative_tokens_per_batch_size"]
        for s in load_profile(str(out)).scenarios
        if "tuned" in s.method.label
    }
    assert schedules == {
        "ngram-tuned-gsm8k": [[1, 2, 5], [3, 4, 3]],
        "ngram-tuned-gsm8k-served": [[1, 2, 5], [3, 4, 1]],
    }
