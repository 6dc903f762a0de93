"""Hostile files on disk (deep nesting, devices, FIFOs, huge files, duplicate keys, bad traces) get
one line naming the file, never a traceback, a hang or gigabytes of memory."""

from __future__ import annotations

import json
import os
import re

import pytest
from records import make_record

from specperf.analysis import study_traces
from specperf.profiles.scenarios import ProfileError, load_profile
from specperf.profiles.workloads import WorkloadError, load
from specperf.records import ScenarioResult
from specperf.storage import MAX_DEPTH, ResultFileError, depth, read_json, read_record, result_path, write_result


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.fixture
def result_file(tmp_path):
    return write_result(tmp_path, make_record())


def test_depth_counts_levels():
    assert (depth(1), depth([]), depth({"a": [1]}), depth([[{"b": []}]])) == (0, 1, 2, 4)
    assert depth(json.loads(nested(500))) == MAX_DEPTH + 1  # counting stops past the limit


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1000, 100_000])
def test_json_nested_too_deep_is_one_line(result_file, levels):
    data = json.loads(result_file.read_text())
    result_file.write_text(json.dumps(data)[:-1] + f', "extra": {nested(levels)}}}')
    with pytest.raises(
        ResultFileError, match=rf"^{result_file}: corrupt result \(nested more than {MAX_DEPTH} deep\)$"
    ):
        read_record(result_file, ScenarioResult, "result")


def test_a_real_result_is_far_from_the_depth_limit(result_file):
    assert depth(json.loads(result_file.read_text())) < MAX_DEPTH // 2


def test_duplicate_keys_are_refused(result_file):
    text = result_file.read_text()
    result_file.write_text(text.replace('"status": "ok"', '"status": "ok", "status": "error"', 1))
    with pytest.raises(ResultFileError, match=r"duplicate key 'status'"):
        read_record(result_file, ScenarioResult, "result")


def test_a_device_behind_a_result_name_is_refused(tmp_path):
    path = result_path(tmp_path, "zero")
    path.parent.mkdir(parents=True)
    path.symlink_to("/dev/zero")
    with pytest.raises(ResultFileError, match=rf"^{path}: cannot read result: not a regular file$"):
        read_json(path, "result")


def test_a_fifo_is_refused_without_waiting(tmp_path):
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    with pytest.raises(ResultFileError, match="not a regular file"):
        read_json(path, "result")  # opening a FIFO would block until a writer came


def test_a_file_over_the_size_limit_is_refused(tmp_path, monkeypatch):
    import specperf.storage as storage

    path = tmp_path / "big.json"
    path.write_text(json.dumps({"samples": [1.0] * 1000}))
    monkeypatch.setattr(storage, "MAX_FILE_BYTES", 1000)
    with pytest.raises(ResultFileError, match=r"bytes, more than the 1000 this suite reads"):
        storage.read_bounded_bytes(path, "result", storage.MAX_FILE_BYTES)


def test_a_profile_nested_too_deep_is_one_line(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("[profile]\nname = 'x'\nvalue = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ProfileError, match=rf"^{path}: not valid TOML: nested too deeply$"):
        load_profile(str(path))


def test_a_workload_line_nested_too_deep_is_one_line(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text('{"question": ' + nested(100_000) + "}\n")
    with pytest.raises(WorkloadError, match=rf"^{path}:1: invalid JSON: nested too deeply$"):
        load("gsm8k", 1, 42, tmp_path)


@pytest.mark.parametrize(
    "content, problem",
    [
        (
            b'{"id": "0", "prompt_token_ids": [1], "acc_eagle": {"acc_len": [1, "x"]}}\n',
            r":1: not a study trace line \(TypeError",
        ),
        (
            b'{"id": "0", "prompt_token_ids": [1], "acc_eagle": {"acc_len": ' + nested(100_000).encode() + b"}}\n",
            r":1: not a study trace line",
        ),
        (  # once an OverflowError out of the simulator's arrays
            b'{"id": "0", "prompt_token_ids": [1], "acc_eagle": {"acc_len": [1' + b"0" * 400 + b", 1]}}\n",
            r":1: not a study trace line \(TypeError: acc_len must be a list of whole numbers from 0 to 1000000\)",
        ),
        (b'{"id": "0\xff"}\n', r": not valid UTF-8 \(byte 10\)"),
        (b"", r": no trace lines"),
    ],
    ids=["text-length", "nested", "huge", "bad-byte", "empty"],
)
def test_a_bad_study_trace_is_one_line(tmp_path, content, problem):
    path = tmp_path / "combined_gsm8k.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"^{path}{problem}"):
        study_traces.read_study_traces(path)


TELEMETRY = {
    "samples": 3,
    "interval_s": 0.5,
    "sm_clock_mhz": {"min": 1, "median": 2, "max": 3},
    "throttle_reasons": [],
    "memory_used_mib": {"start": 1, "peak": 2},
    "foreign_pids": [],
}


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"sm_clock_mhz": 5}, "gpu_telemetry: Value error, sm_clock_mhz"),
        ({"memory_used_mib": 5}, "gpu_telemetry: Value error, memory_used_mib"),
        ({"throttle_reasons": [["a"]]}, "gpu_telemetry: Value error, throttle_reasons.0"),
        ({"sm_clock_mhz": {"min": 1, "median": "fast", "max": 3}}, "gpu_telemetry: Value error, sm_clock_mhz.median"),
    ],
)
def test_free_form_telemetry_is_typed_on_load(result_file, bad, field, tmp_path, capsys):
    from specperf.cli import main

    data = json.loads(result_file.read_text())
    result_file.write_text(json.dumps({**data, "gpu_telemetry": TELEMETRY}))
    read_record(result_file, ScenarioResult, "result")  # the sampler's own shape is fine
    result_file.write_text(json.dumps({**data, "gpu_telemetry": {**TELEMETRY, **bad}}))
    with pytest.raises(ResultFileError, match=rf"^{result_file}: corrupt result \({field}"):
        read_record(result_file, ScenarioResult, "result")
    assert main(["report", str(tmp_path)]) == 0  # the report names the file, no traceback
    assert "report:" in capsys.readouterr().out


