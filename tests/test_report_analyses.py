"""The report's pure parts without HTML: analyses, the view model, chart geometry and number formats."""

from __future__ import annotations

import pytest
from records import gpu_device, gpu_telemetry
from test_report import make_record

from specperf.profiles.registry import study_dataset_label, workload_names
from specperf.records import Counters, Memory
from specperf.report import svg, view
from specperf.report.analyses import study_figure
from specperf.report.analyses.acceptance import acceptance_table, pooled_acceptance
from specperf.report.analyses.clocks import CPU_CLOCKS, clock_summary
from specperf.report.analyses.drift import config_drift
from specperf.report.analyses.memory import memory_table
from specperf.report.analyses.sd_pays import speedup_curves, where_sd_pays
from specperf.report.analyses.spreads import metric_spreads
from specperf.report.analyses.study_figure import STUDY_MODELS, load_reference, study_panel, study_series_name
from specperf.report.format import fmt_duration, fmt_num, fmt_spread


def with_counters(record, drafts: int, accepted: int, per_pos: list[int]):
    record.counters = Counters(drafts=drafts, draft_tokens=drafts * 3, accepted=accepted, accepted_per_pos=per_pos)
    return record


# --------------------------------------------------------------------------- spreads


def test_metric_spreads_pair_each_verdict_with_both_sides_round_statistics():
    record = make_record(verdict="regression", baseline_speedup=1.5).to_json()
    record["verdict"]["metrics"].append({"metric": "acceptance_pos0", "status": "pass"})
    record["baseline"]["metric_samples"] = {
        "throughput_tok_s": [120.0, 140.0],
        "per_position_acceptance": [[0.5, 0.1], None, [0.7, 0.2]],
    }
    spreads = metric_spreads(make_record().model_validate(record))
    throughput, speedup, pos0 = spreads
    assert throughput.verdict.metric == "throughput_tok_s"
    assert throughput.baseline_stats["n"] == 2 and throughput.baseline_stats["median"] == 130.0
    assert throughput.current_stats["n"] == 5
    assert speedup.baseline_stats is None and speedup.current_stats["median"] == 1.4
    assert pos0.baseline_stats["n"] == 2 and pos0.baseline_stats["median"] == pytest.approx(0.6)
    assert pos0.current_stats["median"] == 0.75


def test_metric_spreads_without_a_verdict_are_empty():
    record = make_record()
    record.verdict = None
    assert metric_spreads(record) == []


# --------------------------------------------------------------------------- acceptance


def test_pooled_acceptance_sums_counters_instead_of_averaging_rates():
    few = with_counters(make_record(batch_size=1), 10, 20, [8, 7, 5])  # length 3.0
    many = with_counters(make_record(batch_size=16), 90, 90, [50, 30, 10])  # length 2.0
    pooled = pooled_acceptance([few, many])
    assert pooled.length == pytest.approx(1 + 110 / 100)  # not (3.0 + 2.0) / 2
    assert pooled.rate == pytest.approx(110 / 300)
    assert pooled.per_position == pytest.approx([0.58, 0.37, 0.15])
    assert pooled.drafts == 100


def test_pooled_acceptance_without_drafts():
    record = with_counters(make_record(), 0, 0, [])
    pooled = pooled_acceptance([record, make_record(method="nosd", status="error")])
    assert pooled.length is None and pooled.rate is None and pooled.per_position == []


def test_acceptance_table_per_method_and_dataset():
    records = [make_record(method="ngram", dataset="gsm8k", batch_size=bs) for bs in (16, 1)]
    records += [
        make_record(method="eagle", dataset="sharegpt"),
        make_record(method="nosd", dataset="cnn_dailymail", speedup=None),  # no-SD: no acceptance
        make_record(method="eagle", dataset="aime", status="error", error="x"),
    ]  # never finished
    table = acceptance_table(records)
    assert table.columns == ["gsm8k", "sharegpt"]
    assert [(r.model, r.method) for r in table.rows] == [("smollm2-135m", "eagle"), ("smollm2-135m", "ngram")]
    eagle, ngram = table.rows
    assert eagle.cells[0] is None and eagle.cells[1].batch_sizes == [4]
    assert ngram.cells[0].batch_sizes == [1, 16] and ngram.cells[1] is None
    assert ngram.cells[0].pooled.length == pytest.approx(2.75)


# --------------------------------------------------------------------------- where SD pays


