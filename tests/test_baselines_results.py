"""Unit tests for specperf.storage, specperf.judge.baselines and the hardware key."""

from __future__ import annotations

import json
import os
import re

import pytest
from pydantic import ValidationError
from records import HARDWARE_KEY, make_record, reference_scenario, write_run

from specperf.judge.baselines import baseline_from_result, baseline_path, load_baseline, write_baseline
from specperf.records import Baseline, ScenarioResult
from specperf.run.hardware import device as hardware
from specperf.storage import (
    SCHEMA_VERSION,
    ResultFileError,
    atomic_write_json,
    inside,
    load_results,
    read_json,
    read_record,
    read_run_dir,
    result_path,
    write_result,
)

SD_ID = "tiny-llama-eagle3-k3-bs4-gsm8k"


def write_own_baseline(baseline_dir, result):
    """A baseline written by the machine that measured the result."""
    return write_baseline(baseline_dir, result, result.device.hardware_key)


def test_a_baseline_is_only_written_under_this_machines_key(tmp_path):
    record = make_record(hardware_key="cpu-elsewhere-4c")
    with pytest.raises(
        ValueError, match="refusing to write a baseline for cpu-test-xeon-2c from a result measured on cpu-elsewhere-4c"
    ):
        write_baseline(tmp_path, record, HARDWARE_KEY)
    assert not any(tmp_path.rglob("*.json"))


def one_line_naming(info, path) -> str:
    """The ResultFileError's message, checked to be one line that starts with the file."""
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


def test_atomic_write_json_round_trips_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "deep" / "er" / "data.json"
    data = {"schema_version": SCHEMA_VERSION, "b": [1, 2.5, None], "a": {"x": "ü"}}
    atomic_write_json(path, data)
    assert read_json(path, "thing") == data
    assert os.listdir(path.parent) == ["data.json"]
    atomic_write_json(path, {**data, "b": []})  # overwrite in place
    assert read_json(path, "thing")["b"] == []
    assert os.listdir(path.parent) == ["data.json"]
    assert path.read_text(encoding="utf-8").endswith("}\n")


def test_atomic_write_json_failure_keeps_old_file_and_no_temp(tmp_path):
    path = tmp_path / "data.json"
    atomic_write_json(path, {"schema_version": SCHEMA_VERSION, "n": 1})
    with pytest.raises(TypeError):
        atomic_write_json(path, {"schema_version": SCHEMA_VERSION, "bad": object()})
    assert os.listdir(tmp_path) == ["data.json"]
    assert read_json(path, "thing")["n"] == 1