def test_a_gate_config_difference_is_a_pair(tmp_path):
    from specperf.records import Gate

    side = {"vllm": "0.29.0", "rounds": [], "metrics": {}}
    Gate.model_validate(
        {"current": side, "candidate_python": "p", "pairing": "interleaved", "config_diff": {"async": [None, True]}}
    )
    with pytest.raises(Exception, match="config_diff.async"):
        Gate.model_validate(
            {"current": side, "candidate_python": "p", "pairing": "interleaved", "config_diff": {"async": [1]}}
        )


@pytest.mark.parametrize("environments", [{"current": {"methods": 5}}, {"current": {"vllm": "0.29.0"}}])
def test_a_run_files_builds_are_typed_on_load(tmp_path, environments):
    from records import write_run_file

    path = write_run_file(tmp_path, "unit")
    path.write_text(json.dumps({**json.loads(path.read_text()), "environments": environments}))
    from specperf.records import RunFile

    with pytest.raises(ResultFileError, match=rf"^{path}: corrupt run file \(environments: Value error, methods"):
        read_record(path, RunFile, "run file")


NEGATIVE = "Input should be greater than or equal to 0"
UNSHAPED = "trace: Value error, "


def _traced_result_file(tmp_path):
    from specperf.records import RequestTrace, Trace

    result = make_record()
    result.trace = Trace(
        requests=[RequestTrace(request_id="r0", drafted=[3, 3], accepted=[2, 1], ngram_acc=[3, 1, 2], prompt_len=9)],
        step_us={"total": [900, 800], "draft": [10, 10], "forward": [700, 600], "sample": [50, 50]},
        step_batch={"tokens": [9, 4], "kv_tokens": [9, 13], "requests": [1, 1]},
        steps=2,
    )
    return write_result(tmp_path, result)


@pytest.mark.parametrize(
    "change, problem",
    [
        # a negative acceptance once made the simulator's trajectory loop for ever (`specperf report`)
        (
            lambda t: t["requests"][0]["ngram_acc"].__setitem__(0, -3),
            rf"trace\.requests\[0\]\.ngram_acc\[0\]: {NEGATIVE}",
        ),
        (
            lambda t: t["requests"][0]["accepted"].__setitem__(1, -1),
            rf"trace\.requests\[0\]\.accepted\[1\]: {NEGATIVE}",
        ),
        (lambda t: t["step_us"]["forward"].pop(), UNSHAPED + r"step lists of unequal length \(forward 1, draft 2\)"),
        (
            lambda t: t["step_batch"]["requests"].append(1),
            UNSHAPED + r"step lists of unequal length \(draft 2, requests 3\)",
        ),
        (lambda t: t["step_us"].pop("forward"), UNSHAPED + r"step_us lacks forward"),
        (lambda t: t["step_batch"].pop("kv_tokens"), UNSHAPED + r"step_batch lacks kv_tokens"),
        (lambda t: t["step_us"]["draft"].__setitem__(0, -5), rf"trace\.step_us\.draft\[0\]: {NEGATIVE}"),
        # found by the fuzz pass (tests/fuzz_files.py): a trace without its step times, and a step of
        # 0 µs (a relative error of inf that summary.json cannot hold), were tracebacks in report and simulate
        (lambda t: t.pop("step_us"), UNSHAPED + r"step_us lacks total, draft, forward, sample"),
        (lambda t: t["step_us"]["total"].__setitem__(1, 0), UNSHAPED + r"step_us\.total\[1\]: a step of 0 µs"),
    ],
)
def test_a_traces_lists_are_checked_on_load(tmp_path, change, problem):
    """What the trace readers (analysis/traces.py, analysis/cost_fit.py) index into is shaped when the
    file is read: one line naming the file, never a hang or a traceback later."""
    path = _traced_result_file(tmp_path)
    data = json.loads(path.read_text())
    change(data["trace"])
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFileError, match=rf"^{path}: corrupt result \({problem}\)$"):
        read_record(path, ScenarioResult, "result")