def test_where_sd_pays_limits_and_best_methods():
    records = [make_record(method="ngram", batch_size=bs, speedup=s) for bs, s in ((1, 1.5), (4, 0.95), (16, 1.1))]
    records += [make_record(method="eagle", batch_size=bs, speedup=s) for bs, s in ((1, 1.5), (4, 1.2), (16, 1.05))]
    records += [make_record(method="mtp", batch_size=1, speedup=0.9), make_record(method="nosd", speedup=None)]
    pays = where_sd_pays(records)
    limits = {limit.method: limit for limit in pays.limits}
    assert set(limits) == {"eagle", "mtp", "ngram"}
    assert limits["eagle"].largest == 16 and limits["eagle"].all_pay and not limits["eagle"].gap
    assert limits["ngram"].largest == 16 and limits["ngram"].gap and not limits["ngram"].all_pay
    assert list(limits["ngram"].points) == [1, 4, 16]
    assert limits["mtp"].largest is None and not limits["mtp"].all_pay
    best = {b.batch_size: b for b in pays.best}
    assert best[1].method == "eagle" and best[1].others == [("ngram", 1.5), ("mtp", 0.9)]  # a tie goes by name
    assert best[4].method == "eagle" and best[4].pays
    assert best[16].method == "ngram" and best[16].speedup == 1.1


def test_where_sd_pays_when_no_method_does():
    pays = where_sd_pays([make_record(method="ngram", batch_size=64, speedup=0.7)])
    assert not pays.best[0].pays and pays.limits[0].largest is None


def test_speedup_curves_skip_scenarios_without_speedup():
    records = [make_record(speedup=None), make_record(method="nosd", speedup=None), make_record(batch_size=8)]
    assert speedup_curves(records) == {("smollm2-135m", "instructcoder", "ngram"): {8: 1.4}}


# --------------------------------------------------------------------------- memory


def memory(record, peak: float | None, baseline: float | None = None):
    record.memory = Memory(peak_mib=peak, source="rss") if peak is not None else None
    if baseline is not None:
        record.baseline = record.baseline or make_record(baseline_speedup=1.0).baseline
        record.baseline.memory_peak_mib = baseline
    return record


def test_memory_ratios_against_the_no_sd_reference():
    table = memory_table(
        [
            memory(make_record(method="nosd", speedup=None), 1000.0, baseline=800.0),
            memory(make_record(method="draft_model"), 1500.0, baseline=1000.0),
            memory(make_record(method="ngram"), None, baseline=820.0),  # only the baseline measured
            memory(make_record(method="eagle", batch_size=16), 1100.0),  # no reference at batch 16
            make_record(method="eagle"),  # not measured at all
        ]
    )
    assert table.methods == ["draft_model", "eagle", "ngram"] and table.sources == ["rss"]
    bs4, bs16 = table.rows
    assert bs4.reference.peak_mib == 1000.0 and bs4.reference.ratio is None and bs4.reference.method is None
    draft, eagle, ngram = bs4.methods
    assert draft.ratio == pytest.approx(1.5) and draft.baseline_ratio == pytest.approx(1.25)
    assert eagle is None
    assert ngram.peak_mib is None and ngram.ratio is None and ngram.baseline_ratio == pytest.approx(1.025)
    assert bs16.reference is None and bs16.methods[1].ratio is None and bs16.methods[1].peak_mib == 1100.0


# --------------------------------------------------------------------------- config drift


def test_config_drift_lists_changed_added_and_removed_keys():
    drift = config_drift({"a": 1, "b": True, "c": [1]}, {"a": 1, "b": False, "d": "x"})
    assert [(d.key, d.baseline, d.current) for d in drift] == [("b", False, True), ("c", None, [1]), ("d", "x", None)]
    assert config_drift(None, {"a": 1}) == [] and config_drift({"a": 1}, None) == []
    assert config_drift({"a": 1}, {"a": 1}) == []


# --------------------------------------------------------------------------- clocks


def test_clock_summary_on_cpu_and_on_gpu_without_telemetry():
    cpu = make_record()
    assert clock_summary([cpu], [cpu.device]).line == CPU_CLOCKS
    gpu = make_record(device=gpu_device())
    clocks = clock_summary([gpu], [gpu.device])
    assert not clocks.measured and clocks.line == "GPU clocks and throttling not recorded"
    assert clock_summary([], []).line == "clocks and throttling unknown"