@pytest.mark.parametrize(
    "content, words",
    [
        ('{"schema_version": 1, "metrics": {"throughput', "not valid JSON"),  # truncated
        ("not json at all", "not valid JSON"),
        ("", "not valid JSON"),
        ('[{"schema_version": 1}]', "expected a JSON object"),
        ('{"schema_version": 2}', "schema version 2"),
        ('{"metrics": {}}', "schema version None"),
    ],
)
def test_read_json_rejects_bad_files(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        read_json(path, "result")
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert words in message
    assert "\n" not in message


def test_read_json_non_utf8(tmp_path):
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ResultFileError, match=re.escape(str(path))):
        read_json(path, "result")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_read_json_refuses_non_finite_numbers(tmp_path, constant):
    path = tmp_path / "nan.json"
    path.write_text('{"schema_version": 1, "x": [1.0, %s]}' % constant, encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        read_json(path, "result")
    assert one_line_naming(info, path) == (f"{path}: corrupt result (not valid JSON: {constant} is not a number)")


def test_read_json_missing_file(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(ResultFileError, match=re.escape(f"{path}: cannot read result")):
        read_json(path, "result")


def test_write_and_load_results(tmp_path):
    run = tmp_path / "run"
    sd, ref = make_record(), make_record(reference_scenario())
    path = write_result(run, sd)
    assert path == result_path(run, "tiny-llama-eagle3-k3-bs4-gsm8k")
    assert path == run / "results" / "tiny-llama-eagle3-k3-bs4-gsm8k.json"
    write_result(run, ref)
    loaded = load_results(run)
    assert all(isinstance(r, ScenarioResult) for r in loaded)
    assert [r.id for r in loaded] == ["tiny-llama-eagle3-k3-bs4-gsm8k", "tiny-llama-nosd-bs4-gsm8k"]
    assert all(r.schema_version == SCHEMA_VERSION for r in loaded)
    assert loaded[0] == sd and loaded[1] == ref
    assert loaded[0].to_json() == json.loads(json.dumps(sd.to_json()))
    assert json.loads(path.read_text(encoding="utf-8")) == sd.to_json()


def test_unknown_fields_survive_a_round_trip(tmp_path):
    data = make_record().to_json()
    data["from_a_newer_suite"] = {"x": 1}
    data["device"]["fan_rpm"] = 1200
    result = ScenarioResult.model_validate(data)
    path = write_result(tmp_path, result)
    loaded = read_record(path, ScenarioResult, "result")
    assert loaded.to_json()["from_a_newer_suite"] == {"x": 1}
    assert loaded.device.to_json()["fan_rpm"] == 1200


def test_load_results_of_an_empty_run(tmp_path):
    (tmp_path / "results").mkdir()
    assert load_results(tmp_path) == []


def test_load_results_without_results_folder(tmp_path):
    with pytest.raises(ResultFileError, match="not a run directory"):
        load_results(tmp_path)
    with pytest.raises(ResultFileError, match=re.escape(str(tmp_path / "nope"))):
        load_results(tmp_path / "nope")


def test_load_results_names_a_corrupt_file(tmp_path):
    write_run(tmp_path, [make_record()])
    broken = tmp_path / "results" / "zz-broken.json"
    broken.write_text('{"schema_version": 1, "scen', encoding="utf-8")
    with pytest.raises(ResultFileError, match=re.escape(str(broken))):
        load_results(tmp_path)


def stored_result(tmp_path, change):
    """A result file written by the suite, then edited by change(data)."""
    path = write_result(tmp_path, make_record())
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_result_file_with_non_finite_number_is_refused(tmp_path, constant):
    path = write_result(tmp_path, make_record())
    text = path.read_text(encoding="utf-8")
    assert '"value": 100.0' in text
    path.write_text(text.replace('"value": 100.0', f'"value": {constant}', 1), encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        load_results(tmp_path)
    assert one_line_naming(info, path) == (f"{path}: corrupt result (not valid JSON: {constant} is not a number)")


def set_in(data, keys, value):
    for key in keys[:-1]:
        data = data[key]
    data[keys[-1]] = value


@pytest.mark.parametrize(
    "keys, value, where",
    [
        (("scenario",), None, "scenario: Input should be a valid dictionary"),
        (("rounds", 0, "wall_s"), "fast", "rounds[0].wall_s: Input should be a valid number"),
        (("metrics", "throughput_tok_s", "samples", 1), "fast", "metrics.throughput_tok_s.samples[1]"),
        (("metrics", "throughput_tok_s", "value"), "fast", "metrics.throughput_tok_s.value"),
        (("device", "hardware_key"), 3, "device.hardware_key: Input should be a valid string"),
        (("scenario", "id"), "", "scenario: Value error, id '' does not follow from the scenario's fields"),
        (("status",), None, "status: Input should be a valid string"),
    ],
)
def test_result_file_of_the_wrong_type_names_the_file_and_field(tmp_path, keys, value, where):
    path = stored_result(tmp_path, lambda data: set_in(data, keys, value))
    with pytest.raises(ResultFileError) as info:
        load_results(tmp_path)
    assert one_line_naming(info, path).startswith(f"{path}: corrupt result ({where}")


def test_result_file_without_a_scenario_names_the_field(tmp_path):
    path = stored_result(tmp_path, lambda data: data.pop("scenario"))
    with pytest.raises(ResultFileError) as info:
        load_results(tmp_path)
    assert one_line_naming(info, path) == f"{path}: corrupt result (scenario: Field required)"


def test_read_run_dir_skips_and_names_a_result_of_the_wrong_type(tmp_path):
    write_run(tmp_path, [make_record(reference_scenario())])
    path = stored_result(tmp_path, lambda data: data.__setitem__("scenario", None))
    found = read_run_dir(tmp_path)
    assert [r.id for r in found.results] == ["tiny-llama-nosd-bs4-gsm8k"]
    assert found.problems == [
        f"{path}: corrupt result (scenario: Input should be a valid dictionary or instance of Scenario)"
    ]


def test_model_validate_of_a_built_dict_refuses_wrong_types():
    data = make_record().to_json()
    assert ScenarioResult.model_validate(data) == make_record()
    with pytest.raises(ValidationError, match="scenario"):
        ScenarioResult.model_validate({**data, "scenario": None})
    with pytest.raises(ValidationError, match="finite number"):
        ScenarioResult.model_validate({**data, "metrics": {"throughput_tok_s": {"value": float("nan")}}})


# --------------------------------------------------------------------------
# paths built from ids and keys stay inside their folder
# --------------------------------------------------------------------------


@pytest.mark.parametrize("part", ["../x", "..", ".", "", "a/b", "..\\x", "/etc/passwd"])
def test_inside_refuses_parts_that_leave_the_folder(tmp_path, part):
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        inside(tmp_path, part)
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        inside(tmp_path, "fine", part)


def test_inside_allows_plain_names_and_refuses_a_link_out(tmp_path):
    assert inside(tmp_path, HARDWARE_KEY, "s.json") == tmp_path / HARDWARE_KEY / "s.json"
    assert inside(tmp_path, "..s.json") == tmp_path / "..s.json"  # dots inside a name are a name
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ResultFileError) as info:
        inside(tmp_path / "store", "link", "s.json")
    store = tmp_path / "store"
    assert str(info.value) == f"{store / 'link'}: refusing to read or write through a symbolic link"


@pytest.mark.parametrize("scenario_id", ["../x", "../../etc/x", "a/b"])
def test_result_paths_refuse_scenario_ids_that_leave_the_run(tmp_path, scenario_id):
    run = tmp_path / "run"
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        result_path(run, scenario_id)
    record = make_record()
    record.scenario = record.scenario.replace(model=record.scenario.model.model_copy(update={"name": scenario_id}))
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        write_result(run, record)
    assert not any(tmp_path.rglob("*.json"))


# --------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------


def test_load_baseline_absent(tmp_path):
    assert load_baseline(tmp_path, HARDWARE_KEY, "tiny-llama-eagle3-k3-bs4-gsm8k") is None


def test_write_and_load_baseline(tmp_path):
    record = make_record()
    path = write_own_baseline(tmp_path, record)
    assert path == tmp_path / HARDWARE_KEY / "tiny-llama-eagle3-k3-bs4-gsm8k.json"
    assert path == baseline_path(tmp_path, HARDWARE_KEY, "tiny-llama-eagle3-k3-bs4-gsm8k")
    assert os.listdir(path.parent) == [path.name]
    baseline = load_baseline(tmp_path, HARDWARE_KEY, "tiny-llama-eagle3-k3-bs4-gsm8k")
    assert isinstance(baseline, Baseline)
    assert baseline.schema_version == SCHEMA_VERSION
    assert baseline.scenario_hash == record.scenario.hash
    assert baseline.scenario_id == record.scenario.id == record.id
    assert baseline.hardware_key == HARDWARE_KEY
    assert baseline.metrics == record.metrics
    assert {k: m.to_json() for k, m in baseline.metrics.items()} == json.loads(
        json.dumps({k: m.to_json() for k, m in record.metrics.items()})
    )
    assert baseline.provenance["vllm"] == "0.32.0"
    assert baseline.recorded_at == record.finished_at
    assert baseline == baseline_from_result(record)
    # another hardware key is another store
    assert load_baseline(tmp_path, "gpu-nvidia-h100-80gb-hbm3-80g-x1", "tiny-llama-eagle3-k3-bs4-gsm8k") is None


def test_write_baseline_files_under_the_result_hardware_key(tmp_path):
    path = write_own_baseline(tmp_path, make_record(hardware_key="gpu-nvidia-h100-80g-x1"))
    assert path.relative_to(tmp_path).parts == ("gpu-nvidia-h100-80g-x1", "tiny-llama-eagle3-k3-bs4-gsm8k.json")


def test_write_baseline_refuses_error(tmp_path):
    with pytest.raises(ValueError, match="from a result with status 'error'"):
        write_own_baseline(tmp_path, make_record(status="error", error="boom"))
    assert not any(tmp_path.iterdir())


def test_write_baseline_refuses_invalid(tmp_path):
    with pytest.raises(ValueError, match="greedy outputs differ"):
        write_own_baseline(tmp_path, make_record(reasons=["greedy outputs differ between rounds"]))
    assert not any(tmp_path.iterdir())


def test_write_baseline_keeps_old_one_when_refused(tmp_path):
    path = write_own_baseline(tmp_path, make_record())
    before = path.read_text(encoding="utf-8")
    with pytest.raises(ValueError):
        write_own_baseline(tmp_path, make_record(throughput=[1.0] * 5, reasons=["a round produced no output tokens"]))
    assert path.read_text(encoding="utf-8") == before


BASELINE_KEYS = '"scenario_id": "s", "hardware_key": "%s"' % HARDWARE_KEY


@pytest.mark.parametrize(
    "content, words",
    [
        ('{"schema_version": 1, "metr', "not valid JSON"),
        (
            '{"schema_version": 1, %s, "metrics": {}}' % BASELINE_KEYS,
            "corrupt baseline (scenario_hash: Field required)",
        ),
        (
            '{"schema_version": 1, %s, "scenario_hash": "abc"}' % BASELINE_KEYS,
            "corrupt baseline (metrics: Field required)",
        ),
        ('{"schema_version": 1, "metrics": {}}', "corrupt baseline (scenario_id: Field required)"),
        ('{"schema_version": 7, "scenario_hash": "abc", "metrics": {}}', "schema version 7"),
    ],
)
def test_load_baseline_corrupt(tmp_path, content, words):
    path = baseline_path(tmp_path, HARDWARE_KEY, "s")
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        load_baseline(tmp_path, HARDWARE_KEY, "s")
    assert str(path) in str(info.value) and words in str(info.value)
    assert "\n" not in str(info.value)


def test_load_baseline_missing_key_is_one_line_naming_file_and_field(tmp_path):
    path = baseline_path(tmp_path, HARDWARE_KEY, "s")
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 1, %s, "metrics": {}}' % BASELINE_KEYS, encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        load_baseline(tmp_path, HARDWARE_KEY, "s")
    assert one_line_naming(info, path) == f"{path}: corrupt baseline (scenario_hash: Field required)"


def stored_baseline(tmp_path, change):
    """A baseline written by the suite, then edited by change(data)."""
    path = write_own_baseline(tmp_path, make_record())
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_baseline_with_non_finite_number_is_refused(tmp_path, constant):
    path = write_own_baseline(tmp_path, make_record())
    text = path.read_text(encoding="utf-8")
    assert '"value": 100.0' in text
    path.write_text(text.replace('"value": 100.0', f'"value": {constant}', 1), encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        load_baseline(tmp_path, HARDWARE_KEY, SD_ID)
    assert one_line_naming(info, path) == (f"{path}: corrupt baseline (not valid JSON: {constant} is not a number)")


@pytest.mark.parametrize(
    "keys, value, where",
    [
        (("metrics", "throughput_tok_s", "samples", 0), "fast", "metrics.throughput_tok_s.samples[0]"),
        (("metrics", "speedup", "value"), "fast", "metrics.speedup.value"),
        (("metrics",), None, "metrics: Input should be a valid dictionary"),
        (("scenario_hash",), 123, "scenario_hash: Input should be a valid string"),
        (("memory",), "lots", "memory: Input should be a valid dictionary"),
    ],
)
def test_baseline_of_the_wrong_type_names_the_file_and_field(tmp_path, keys, value, where):
    path = stored_baseline(tmp_path, lambda data: set_in(data, keys, value))
    with pytest.raises(ResultFileError) as info:
        load_baseline(tmp_path, HARDWARE_KEY, SD_ID)
    assert one_line_naming(info, path).startswith(f"{path}: corrupt baseline ({where}")


@pytest.mark.parametrize("key", ["../x", "..", "a/b"])
def test_baseline_paths_refuse_hardware_keys_that_leave_the_store(tmp_path, key):
    store = tmp_path / "baselines"
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        baseline_path(store, key, SD_ID)
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        load_baseline(store, key, SD_ID)
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        write_own_baseline(store, make_record(hardware_key=key))
    assert not any(tmp_path.rglob("*.json"))


@pytest.mark.parametrize("scenario_id", ["../x", "../../x", "a/b"])
def test_baseline_paths_refuse_scenario_ids_that_leave_the_store(tmp_path, scenario_id):
    store = tmp_path / "baselines"
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        baseline_path(store, HARDWARE_KEY, scenario_id)
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        load_baseline(store, HARDWARE_KEY, scenario_id)
    record = make_record()
    record.scenario = record.scenario.replace(model=record.scenario.model.model_copy(update={"name": scenario_id}))
    with pytest.raises(ResultFileError, match="refusing a path outside"):
        write_own_baseline(store, record)
    assert not any(tmp_path.rglob("*.json"))


# --------------------------------------------------------------------------
# hardware key
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        ("Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", "intel-xeon-platinum-8480"),
        ("Intel(R) Core(TM) i7-9700K CPU @ 3.60GHz", "intel-core-i7-9700k"),
        ("AMD EPYC 7763 64-Core Processor", "amd-epyc-7763-64-core-processor"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
        ("NVIDIA H200", "nvidia-h200"),
        ("aarch64", "aarch64"),
    ],
)
def test_slug(name, expected):
    assert hardware.slug(name) == expected


def test_describe_cpu(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_model", lambda: "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz")
    monkeypatch.setattr(hardware, "usable_cores", lambda: 2)
    monkeypatch.setattr(hardware, "_host_memory_gib", lambda: 16)
    device = hardware.describe_cpu()
    assert device.pop("calibration_s") > 0  # run/hardware/calibration.py: this machine's speed
    assert device == {
        "kind": "cpu",
        "name": "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz",
        "count": 2,
        "memory_gib": 16,
        "driver": None,
        "hardware_key": "cpu-intel-xeon-platinum-8480-2c",
    }


def test_describe_cpu_on_this_machine():
    device = hardware.describe_cpu()
    assert device["kind"] == "cpu" and device["count"] >= 1
    assert re.fullmatch(r"cpu-[a-z0-9]+(-[a-z0-9]+)*-\d+c", device["hardware_key"]), device["hardware_key"]
    assert device["hardware_key"].endswith(f"-{device['count']}c")