def test_an_untouched_trace_loads(tmp_path):
    assert read_record(_traced_result_file(tmp_path), ScenarioResult, "result").trace.steps == 2


@pytest.mark.parametrize("argv", [["report", "{run}"], ["report", "{run}", "--out", "{run}/out"]])
def test_a_file_the_command_cannot_write_is_one_line(tmp_path, capsys, argv):
    """A folder the command cannot write into (here a directory where its file goes, which even
    root cannot replace; a read-only folder is the same error) was a PermissionError's traceback: any
    command's (specperf simulate --json, noise --write) ends in specperf.cli.main's one line."""
    from specperf.cli import main

    run = tmp_path / "run"
    write_result(run, make_record())
    for name in ("index.html", "out/index.html"):
        (run / name).mkdir(parents=True)
    assert main([a.format(run=run) for a in argv]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"specperf: error: {run}") and line.endswith("Is a directory")


def test_a_second_result_of_one_scenario_names_both_files(tmp_path, capsys):
    """A copy of a result under another name once merged silently with the first (the report showed
    one of the two); now the copy is a problem line naming both, and the rightly named file counts."""
    from specperf.cli import main
    from specperf.storage import load_results, read_run_dir

    right = write_result(tmp_path, make_record())
    copy = right.with_name("copy.json")
    copy.write_text(right.read_text())
    found = read_run_dir(tmp_path)
    assert [r.id for r in found.results] == [right.stem]
    assert found.problems == [f"{copy}: holds scenario {right.stem}, whose result is {right}"]
    with pytest.raises(ResultFileError, match=f"^{copy}: holds scenario"):
        load_results(tmp_path)
    assert main(["report", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "report:" in out
    assert err == f"specperf report: {copy}: holds scenario {right.stem}, whose result is {right}\n"


@pytest.mark.parametrize(
    "field, value, problem",
    [
        # found by the fuzz pass: a stored offset of 1e308 overflowed the report's best-k table
        ("gate_engine_offset", 1e308, "scenario.gate_engine_offset: Input should be less than or equal to 0.2"),
        ("batch_size", 10**12, "scenario.batch_size: Input should be less than or equal to 8192"),
        ("rounds", 0, "scenario.rounds: Input should be greater than or equal to 1"),
        ("tolerances", {"throughput_tok_s": -1.0}, r"scenario.tolerances.throughput_tok_s: Input should be greater"),
    ],
)
def test_a_stored_scenario_holds_what_a_profile_can(result_file, field, value, problem):
    """A stored scenario's settings are held to the profile format's ranges (records/scenario.py)."""
    data = json.loads(result_file.read_text())
    data["scenario"][field] = value
    result_file.write_text(json.dumps(data))
    with pytest.raises(ResultFileError, match=rf"^{result_file}: corrupt result \({problem}"):
        read_record(result_file, ScenarioResult, "result")


def test_a_newer_files_extra_timing_is_kept_and_not_shown_as_a_time(tmp_path):
    """Found by the fuzz pass: an extra field in `timings` (records keep what a newer suite adds) was
    formatted as a duration, a TypeError in the report."""
    from specperf.report import write_report

    path = write_result(tmp_path, make_record())
    data = json.loads(path.read_text())
    data["timings"] = {"engine_start_s": 12.5, "a": [1, None]}
    path.write_text(json.dumps(data))
    result = read_record(path, ScenarioResult, "result")
    assert result.timings.to_json()["a"] == [1, None] and "a" not in result.timings.parts()
    assert "engine_start_s" in write_report([tmp_path]).read_text()


@pytest.mark.parametrize("k", ["5", -2, 0, 65, True])
def test_a_stored_k_is_one_a_profile_can_give(result_file, k):
    """A review of the fuzz pass: a stored k of "5" beside an int k was a TypeError in the report's
    best-k table and in specperf tune, and -2 was taken."""
    data = json.loads(result_file.read_text())
    data["scenario"]["method"]["params"]["num_speculative_tokens"] = k
    result_file.write_text(json.dumps(data))
    problem = rf"scenario\.method: Value error, params\.num_speculative_tokens: {re.escape(repr(k))} is not a k"
    with pytest.raises(ResultFileError, match=rf"^{result_file}: corrupt result \({problem} from 1 to 64"):
        read_record(result_file, ScenarioResult, "result")