def test_clock_summary_takes_the_lowest_median_and_lists_bad_reasons_first():
    a = make_record(batch_size=1, device=gpu_device(max_sm_clock_mhz=1980))
    a.gpu_telemetry = gpu_telemetry(sm_clock_median=1900.0, throttle_reasons=["sw_power_cap"])
    b = make_record(batch_size=2, device=gpu_device(max_sm_clock_mhz=1755))
    b.gpu_telemetry = gpu_telemetry(sm_clock_median=1700.0, throttle_reasons=["hw_thermal", "sw_power_cap"])
    clocks = clock_summary([a, b], [a.device, b.device])
    assert clocks.measured and clocks.sm_clock_mhz == 1700.0 and clocks.max_sm_clock_mhz == 1980
    assert clocks.throttle_reasons == ["hw_thermal", "sw_power_cap"] and clocks.bad_reasons == ["hw_thermal"]
    assert clocks.bad_scenarios == [b.id]
    assert clocks.line == "SM clock 1700 MHz (max 1980), throttling: hw_thermal, sw_power_cap"


def test_clock_summary_when_clocks_were_not_sampled():
    record = make_record(device={**gpu_device(), "gpus": []})
    record.gpu_telemetry = {**gpu_telemetry(), "sm_clock_mhz": None, "throttle_reasons": []}
    assert clock_summary([record], [record.device]).line == "SM clock not sampled, throttling: none seen"


# --------------------------------------------------------------------------- the study


def test_every_study_model_and_dataset_tag_names_a_panel():
    panels = load_reference()["fig1_speedup_vs_batch"]["panels"]
    titles = {title.split(") ", 1)[1] for title in panels}
    assert titles == {
        f"{model} {dataset}"
        for _, model in STUDY_MODELS
        for name in workload_names()
        if (dataset := study_dataset_label(name))
    }
    series = {name for panel in panels.values() for name in panel}
    from specperf.methods import METHODS

    assert series == {name for m in METHODS.values() for name in m.study_series.values()}


def test_study_panel_and_series_matching():
    reference = load_reference()
    title, series = study_panel("qwen3-8b", "", "instructcoder", reference)
    assert title == "(l) Q3-8B InstructCoder" and "ngram-k5" in series
    assert study_panel("x", "meta-llama/Meta-Llama-3-70B-Instruct", "sharegpt", reference)[0] == "(g) L3-70B ShareGPT"
    assert study_panel("smollm2-135m", "builtin:smollm2-135m", "gsm8k", reference) is None
    assert study_panel("llama3.1-8b", "", "aime", reference) is None
    assert study_panel("llama3.1-8b", "", "gsm8k", {}) is None
    assert study_series_name("ngram", {"num_speculative_tokens": 5}) == "ngram-k5"
    assert study_series_name("eagle3", {"num_speculative_tokens": 3}) == "EAGLE-3"
    assert study_series_name("draft_model", {"num_speculative_tokens": 3}) == "DraftModel"
    assert study_series_name("eagle3", {"num_speculative_tokens": 4}) is None
    assert study_series_name("mtp", {"num_speculative_tokens": 3}) is None


def test_unreadable_reference_data_gives_no_study_curves(tmp_path, monkeypatch):
    monkeypatch.setattr(study_figure, "REFERENCE_DATA", tmp_path / "missing.json")
    assert load_reference() == {}


# --------------------------------------------------------------------------- the view model


def test_scenario_view_makes_the_verdict_explicit():
    skipped = make_record(status="skipped", error="gated")
    skipped.verdict = None
    assert (view.scenario_view(skipped).status, view.scenario_view(skipped).note) == ("skipped", "gated")
    unjudged = make_record()
    unjudged.verdict = None
    assert view.scenario_view(unjudged).status == "no-baseline"
    assert view.scenario_view(unjudged).note == "no verdict recorded"
    crashed = make_record(status="error", error="boom")
    crashed.verdict = None
    assert view.scenario_view(crashed).status == "error" and view.scenario_view(crashed).why() == ["boom"]
    improved = view.scenario_view(make_record(verdict="improvement"))
    assert improved.hint == view.IMPROVEMENT_HINT and improved.why()[-1] == view.IMPROVEMENT_HINT


