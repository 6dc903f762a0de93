"""Noise measurement (specperf/noise.py, `specperf noise`) and the thresholds it widens."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from records import HARDWARE_KEY, make_record, reference_scenario, write_run

from specperf.cli import main
from specperf.judge.baselines import baseline_from_result
from specperf.judge.noise import load_noise, measure_noise, noise_table, write_noise
from specperf.judge.verdicts import NOISE_MULTIPLE, compare_metric, judge
from specperf.storage import ResultFileError, result_path

RUNS = [[100.0, 102.0, 98.0, 100.0], [110.0, 112.0, 108.0, 110.0], [90.0, 92.0, 88.0, 90.0]]


@pytest.fixture
def runs(tmp_path):
    """Three runs of one SD scenario and its reference; throughput medians 100, 110 and 90."""
    return [
        write_run(tmp_path / f"run{i}", [make_record(throughput=t), make_record(reference_scenario(), throughput=t)])
        for i, t in enumerate(RUNS)
    ]


def test_run_to_run_and_round_to_round_cv(runs):
    noise = measure_noise(runs)
    entry = noise["scenarios"]["tiny-llama-eagle3-k3-bs4-gsm8k"]["throughput_tok_s"]
    assert entry["runs"] == 3
    assert entry["median"] == 100.0
    assert entry["run_cv"] == pytest.approx(statistics.stdev([100, 110, 90]) / 100)
    round_cvs = [statistics.stdev(t) / statistics.fmean(t) for t in RUNS]
    assert entry["round_cv"] == pytest.approx(statistics.median(round_cvs))
    assert noise["hardware_key"] == HARDWARE_KEY


def test_deterministic_metrics_have_no_noise(runs):
    metrics = measure_noise(runs)["scenarios"]["tiny-llama-eagle3-k3-bs4-gsm8k"]
    assert metrics["mean_acceptance_length"]["run_cv"] == 0.0
    assert metrics["acceptance_pos2"]["run_cv"] == 0.0  # per-position rates are flattened


def test_one_run_gives_round_noise_only(runs):
    entry = measure_noise(runs[:1])["scenarios"]["tiny-llama-eagle3-k3-bs4-gsm8k"]["throughput_tok_s"]
    assert entry["run_cv"] is None and entry["round_cv"] > 0


def test_error_and_invalid_results_are_not_noise(tmp_path):
    run = write_run(
        tmp_path / "run",
        [make_record(status="error", error="boom"), make_record(reference_scenario(), reasons=["too short"])],
    )
    assert measure_noise([run])["scenarios"] == {}


def test_runs_from_other_hardware_are_not_pooled(tmp_path, runs):
    other = write_run(tmp_path / "other", [make_record(hardware_key="cpu-other-4c")])
    with pytest.raises(ResultFileError, match="different hardware"):
        measure_noise(runs + [other])


def test_stored_noise_is_read_back_per_scenario_and_metric(tmp_path, runs):
    path = write_noise(tmp_path / "baselines", measure_noise(runs))
    assert path == tmp_path / "baselines" / HARDWARE_KEY / "noise.json"
    noise = load_noise(tmp_path / "baselines", HARDWARE_KEY)
    assert noise["tiny-llama-eagle3-k3-bs4-gsm8k"]["throughput_tok_s"] == pytest.approx(0.1)
    assert load_noise(tmp_path / "baselines", "cpu-other-4c") == {}


def test_corrupt_noise_file_names_the_file(tmp_path):
    path = tmp_path / HARDWARE_KEY / "noise.json"
    path.parent.mkdir()
    path.write_text('{"schema_version": 1, "scenarios": {"x": 3}}')
    with pytest.raises(ResultFileError, match=f"{path}: corrupt noise file"):
        load_noise(tmp_path, HARDWARE_KEY)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_noise_file_is_refused(tmp_path, constant):
    path = tmp_path / HARDWARE_KEY / "noise.json"
    path.parent.mkdir()
    path.write_text('{"schema_version": 1, "scenarios": {"x": {"throughput_tok_s": {"run_cv": %s}}}}' % constant)
    with pytest.raises(ResultFileError) as info:
        load_noise(tmp_path, HARDWARE_KEY)
    message = str(info.value)
    assert message.startswith(f"{path}: corrupt noise file (not valid JSON: ")
    assert f"{constant} is not a number" in message and "\n" not in message


@pytest.mark.parametrize("key", ["../x", "..", "a/b"])
def test_noise_paths_stay_inside_the_baseline_dir(tmp_path, runs, key):
    baselines = tmp_path / "baselines"
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        load_noise(baselines, key)
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        write_noise(baselines, {**measure_noise(runs), "hardware_key": key})
    assert not (tmp_path / "x").exists() and not baselines.exists()


def test_a_result_of_the_wrong_type_names_the_file_and_field(tmp_path, runs):
    path = result_path(runs[1], "tiny-llama-eagle3-k3-bs4-gsm8k")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metrics"]["throughput_tok_s"]["samples"][2] = "fast"
    path.write_text(json.dumps(data), encoding="utf-8")
    where = f"{path}: corrupt result (metrics.throughput_tok_s.samples[2]"
    with pytest.raises(ResultFileError, match=re.escape(where)):
        measure_noise(runs)


def test_noise_widens_the_threshold_to_a_multiple_of_the_cv():
    baseline, current = [100.0, 101.0, 99.0, 100.5], [88.0, 89.0, 87.0, 88.5]  # -12%, significant
    assert compare_metric("throughput_tok_s", baseline, current).status == "regression"
    widened = compare_metric("throughput_tok_s", baseline, current, noise_cv=0.05)
    assert widened.status == "pass" and widened.tolerance == pytest.approx(NOISE_MULTIPLE * 0.05)
    quiet = compare_metric("throughput_tok_s", baseline, current, noise_cv=0.001)
    assert quiet.status == "regression" and quiet.tolerance == 0.05  # never below the tolerance


def test_judge_applies_the_scenario_noise():
    baseline = make_record(throughput=[100.0, 101.0, 99.0, 100.5, 99.5])
    current = make_record(throughput=[88.0, 89.0, 87.0, 88.5, 87.5])
    stored = baseline_from_result(baseline)
    assert judge(current, stored).status == "regression"
    assert judge(current, stored, {"throughput_tok_s": 0.05, "speedup": 0.05}).status == "pass"


def test_noise_command_reads_runs_prints_the_table_and_writes_the_file(tmp_path, runs, capsys):
    assert main(["noise", "--from", *map(str, runs), "--write", "--baseline-dir", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "throughput_tok_s" in out and "10.0%" in out
    assert f"noise written: {tmp_path / 'b' / HARDWARE_KEY / 'noise.json'}" in out


def test_noise_table_lists_the_noisiest_first(runs):
    lines = noise_table(measure_noise(runs))
    assert lines[0].startswith("scenario")
    assert "throughput_tok_s" in lines[1] or "speedup" in lines[1]


def test_noise_command_without_results_is_a_clear_error(tmp_path, capsys):
    empty = write_run(tmp_path / "run", [make_record(status="error", error="boom")])
    assert main(["noise", "--from", str(empty)]) == 2
    assert "no valid results" in capsys.readouterr().err


@pytest.mark.parametrize("cv, problem", [('"0.1"', "run_cv"), ("-0.2", "run_cv"), ('{"x": 1}', "run_cv")])
def test_a_noise_file_of_the_wrong_shape_is_refused(tmp_path, cv, problem):
    path = tmp_path / HARDWARE_KEY / "noise.json"
    path.parent.mkdir()
    path.write_text('{"schema_version": 1, "scenarios": {"x": {"throughput_tok_s": {"runs": 3, "run_cv": %s}}}}' % cv)
    with pytest.raises(
        ResultFileError, match=rf"{path}: corrupt noise file \(scenarios\.x\.throughput_tok_s\.{problem}"
    ):
        load_noise(tmp_path, HARDWARE_KEY)


@pytest.mark.parametrize(
    "metric, baseline, current",
    [
        ("lossless_fraction", [1.0], [0.0]),
        ("mean_acceptance_length", [2.5] * 5, [1.2] * 5),
        ("acceptance_pos0", [0.8] * 5, [0.4] * 5),
    ],
)
def test_noise_never_widens_a_deterministic_metric(metric, baseline, current):
    verdict = compare_metric(metric, baseline, current, noise_cv=1e9)
    assert verdict.status == "regression" and verdict.tolerance < 0.1


def test_noise_widens_speed_at_most_to_the_cap():
    from specperf.judge.verdicts import MAX_NOISE_TOLERANCE

    baseline, current = [100.0, 101.0, 99.0, 100.5, 99.5], [30.0, 31.0, 29.0, 30.5, 29.5]
    verdict = compare_metric("throughput_tok_s", baseline, current, noise_cv=1e9)
    assert verdict.tolerance == MAX_NOISE_TOLERANCE and verdict.status == "regression"
    assert compare_metric("throughput_tok_s", baseline, current, noise_cv=0.01).tolerance == 0.05


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_current_value_is_invalid_never_a_pass(value):
    verdict = compare_metric("mean_acceptance_length", [2.5] * 5, [value] * 5)
    assert verdict.status == "invalid" and verdict.note == f"a current value {value!r} is not a finite number"
