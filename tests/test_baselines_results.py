"""Unit tests for specperf.storage, specperf.judge.baselines and the hardware key."""

from __future__ import annotations

import json
import os
import re

import pytest

from records import HARDWARE_KEY, make_record, reference_scenario, write_run
from specperf.run import device as hardware
from specperf.judge.baselines import baseline_path, load_baseline, write_baseline
from specperf.storage import (
    SCHEMA_VERSION,
    ResultFileError,
    atomic_write_json,
    load_results,
    read_json,
    result_path,
    write_result,
)

# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


def test_atomic_write_json_round_trips_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "deep" / "er" / "data.json"
    data = {"schema_version": SCHEMA_VERSION, "b": [1, 2.5, None], "a": {"x": "ü"}}
    atomic_write_json(path, data)
    assert read_json(path, "thing") == data
    assert os.listdir(path.parent) == ["data.json"]
    atomic_write_json(path, {**data, "b": []})                   # overwrite in place
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


@pytest.mark.parametrize("content, words", [
    ('{"schema_version": 1, "metrics": {"throughput', "not valid JSON"),          # truncated
    ("not json at all", "not valid JSON"),
    ("", "not valid JSON"),
    ('[{"schema_version": 1}]', "expected a JSON object"),
    ('{"schema_version": 2}', "schema version 2"),
    ('{"metrics": {}}', "schema version None"),
])
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
    assert [r["scenario"]["id"] for r in loaded] == ["tiny-llama-eagle3-k3-bs4-gsm8k", "tiny-llama-nosd-bs4-gsm8k"]
    assert all(r["schema_version"] == SCHEMA_VERSION for r in loaded)
    assert {k: v for k, v in loaded[0].items() if k != "schema_version"} == json.loads(json.dumps(sd))


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


# --------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------


def test_load_baseline_absent(tmp_path):
    assert load_baseline(tmp_path, HARDWARE_KEY, "tiny-llama-eagle3-k3-bs4-gsm8k") is None


def test_write_and_load_baseline(tmp_path):
    record = make_record()
    path = write_baseline(tmp_path, record)
    assert path == tmp_path / HARDWARE_KEY / "tiny-llama-eagle3-k3-bs4-gsm8k.json"
    assert path == baseline_path(tmp_path, HARDWARE_KEY, "tiny-llama-eagle3-k3-bs4-gsm8k")
    assert os.listdir(path.parent) == [path.name]
    baseline = load_baseline(tmp_path, HARDWARE_KEY, "tiny-llama-eagle3-k3-bs4-gsm8k")
    assert baseline["schema_version"] == SCHEMA_VERSION
    assert baseline["scenario_hash"] == record["scenario"]["hash"]
    assert baseline["scenario_id"] == record["scenario"]["id"]
    assert baseline["hardware_key"] == HARDWARE_KEY
    assert baseline["metrics"] == json.loads(json.dumps(record["metrics"]))
    assert baseline["provenance"]["vllm"] == "0.32.0"
    assert baseline["recorded_at"] == record["finished_at"]
    # another hardware key is another store
    assert load_baseline(tmp_path, "gpu-nvidia-h100-80gb-hbm3-80g-x1", "tiny-llama-eagle3-k3-bs4-gsm8k") is None


def test_write_baseline_files_under_the_result_hardware_key(tmp_path):
    path = write_baseline(tmp_path, make_record(hardware_key="gpu-nvidia-h100-80g-x1"))
    assert path.relative_to(tmp_path).parts == ("gpu-nvidia-h100-80g-x1", "tiny-llama-eagle3-k3-bs4-gsm8k.json")


def test_write_baseline_refuses_error(tmp_path):
    with pytest.raises(ValueError, match="from a result with status 'error'"):
        write_baseline(tmp_path, make_record(status="error", error="boom"))
    assert not any(tmp_path.iterdir())


def test_write_baseline_refuses_invalid(tmp_path):
    with pytest.raises(ValueError, match="greedy outputs differ"):
        write_baseline(tmp_path, make_record(reasons=["greedy outputs differ between rounds"]))
    assert not any(tmp_path.iterdir())


def test_write_baseline_keeps_old_one_when_refused(tmp_path):
    path = write_baseline(tmp_path, make_record())
    before = path.read_text(encoding="utf-8")
    with pytest.raises(ValueError):
        write_baseline(tmp_path, make_record(throughput=[1.0] * 5, reasons=["a round produced no output tokens"]))
    assert path.read_text(encoding="utf-8") == before


@pytest.mark.parametrize("content, words", [
    ('{"schema_version": 1, "metr', "not valid JSON"),
    ('{"schema_version": 1, "metrics": {}}', "missing 'scenario_hash'"),
    ('{"schema_version": 1, "scenario_hash": "abc"}', "missing 'metrics'"),
    ('{"schema_version": 7, "scenario_hash": "abc", "metrics": {}}', "schema version 7"),
])
def test_load_baseline_corrupt(tmp_path, content, words):
    path = baseline_path(tmp_path, HARDWARE_KEY, "s")
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        load_baseline(tmp_path, HARDWARE_KEY, "s")
    assert str(path) in str(info.value) and words in str(info.value)


# --------------------------------------------------------------------------
# hardware key
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name, expected", [
    ("Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", "intel-xeon-platinum-8480"),
    ("Intel(R) Core(TM) i7-9700K CPU @ 3.60GHz", "intel-core-i7-9700k"),
    ("AMD EPYC 7763 64-Core Processor", "amd-epyc-7763-64-core-processor"),
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
    ("NVIDIA H200", "nvidia-h200"),
    ("aarch64", "aarch64"),
])
def test_slug(name, expected):
    assert hardware.slug(name) == expected


def test_describe_cpu(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_model", lambda: "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz")
    monkeypatch.setattr(hardware, "usable_cores", lambda: 2)
    monkeypatch.setattr(hardware, "_host_memory_gib", lambda: 16)
    device = hardware.describe_cpu()
    assert device == {"kind": "cpu", "name": "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", "count": 2,
                      "memory_gib": 16, "driver": None, "hardware_key": "cpu-intel-xeon-platinum-8480-2c"}


def test_describe_cpu_on_this_machine():
    device = hardware.describe_cpu()
    assert device["kind"] == "cpu" and device["count"] >= 1
    assert re.fullmatch(r"cpu-[a-z0-9]+(-[a-z0-9]+)*-\d+c", device["hardware_key"]), device["hardware_key"]
    assert device["hardware_key"].endswith(f"-{device['count']}c")
