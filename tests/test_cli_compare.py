"""Unit tests for `specperf compare OLD NEW` on constructed run directories."""

from __future__ import annotations

import json

import pytest
from records import THROUGHPUT, make_record, make_scenario, reference_scenario, write_run

from specperf.cli import main
from specperf.records import ScenarioResult

SD_ID = "tiny-llama-eagle3-k3-bs4-gsm8k"
REF_ID = "tiny-llama-nosd-bs4-gsm8k"


def run_dir(tmp_path, name, records):
    return str(write_run(tmp_path / name, records))


def compare(capsys, old, new, *extra):
    code = main(["compare", old, new, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def pair(**kwargs):
    return [make_record(reference_scenario(), **kwargs), make_record(**kwargs)]


def verdict_line(out, scenario_id):
    return next(line for line in out.splitlines() if line.startswith(f"{scenario_id}: "))


def test_identical_runs_pass(tmp_path, capsys):
    old, new = run_dir(tmp_path, "old", pair()), run_dir(tmp_path, "new", pair())
    code, out, _ = compare(capsys, old, new)
    assert code == 0
    assert "regression" not in out
    assert out.splitlines()[0].startswith(f"compare {old} -> {new}: 2 pass (judged by the metrics' own tolerances")
    assert verdict_line(out, SD_ID) == f"{SD_ID}: pass"
    assert verdict_line(out, REF_ID) == f"{REF_ID}: pass"
    assert "throughput_tok_s" not in out  # passing metrics only with --all


def test_all_shows_passing_metrics(tmp_path, capsys):
    old, new = run_dir(tmp_path, "old", pair()), run_dir(tmp_path, "new", pair())
    code, out, _ = compare(capsys, old, new, "--all")
    assert code == 0
    assert "    throughput_tok_s: pass: baseline 100" in out
    assert "acceptance_pos2: pass" in out


def test_throughput_drop_is_a_regression(tmp_path, capsys):
    old = run_dir(tmp_path, "old", pair())
    slow = [t * 0.6 for t in THROUGHPUT]
    new = run_dir(
        tmp_path,
        "new",
        [make_record(reference_scenario(), throughput=slow), make_record(throughput=slow, reference_throughput=30.0)],
    )
    code, out, _ = compare(capsys, old, new)
    assert code == 1
    assert "2 regression" in out.splitlines()[0]
    assert verdict_line(out, REF_ID) == f"{REF_ID}: regression"
    assert verdict_line(out, SD_ID) == f"{SD_ID}: regression"
    assert "throughput_tok_s: regression: baseline 100, current 60, change -40.0%" in out
    assert "speedup" not in out  # the speedup held: SD and reference both slowed


def test_regressions_are_listed_first(tmp_path, capsys):
    old = run_dir(tmp_path, "old", pair())
    new = run_dir(
        tmp_path, "new", [make_record(reference_scenario()), make_record(throughput=[t * 0.6 for t in THROUGHPUT])]
    )
    code, out, _ = compare(capsys, old, new)
    assert code == 1
    lines = out.splitlines()
    assert lines[1] == f"{SD_ID}: regression"
    assert lines.index(f"{REF_ID}: pass") > lines.index(f"{SD_ID}: regression")
    assert "speedup: regression" in out


def test_noisy_drop_is_not_a_regression(tmp_path, capsys):
    noisy_old = [20.0, 50.0, 100.0, 150.0, 180.0]
    noisy_new = [10.0, 40.0, 60.0, 170.0, 190.0]
    ref = reference_scenario()
    old = run_dir(tmp_path, "old", [make_record(ref, throughput=noisy_old)])
    new = run_dir(tmp_path, "new", [make_record(ref, throughput=noisy_new)])
    code, out, _ = compare(capsys, old, new)
    assert code == 0
    assert verdict_line(out, REF_ID) == f"{REF_ID}: pass"


def test_scenario_only_in_new_has_no_baseline(tmp_path, capsys):
    old = run_dir(tmp_path, "old", [make_record(reference_scenario())])
    new = run_dir(tmp_path, "new", pair() + [make_record(make_scenario(batch_size=1))])
    code, out, _ = compare(capsys, old, new)
    assert code == 0
    assert verdict_line(out, SD_ID) == f"{SD_ID}: no-baseline"
    assert verdict_line(out, "tiny-llama-eagle3-k3-bs1-gsm8k") == "tiny-llama-eagle3-k3-bs1-gsm8k: no-baseline"
    assert verdict_line(out, REF_ID) == f"{REF_ID}: pass"
    assert "2 no-baseline, 1 pass" in out.splitlines()[0]


def test_scenario_only_in_old_is_ignored(tmp_path, capsys):
    old = run_dir(tmp_path, "old", pair())
    new = run_dir(tmp_path, "new", [make_record(reference_scenario())])
    code, out, _ = compare(capsys, old, new)
    assert code == 0
    assert SD_ID not in out


def test_other_hardware_is_not_compared(tmp_path, capsys):
    old = run_dir(tmp_path, "old", pair(hardware_key="gpu-nvidia-h100-80gb-hbm3-80g-x1"))
    new = run_dir(
        tmp_path, "new", [make_record(reference_scenario(), throughput=[1.0] * 5), make_record(throughput=[1.0] * 5)]
    )
    code, out, _ = compare(capsys, old, new)
    assert code == 0
    assert verdict_line(out, SD_ID) == f"{SD_ID}: no-baseline"
    assert verdict_line(out, REF_ID) == f"{REF_ID}: no-baseline"
    assert "regression" not in out


def test_changed_scenario_is_incompatible(tmp_path, capsys):
    old = run_dir(tmp_path, "old", [make_record()])
    new = run_dir(tmp_path, "new", [make_record(make_scenario(output_len=64), throughput=[1.0] * 5)])
    code, out, _ = compare(capsys, old, new)
    assert code == 0
    assert verdict_line(out, SD_ID).startswith(f"{SD_ID}: incompatible (scenario changed")


def test_error_in_new_fails(tmp_path, capsys):
    old = run_dir(tmp_path, "old", pair())
    new = run_dir(
        tmp_path, "new", [make_record(reference_scenario()), make_record(status="error", error="engine died")]
    )
    code, out, _ = compare(capsys, old, new)
    assert code == 1
    assert verdict_line(out, SD_ID) == f"{SD_ID}: error (engine died)"


def test_error_in_old_is_no_baseline(tmp_path, capsys):
    old = run_dir(tmp_path, "old", [make_record(status="error", error="engine died")])
    new = run_dir(tmp_path, "new", [make_record()])
    code, out, _ = compare(capsys, old, new)
    assert code == 0
    assert verdict_line(out, SD_ID) == f"{SD_ID}: no-baseline"


def test_invalid_new_result(tmp_path, capsys):
    old = run_dir(tmp_path, "old", [make_record()])
    new = run_dir(tmp_path, "new", [make_record(reasons=["greedy outputs differ between rounds"])])
    code, out, _ = compare(capsys, old, new)
    assert code == 0
    assert verdict_line(out, SD_ID) == f"{SD_ID}: invalid (greedy outputs differ between rounds)"


@pytest.mark.parametrize("which", ["old", "new"])
def test_not_a_run_directory(tmp_path, capsys, which):
    good = run_dir(tmp_path, "good", pair())
    missing = str(tmp_path / "missing")
    old, new = (missing, good) if which == "old" else (good, missing)
    code, out, err = compare(capsys, old, new)
    assert code == 2
    assert err.startswith("specperf: error: ") and missing in err and "not a run directory" in err


def test_corrupt_result_file(tmp_path, capsys):
    old = run_dir(tmp_path, "old", pair())
    new = run_dir(tmp_path, "new", pair())
    broken = tmp_path / "new" / "results" / f"{SD_ID}.json"
    broken.write_text(broken.read_text(encoding="utf-8")[:100], encoding="utf-8")
    code, _, err = compare(capsys, old, new)
    assert code == 2
    assert str(broken) in err and "not valid JSON" in err


@pytest.mark.parametrize("which", ["old", "new"])
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_number_in_a_result_file(tmp_path, capsys, which, constant):
    old, new = run_dir(tmp_path, "old", pair()), run_dir(tmp_path, "new", pair())
    broken = tmp_path / which / "results" / f"{SD_ID}.json"
    text = broken.read_text(encoding="utf-8")
    assert '"value": 100.0' in text
    broken.write_text(text.replace('"value": 100.0', f'"value": {constant}', 1), encoding="utf-8")
    code, out, err = compare(capsys, old, new)
    assert code == 2 and out == ""
    assert err == f"specperf: error: {broken}: corrupt result (not valid JSON: {constant} is not a number)\n"


@pytest.mark.parametrize("which", ["old", "new"])
@pytest.mark.parametrize(
    "field, value, where",
    [
        ("scenario", None, "scenario: Input should be a valid dictionary"),
        ("rounds", [{"wall_s": "slow", "output_tokens": 100, "throughput": 1.0}], "rounds[0].wall_s: "),
        ("metrics", {"throughput_tok_s": {"value": "fast", "samples": []}}, "metrics.throughput_tok_s.value"),
        ("device", {"kind": "cpu", "hardware_key": None}, "device.hardware_key: Input should be a valid string"),
    ],
)
def test_result_file_of_the_wrong_type(tmp_path, capsys, which, field, value, where):
    old, new = run_dir(tmp_path, "old", pair()), run_dir(tmp_path, "new", pair())
    broken = tmp_path / which / "results" / f"{SD_ID}.json"
    data = json.loads(broken.read_text(encoding="utf-8"))
    data[field] = value
    broken.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = compare(capsys, old, new)
    assert code == 2 and out == ""
    assert err.startswith(f"specperf: error: {broken}: corrupt result ({where}")
    assert err.count("\n") == 1


def test_compare_judges_typed_results_read_back(tmp_path, capsys):
    """A result built from a dict (as another tool would write it) compares like one the suite made."""
    old = run_dir(tmp_path, "old", [make_record()])
    data = make_record(throughput=[t * 0.6 for t in THROUGHPUT]).to_json()
    data["metrics"] = {"throughput_tok_s": data["metrics"]["throughput_tok_s"]}
    new = run_dir(tmp_path, "new", [ScenarioResult.model_validate(data)])
    code, out, _ = compare(capsys, old, new)
    assert code == 1
    assert verdict_line(out, SD_ID) == f"{SD_ID}: regression"
    assert "throughput_tok_s: regression: baseline 100, current 60, change -40.0%" in out
    assert "speedup" not in out  # a metric only in OLD is not judged


def lossy_with_its_own_rules():
    """A NEW result that lost its output and wrote itself rules that would pass it."""
    lossy = make_record(lossless=0.0)
    lossy.scenario = lossy.scenario.replace(tolerances={"lossless_fraction": 9.0}, informational=["lossless_fraction"])
    return [make_record(reference_scenario()), lossy]


def test_a_result_files_own_tolerances_never_pass_it(tmp_path, capsys):
    old, new = run_dir(tmp_path, "old", pair()), run_dir(tmp_path, "new", lossy_with_its_own_rules())
    code, out, _ = compare(capsys, old, new)
    assert code == 1 and "lossless_fraction: regression" in out


def test_the_rules_come_from_the_profile_the_run_names(tmp_path, capsys):
    from records import write_run_file

    old, new = run_dir(tmp_path, "old", pair()), run_dir(tmp_path, "new", lossy_with_its_own_rules())
    write_run_file(tmp_path / "new", profile="cpu-smoke")
    code, out, _ = compare(capsys, old, new)
    assert code == 1 and "(judged by profile cpu-smoke)" in out
    write_run_file(tmp_path / "new", profile="no-such-profile")
    code, _, err = compare(capsys, old, new)
    assert code == 2 and "run.json: its profile 'no-such-profile' is not one of" in err


LENIENT = """
[profile]
name = "lenient"
tier = "cpu"
[profile.tolerances]
throughput_tok_s = 0.35
speedup = 0.35
[models.tiny-llama]
path = "builtin:tiny-llama"
[models.tiny-llama.methods.eagle3-k3]
method = "eagle3"
model = "builtin:tiny-llama-eagle3"
num_speculative_tokens = 3
[[cells]]
model = "tiny-llama"
methods = ["eagle3-k3"]
batch_sizes = [4]
datasets = ["gsm8k"]
"""


def test_an_explicit_profile_gives_the_rules(tmp_path, capsys):
    profile = tmp_path / "lenient.toml"
    profile.write_text(LENIENT)
    old = run_dir(tmp_path, "old", pair())
    new = run_dir(tmp_path, "new", pair(throughput=[t * 0.7 for t in THROUGHPUT]))
    assert compare(capsys, old, new)[0] == 1  # the metric's own 5%
    code, out, _ = compare(capsys, old, new, "--profile", str(profile))
    assert code == 0 and "(judged by profile lenient)" in out  # the profile's 35%


# 1e-5 tok/s is a number a speed can be, but no machine measures it: once every run was an improvement
@pytest.mark.parametrize("bad", [0.0, -100.0, 1e-300, 1e-5, 1e12])
def test_an_old_run_with_an_impossible_speed_is_a_corrupt_baseline(tmp_path, capsys, bad):
    old_records = pair()
    old_records[1].metrics["throughput_tok_s"].samples[0] = bad
    old, new = run_dir(tmp_path, "old", old_records), run_dir(tmp_path, "new", pair())
    code, _, err = compare(capsys, old, new)
    assert code == 2 and f"{SD_ID}.json: corrupt baseline: a sample of throughput_tok_s" in err


@pytest.mark.parametrize(
    "name",
    [
        "evil\x1b[2J\x1b]0;owned\x07",  # terminal escapes
        "m\u202egsm8k",  # drawn right to left: the id would read as another
        "m\ntiny-llama-eagle3-k3-bs4-gsm8k: pass",  # a forged verdict line
    ],
)
def test_an_id_no_profile_can_make_is_a_corrupt_result_printed_escaped(tmp_path, capsys, name):
    """A scenario id is made of profile names (lower-case letters, digits, '.', '_', '-'): a stored
    result with any other is corrupt, named in one line that carries no control character."""
    records = pair()
    evil = records[1].scenario.model.model_copy(update={"name": name})
    records[1].scenario = records[1].scenario.replace(model=evil)
    old, new = run_dir(tmp_path, "old", pair()), run_dir(tmp_path, "new", records)
    code, out, err = compare(capsys, old, new)
    assert code == 2 and not out
    (line,) = err.splitlines()
    assert "corrupt result (scenario.model.name: String should match pattern" in line
    assert not {"\x1b", "\x07", "\u202e"} & set(line)


@pytest.mark.parametrize(
    "argv",
    [[], ["report"], ["compare"], ["noise"], ["simulate"], ["history"], ["history", "show"], ["plan"]],
)
def test_every_command_and_verb_states_the_exit_codes_in_its_help(argv, capsys):
    from specperf.cli import EXIT_CODES

    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    assert EXIT_CODES in " ".join(capsys.readouterr().out.split())