def test_view_orders_worst_first_and_counts_every_verdict(tmp_path):
    from test_report import make_run, mixed_records

    from specperf import report

    built = report.build_view(report.load_run([make_run(tmp_path / "run", mixed_records())]))
    assert [v.status for v in built.scenarios][:3] == ["error", "regression", "invalid"]
    assert [v.status for v in built.attention] == ["error", "regression", "invalid"]
    assert {c.status: c.n for c in built.header.counts}["pass"] == 2 and built.header.failed == 2
    assert view.severity_rank("flaky") == view.severity_rank("incompatible") + 0.5
    assert view.severity_rank("skipped") > view.severity_rank("pass")
    assert view.status_class("flaky") == "unknown" and view.status_class("skipped") == "skipped"
    assert view.verdict_counts(["pass", "flaky"]) == {
        "error": 0,
        "regression": 0,
        "inconclusive": 0,
        "suspect": 0,
        "invalid": 0,
        "incompatible": 0,
        "unsupported": 0,
        "no-baseline": 0,
        "improvement": 0,
        "pass": 1,
        "flaky": 1,
    }


# --------------------------------------------------------------------------- chart geometry and formats


def test_nice_ticks_cover_the_range_with_round_steps():
    assert svg.nice_ticks(0.9, 2.1) == [0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25]
    assert svg.nice_ticks(0.5, 3.2) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert svg.nice_ticks(1.0, 1.0) == [1.0, 1.2]


def test_line_chart_puts_batch_sizes_on_a_log2_axis():
    series = [svg.Series("ngram", "#000", "current", [(1, 1.5, "a"), (4, 1.2, "b"), (16, 0.9, "c")])]
    chart = svg.line_chart(series)
    xs = [float(t["x"]) for t in chart["x_ticks"]]
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.1)  # 1, 4, 16 equally spaced
    assert [t["label"] for t in chart["x_ticks"]] == ["1", "4", "16"]
    ys = [float(m["cy"]) for m in chart["lines"][0]["markers"]]
    assert ys == sorted(ys)  # lower speedup, lower on the page
    assert chart["top"] <= float(chart["reference"]) <= chart["bottom"]
    assert chart["lines"][0]["dash"] == ""


def test_bar_chart_clamps_rates():
    bars = svg.bar_chart([1.4, 0.5, -0.1], "#000")["bars"]
    assert [b["h"] for b in bars] == ["38.0", "19.0", "0.0"] and bars[0]["label"] == "140"


def test_formats():
    assert fmt_num(None) == "—" and fmt_num(3) == "3" and fmt_num(1.23456) == "1.235"
    assert fmt_num([0.5, None]) == "[0.5, —]"
    assert fmt_spread(130.0, {"n": 4, "cv": 0.0628}) == "130 ±6.3% (n=4)"
    assert fmt_spread(130.0, {"n": 1, "cv": None}) == "130 (n=1)" and fmt_spread(None, {"n": 2}) == "—"
    assert fmt_duration(59.9) == "59.9 s" and fmt_duration(200) == "3 min 20 s"
    assert fmt_duration(7300) == "2 h 01 min" and fmt_duration(None) == "—"


# --------------------------------------------------------------------------- tree against chain


def test_each_tree_is_put_beside_the_chain_of_its_k():
    from specperf.report.tree_chain import tree_vs_chain

    trees = [make_record(method="eagle3_tree", batch_size=bs, speedup=s, k=6) for bs, s in ((1, 2.0), (16, 1.2))]
    trees[0].provenance["engine_env"] = {"VLLM_ATTENTION_BACKEND": "TREE_ATTN"}
    chains = [make_record(method="eagle3", batch_size=1, speedup=1.6, k=6)]
    chains.append(make_record(method="eagle3", batch_size=16, speedup=1.5, k=3))  # another k: no pair
    rows = tree_vs_chain([*trees, *chains, make_record(method="nosd", speedup=None)])
    assert [(r.batch_size, r.k, r.tree, r.chain) for r in rows] == [
        (1, 6, "eagle3_tree", "eagle3"),
        (16, 6, "eagle3_tree", None),
    ]
    first, second = rows
    assert first.speedup_ratio == pytest.approx(2.0 / 1.6) and first.backend == "TREE_ATTN"
    assert (first.tree_acceptance, first.chain_acceptance) == (2.75, 2.75)
    assert second.chain_speedup is None and second.speedup_ratio is None and second.backend is None
    assert tree_vs_chain(chains) == []
