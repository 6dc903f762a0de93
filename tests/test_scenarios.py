"""Unit tests for specperf.profiles.scenarios: shipped profiles, ids, engine keys, hashes, profile errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from specperf.profiles.registry import code_loading, workload_names
from specperf.profiles.scenarios import (
    NO_SD_LABEL,
    ProfileError,
    available_profiles,
    load_profile,
    profile_path,
)
from specperf.profiles.schema import CellTable, MethodTable, ModelTable, ProfileTable

REPO = Path(__file__).resolve().parents[1]

SHIPPED = ("cpu-smoke", "cpu-full", "h100-nightly", "study-full")
# (scenarios, distinct engine keys): one engine per (checkpoint, method), shared by batch sizes and datasets
SIZES = {"cpu-smoke": (25, 10), "cpu-full": (43, 17), "h100-nightly": (195, 15), "study-full": (316, 24)}


def speed_metrics() -> set[str]:
    """The metrics that measure speed, not reproducible figures (acceptance, lossless)."""
    from specperf.judge.metrics import METRICS

    return {name for name, spec in METRICS.items() if not spec.deterministic}


@pytest.fixture(scope="module")
def profiles():
    return {name: load_profile(name) for name in SHIPPED}


# --------------------------------------------------------------------------
# shipped profiles
# --------------------------------------------------------------------------


def test_shipped_profiles_are_available():
    assert set(SHIPPED) <= set(available_profiles())
    assert profile_path("cpu-smoke").name == "cpu-smoke.toml"
    assert profile_path("/some/where/own.toml") == Path("/some/where/own.toml")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_loads(profiles, name):
    profile = profiles[name]
    assert profile.name == name
    assert profile.tier == ("cpu" if name.startswith("cpu-") else "gpu")
    assert len(profile.scenarios) == SIZES[name][0]


@pytest.mark.parametrize("name", SHIPPED)
def test_scenario_ids_are_readable_and_unique(profiles, name):
    scenarios = profiles[name].scenarios
    ids = [s.id for s in scenarios]
    assert len(ids) == len(set(ids))
    for s in scenarios:
        traced = "-traced" if s.trace else ""
        if s.serves:
            assert s.id == f"{s.model.name}-{s.method.label}-c{s.concurrency}-{s.dataset}-serve"
            continue
        sampled = s.sampling.label()  # -t0.8-p0.95 where it samples
        assert s.id == f"{s.model.name}-{s.method.label}-bs{s.batch_size}-{s.dataset}{sampled}{traced}"
        assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*-bs\d+-[a-z_0-9]+(-t[0-9.]+(-p[0-9.]+)?)?(-traced)?", s.id), s.id


def test_known_ids_exist(profiles):
    ids = {s.id for s in profiles["h100-nightly"].scenarios}
    assert "llama3.1-8b-eagle3-k3-bs16-gsm8k" in ids
    assert "llama3.1-8b-nosd-bs16-gsm8k" in ids
    assert "qwen3-8b-draft-k3-bs8-aime" in ids
    assert "qwen3-8b-draft-k3-bs8-gsm8k" not in ids  # batch 8 only for reasoning workloads
    assert "llama3.1-8b-ngram-k5-bs1-instructcoder" in {s.id for s in profiles["study-full"].scenarios}


@pytest.mark.parametrize("name", sorted(available_profiles()))
def test_a_profile_that_keeps_throughput_informational_keeps_every_speed_metric_so(name):
    """Across runs on a drifting machine no speed figure may fail a case: a serve cell's latencies neither."""
    speed = speed_metrics()
    for scenario in load_profile(name).scenarios:
        if scenario.serves and "throughput_tok_s" in scenario.informational:
            assert speed <= set(scenario.informational), (scenario.id, sorted(speed - set(scenario.informational)))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_sd_scenario_has_its_reference_in_the_profile(profiles, name):
    by_id = {s.id: s for s in profiles[name].scenarios}
    sd = [s for s in by_id.values() if not s.method.is_reference]
    assert sd
    for s in sd:
        ref = by_id[s.reference_id]
        assert ref.method.is_reference and ref.method.label == NO_SD_LABEL
        assert (ref.model, ref.batch_size, ref.dataset) == (s.model, s.batch_size, s.dataset)
        assert ref.output_len == s.output_len


def test_reference_added_automatically(tmp_path):
    path = write_profile(tmp_path, CELL)
    ids = [s.id for s in load_profile(str(path)).scenarios]
    assert ids == ["m-nosd-bs1-gsm8k", "m-nosd-bs4-gsm8k", "m-ngram-k3-bs1-gsm8k", "m-ngram-k3-bs4-gsm8k"]


@pytest.mark.parametrize("name", SHIPPED)
def test_engine_keys_group_batch_sizes_and_datasets(profiles, name):
    scenarios = profiles[name].scenarios
    keys = {s.engine_key for s in scenarios}
    assert len(keys) == SIZES[name][1]
    # models of one checkpoint (Qwen3-8B with thinking on and off) share its engines; another
    # engine environment (study-full's tree cells' attention backend) is another engine, and so is
    # a sampled SD scenario's, which asks vLLM for each request's counts
    engines = {
        (
            s.model.path,
            s.method.label,
            s.trace,
            s.serves,
            tuple(sorted(s.env.items())),
            not s.sampling.greedy and not s.method.is_reference,
        )
        for s in scenarios
    }
    assert len(keys) == len(engines)


def test_engine_key_ignores_batch_size_dataset_and_output_len(profiles):
    by_id = {s.id: s for s in profiles["h100-nightly"].scenarios}
    a = by_id["llama3.1-8b-eagle3-k3-bs16-gsm8k"]
    assert a.engine_key == by_id["llama3.1-8b-eagle3-k3-bs1-cnn_dailymail"].engine_key
    assert a.engine_key == by_id["llama3.1-8b-eagle3-k3-bs8-aime"].engine_key  # output_len 512
    assert a.engine_key != by_id["llama3.1-8b-eagle-k3-bs16-gsm8k"].engine_key
    assert a.engine_key != by_id["qwen3-8b-eagle3-k3-bs16-gsm8k"].engine_key


def test_speculative_config():
    profile = load_profile("h100-nightly")
    by_id = {s.id: s for s in profile.scenarios}
    assert by_id["llama3.1-8b-nosd-bs1-gsm8k"].method.speculative_config() is None
    assert by_id["llama3.1-8b-eagle3-k3-bs1-gsm8k"].method.speculative_config() == {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
    }
    assert by_id["qwen3-8b-eagle3-k3-bs1-gsm8k"].method.params["model"] == "AngelSlim/Qwen3-8B_eagle3"


def test_cpu_smoke_tolerances_and_engine_args(profiles):
    s = next(iter(profiles["cpu-smoke"].scenarios))
    assert s.tolerances == {"throughput_tok_s": 0.25, "speedup": 0.25}
    assert s.engine_args["enforce_eager"] is True
    assert s.to_json()["tolerances"] == s.tolerances


# --------------------------------------------------------------------------
# content hash
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_content_hash_is_stable_across_loads(profiles, name):
    again = load_profile(name)
    assert [s.hash for s in again.scenarios] == [s.hash for s in profiles[name].scenarios]
    assert all(re.fullmatch(r"[0-9a-f]{16}", s.hash) for s in again.scenarios)
    assert len({s.hash for s in again.scenarios}) == len(again.scenarios)


def test_cpu_smoke_hashes_match_the_committed_baselines():
    """The speed baselines of the machine that recorded them are of the main job's scenarios as they
    are now (a scenario whose settings changed has none there until that machine records it again;
    every SD scenario's deterministic metrics are judged by baselines/portable/, tests/test_portable.py)."""
    folder = REPO / "baselines" / "cpu-amd-epyc-2c"
    scenarios = {s.id: s for s in load_profile("cpu-smoke").scenarios}
    stored = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")}
    assert set(stored) <= set(scenarios)
    assert len(stored) >= 20
    for scenario_id, baseline in stored.items():
        assert scenarios[scenario_id].hash == baseline["scenario_hash"], scenario_id


def _one(tmp_path, name, text) -> dict:
    folder = tmp_path / name
    folder.mkdir()
    return {s.id: s for s in load_profile(str(write_profile(folder, text))).scenarios}


def test_content_hash_changes_with_what_is_measured(tmp_path):
    base = _one(tmp_path, "base", CELL)["m-ngram-k3-bs4-gsm8k"]
    assert base.hash == _one(tmp_path, "same", CELL)["m-ngram-k3-bs4-gsm8k"].hash

    longer = _one(tmp_path, "output", CELL + "output_len = 64\n")["m-ngram-k3-bs4-gsm8k"]
    assert longer.output_len == 64 and longer.hash != base.hash

    assert _one(tmp_path, "batch", CELL)["m-ngram-k3-bs1-gsm8k"].hash != base.hash

    lookup = _one(tmp_path, "params", CELL.replace("prompt_lookup_max = 7", "prompt_lookup_max = 5"))
    assert lookup["m-ngram-k3-bs4-gsm8k"].method.params["prompt_lookup_max"] == 5
    assert lookup["m-ngram-k3-bs4-gsm8k"].hash != base.hash
    # the no-SD reference does not depend on SD method parameters
    assert lookup["m-nosd-bs4-gsm8k"].hash == _one(tmp_path, "ref", CELL)["m-nosd-bs4-gsm8k"].hash

    k5 = _one(tmp_path, "k", CELL.replace("num_speculative_tokens = 3", "num_speculative_tokens = 5"))
    assert k5["m-ngram-k3-bs4-gsm8k"].hash != base.hash

    engine = _one(tmp_path, "engine", CELL + 'engine_args = { dtype = "float32" }\n')
    assert engine["m-ngram-k3-bs4-gsm8k"].hash != base.hash


def test_content_hash_ignores_rounds_warmup_and_tolerances(tmp_path):
    base = _one(tmp_path, "base", CELL)["m-ngram-k3-bs4-gsm8k"]
    changed = _one(
        tmp_path,
        "changed",
        CELL.replace("rounds = 5", "rounds = 9").replace("warmup = 1", "warmup = 3")
        + "tolerances = { throughput_tok_s = 0.5, per_position_acceptance = 0.1 }\n",
    )
    other = changed["m-ngram-k3-bs4-gsm8k"]
    assert (other.rounds, other.warmup) == (9, 3)
    assert other.tolerances == {"throughput_tok_s": 0.5, "per_position_acceptance": 0.1}
    assert other.hash == base.hash
    assert other.to_json()["hash"] == base.hash


def test_cell_tolerances_override_profile_tolerances(tmp_path):
    text = CELL.replace("[models.m]", "[profile.tolerances]\nthroughput_tok_s = 0.2\nspeedup = 0.3\n\n[models.m]")
    text += "tolerances = { throughput_tok_s = 0.4 }\n"
    s = _one(tmp_path, "tol", text)["m-ngram-k3-bs4-gsm8k"]
    assert s.tolerances == {"throughput_tok_s": 0.4, "speedup": 0.3}


def test_a_cell_sets_its_own_engine_sets_for_a_gate(tmp_path):
    text = CELL.replace("warmup = 1\n", "warmup = 1\ngate_engine_sets = 4\n")
    assert _one(tmp_path, "sets", text)["m-ngram-k3-bs4-gsm8k"].gate_engine_sets == 4
    s = _one(tmp_path, "cell-sets", text + "gate_engine_sets = 2\n")["m-ngram-k3-bs4-gsm8k"]
    assert s.gate_engine_sets == 2


def test_a_profile_says_how_its_gate_runs_in_blocks_without_changing_what_is_measured(tmp_path):
    """gate_blocks spreads a paired run's rounds over engines; no round changes, so neither does the hash."""
    base = _one(tmp_path, "side-by-side", CELL)["m-ngram-k3-bs4-gsm8k"]
    assert base.gate_blocks is None
    text = CELL.replace("warmup = 1\n", "warmup = 1\ngate_blocks = 3\n")
    blocked = _one(tmp_path, "blocks", text)["m-ngram-k3-bs4-gsm8k"]
    assert blocked.gate_blocks == 3 and blocked.hash == base.hash
    assert _one(tmp_path, "cell-blocks", text + "gate_blocks = 1\n")["m-ngram-k3-bs4-gsm8k"].gate_blocks == 1
    with pytest.raises(ProfileError, match=r"profile.gate_blocks: must be a positive integer, got 0"):
        _one(tmp_path, "zero", CELL.replace("warmup = 1\n", "warmup = 1\ngate_blocks = 0\n"))


# --------------------------------------------------------------------------
# per-model methods
# --------------------------------------------------------------------------


def test_per_model_methods_override_shared_ones(tmp_path):
    text = textwrap.dedent("""\
        [profile]
        name = "own"

        [methods.ngram-k3]
        method = "ngram"
        num_speculative_tokens = 3
        prompt_lookup_max = 7

        [models.a]
        path = "org/a"

        [models.a.methods.ngram-k3]
        method = "ngram"
        num_speculative_tokens = 3
        prompt_lookup_max = 5

        [models.a.methods.eagle-k3]
        method = "eagle"
        model = "org/a-eagle"
        num_speculative_tokens = 3

        [models.b]
        path = "org/b"

        [[cells]]
        model = "a"
        methods = ["ngram-k3", "eagle-k3"]
        batch_sizes = [1]
        datasets = ["gsm8k"]

        [[cells]]
        model = "b"
        methods = ["ngram-k3"]
        batch_sizes = [1]
        datasets = ["gsm8k"]
        """)
    by_id = {s.id: s for s in load_profile(str(write_profile(tmp_path, text))).scenarios}
    assert by_id["a-ngram-k3-bs1-gsm8k"].method.params["prompt_lookup_max"] == 5
    assert by_id["b-ngram-k3-bs1-gsm8k"].method.params["prompt_lookup_max"] == 7
    assert by_id["a-eagle-k3-bs1-gsm8k"].method.params["model"] == "org/a-eagle"


def test_per_model_method_is_not_visible_to_other_models(tmp_path):
    text = CELL.replace(
        "[[cells]]",
        '[models.other]\npath = "org/other"\n\n'
        '[models.other.methods.eagle-k3]\nmethod = "eagle"\nnum_speculative_tokens = 3\n\n[[cells]]',
    )
    text = text.replace('methods = ["ngram-k3"]', 'methods = ["ngram-k3", "eagle-k3"]')
    message = profile_error(tmp_path, text)
    assert "cells[0].methods[1]" in message and "eagle-k3" in message


def test_identical_duplicate_scenarios_are_merged(tmp_path):
    text = CELL + "\n" + CELL[CELL.index("[[cells]]") :]
    ids = [s.id for s in load_profile(str(write_profile(tmp_path, text))).scenarios]
    assert len(ids) == len(set(ids)) == 4


# --------------------------------------------------------------------------
# malformed profiles: one line naming the file and the field
# --------------------------------------------------------------------------

CELL = textwrap.dedent("""\
    [profile]
    name = "own"
    rounds = 5
    warmup = 1

    [models.m]
    path = "org/model"

    [methods.ngram-k3]
    method = "ngram"
    num_speculative_tokens = 3
    prompt_lookup_min = 3
    prompt_lookup_max = 7

    [[cells]]
    model = "m"
    methods = ["ngram-k3"]
    batch_sizes = [1, 4]
    datasets = ["gsm8k"]
    """)


def write_profile(folder: Path, text: str, name: str = "own.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def profile_error(tmp_path: Path, text: str) -> str:
    path = write_profile(tmp_path, text, "broken.toml")
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


def test_valid_base_profile_loads(tmp_path):
    assert len(load_profile(str(write_profile(tmp_path, CELL))).scenarios) == 4


@pytest.mark.parametrize(
    "text, field, words",
    [
        (CELL + "\n[extra]\nx = 1\n", "extra", "unknown field (allowed: cells, methods, models, profile)"),
        (CELL.replace('name = "own"', 'name = "own"\nrepeats = 3'), "profile.repeats", "unknown field"),
        (CELL + "batch_size = 4\n", "cells[0].batch_size", "unknown field"),
        (CELL.replace('path = "org/model"', 'path = "org/model"\ngpus = 2'), "models.m.gpus", "unknown field"),
        (CELL.replace('model = "m"', 'model = "nope"'), "cells[0].model", "unknown model 'nope'"),
        (
            CELL.replace('methods = ["ngram-k3"]', 'methods = ["ngram-k3", "eagle9"]'),
            "cells[0].methods[1]",
            "unknown method 'eagle9'",
        ),
        (CELL.replace("[1, 4]", "[1, 0]"), "cells[0].batch_sizes[1]", "positive integer"),
        (CELL.replace("[1, 4]", '[1, "4"]'), "cells[0].batch_sizes[1]", "positive integer"),
        (CELL.replace("[1, 4]", "[true]"), "cells[0].batch_sizes[0]", "positive integer"),
        (CELL.replace("[1, 4]", "[-2]"), "cells[0].batch_sizes[0]", "positive integer"),
        (CELL.replace("batch_sizes = [1, 4]", "batch_sizes = []"), "cells[0].batch_sizes", "non-empty list"),
        (
            CELL.replace('datasets = ["gsm8k"]', 'datasets = ["gsm8k", "mmlu"]'),
            "cells[0].datasets[1]",
            "unknown dataset 'mmlu'",
        ),
        (
            CELL.replace("num_speculative_tokens = 3\n", ""),
            "methods.ngram-k3.num_speculative_tokens",
            "required field is missing",
        ),
        (
            CELL.replace("num_speculative_tokens = 3", "num_speculative_tokens = 0"),
            "methods.ngram-k3.num_speculative_tokens",
            "positive integer, got 0",
        ),
        (CELL.replace('method = "ngram"\n', ""), "methods.ngram-k3.method", "required field is missing"),
        (CELL.replace("[methods.ngram-k3]", "[methods.nosd]"), "methods.nosd", "built-in"),
        (
            CELL.replace("[models.m]", "[models.Big_Model]").replace('model = "m"', 'model = "Big_Model"'),
            "models.Big_Model",
            "lower-case",
        ),
        (
            CELL.replace("[models.m]", "[profile.tolerances]\nlatency = 0.1\n\n[models.m]"),
            "profile.tolerances.latency",
            "unknown metric",
        ),
        (CELL + "tolerances = { acceptance_pos0 = 0.1 }\n", "cells[0].tolerances.acceptance_pos0", "unknown metric"),
        (CELL + "tolerances = { speedup = -0.1 }\n", "cells[0].tolerances.speedup", "relative tolerance"),
        (CELL + 'batching = "shuffle"\n', "cells[0].batching", "replicate"),
        (CELL.replace("rounds = 5", "rounds = 0"), "profile.rounds", "positive integer"),
        (CELL + "rounds = 0\n", "cells[0].rounds", "positive integer"),
        (CELL.replace("warmup = 1", "warmup = -1"), "profile.warmup", "non-negative"),
        (CELL + "output_len = 2.5\n", "cells[0].output_len", "positive integer"),
        (CELL.replace("rounds = 5", 'rounds = 5\nbatching = "x"'), "profile.batching", "replicate"),
        (CELL.replace("rounds = 5", "rounds = 5\nseed = -1"), "profile.seed", "non-negative"),
        (CELL[: CELL.index("[[cells]]")], "cells", "required field is missing"),
        (
            CELL.replace('path = "org/model"', 'path = "org/model"\ntp = true'),
            "models.m.tp",
            "positive integer, got True",
        ),
        (CELL.replace('path = "org/model"', 'path = "org/model"\ntp = 0'), "models.m.tp", "positive integer, got 0"),
        (
            CELL.replace('path = "org/model"', 'path = "org/model"\ntokenizer = "builtin:nope"'),
            "models.m.tokenizer",
            "unknown builtin checkpoint 'builtin:nope'",
        ),
        ("models = 3\n" + CELL.replace('[models.m]\npath = "org/model"\n', ""), "models", "must be a table, got 3"),
        (
            CELL.replace("rounds = 5", 'rounds = 5\ntier = "tpu"'),
            "profile.tier",
            "unknown tier 'tpu' (known: cpu, gpu)",
        ),
        (
            CELL.replace("rounds = 5", 'rounds = 5\nrequires_gpu = "V100"'),
            "profile.requires_gpu",
            "unknown GPU class 'V100' (known: T4, ",
        ),
        (CELL.replace("rounds = 5", "rounds = 5\ndescription = 3"), "profile.description", "must be a string, got 3"),
        (
            CELL.replace("rounds = 5", 'rounds = 5\ninformational = "speedup"'),
            "profile.informational",
            "must be a list",
        ),
        (CELL + "tolerances = { speedup = true }\n", "cells[0].tolerances.speedup", "relative tolerance"),
        (CELL + "tolerances = { speedup = 10 }\n", "cells[0].tolerances.speedup", "relative tolerance"),
        (CELL + "engine_args = 3\n", "cells[0].engine_args", "must be a table, got 3"),
        (CELL.replace("[1, 4]", "4"), "cells[0].batch_sizes", "must be a list, got 4"),
        (CELL.replace('model = "m"', 'model = ""'), "cells[0].model", "non-empty string"),
        (CELL.replace('method = "ngram"', 'method = "none"'), "methods.ngram-k3.method", "built-in reference"),
        (
            CELL.replace('path = "org/model"', 'path = "builtin:no-such"'),
            "models.m.path",
            "unknown builtin checkpoint 'builtin:no-such'",
        ),
        (
            CELL.replace('path = "org/model"', 'path = "/no/such/checkpoint"'),
            "models.m.path",
            "no such local checkpoint '/no/such/checkpoint'",
        ),
        (
            CELL.replace('method = "ngram"', 'method = "ngram"\nmodel = "./no-such-head"'),
            "methods.ngram-k3.model",
            "no such local checkpoint './no-such-head'",
        ),
        (
            CELL.replace('path = "org/model"', 'path = "/etc"'),
            "models.m.path",
            "'/etc' is not a checkpoint (a folder with config.json, or a .gguf file)",
        ),
        (CELL.replace("[1, 4]", "[1, 1000000000000]"), "cells[0].batch_sizes[1]", "must be at most 8192"),
        (CELL + "output_len = 100000000000\n", "cells[0].output_len", "must be at most 131072"),
        (CELL.replace("rounds = 5", "rounds = 100000"), "profile.rounds", "must be at most 1000"),
        (
            CELL.replace("num_speculative_tokens = 3", "num_speculative_tokens = 1000000"),
            "methods.ngram-k3.num_speculative_tokens",
            "must be at most 64",
        ),
        (
            CELL.replace('method = "ngram"', 'method = "eagel"'),
            "methods.ngram-k3.method",
            "unknown method 'eagel' (known: ngram, eagle, eagle3, eagle_tree, eagle3_tree, draft_model, mtp, suffix, "
            "adaptive)",
        ),
    ],
)
def test_malformed_profile(tmp_path, text, field, words):
    message = profile_error(tmp_path, text)
    assert f": {field}: " in message
    assert words in message


def test_profile_name_defaults_to_the_file_name(tmp_path):
    text = CELL.replace('name = "own"\n', "")
    assert load_profile(str(write_profile(tmp_path, text, "my-own.toml"))).name == "my-own"
    path = write_profile(tmp_path, text, "My_Own.toml")
    with pytest.raises(ProfileError, match=r"My_Own\.toml: profile\.name: 'My_Own' must be lower-case"):
        load_profile(str(path))


def test_existing_local_checkpoint_is_accepted(tmp_path):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "config.json").write_text("{}")
    text = CELL.replace('path = "org/model"', f'path = "{tmp_path / "weights"}"')
    assert load_profile(str(write_profile(tmp_path, text))).scenarios[0].model.path == str(tmp_path / "weights")


def test_bad_toml_syntax(tmp_path):
    message = profile_error(tmp_path, CELL.replace("[profile]", "[profile"))
    assert "not valid TOML" in message and "line 1" in message


def test_missing_profile_names_the_available_ones():
    with pytest.raises(ProfileError) as info:
        load_profile("no-such-profile")
    assert "no-such-profile.toml" in str(info.value) and "cpu-smoke" in str(info.value)


def test_duplicate_scenario_with_different_settings(tmp_path):
    second = CELL[CELL.index("[[cells]]") :].replace("[1, 4]", "[4]") + "output_len = 64\n"
    message = profile_error(tmp_path, CELL + "\n" + second)
    assert ": cells[1]: " in message
    assert "m-nosd-bs4-gsm8k" in message and "declared twice" in message


def test_scenarios_are_frozen(profiles):
    s = profiles["cpu-smoke"].scenarios[0]
    with pytest.raises(ValidationError, match="frozen"):
        s.batch_size = 2


def test_distinct_prompt_batches_are_named_in_the_id(tmp_path):
    text = CELL + 'batching = "distinct"\n'
    profile = load_profile(str(write_profile(tmp_path, text)))
    ids = {s.id for s in profile.scenarios}
    assert all(i.endswith("-distinct") for i in ids)
    assert all(s.reference_id in ids for s in profile.scenarios)


def test_informational_metrics_are_validated_and_carried(tmp_path):
    text = CELL.replace("rounds = 5", 'rounds = 5\ninformational = ["throughput_tok_s"]')
    scenario = load_profile(str(write_profile(tmp_path, text))).scenarios[0]
    assert scenario.informational == ["throughput_tok_s"]
    assert scenario.to_json()["informational"] == ["throughput_tok_s"]
    message = profile_error(tmp_path, CELL.replace("rounds = 5", 'rounds = 5\ninformational = ["latency"]'))
    assert ": profile.informational[0]: " in message and "unknown metric" in message


def test_cpu_smoke_gates_on_deterministic_metrics_only():
    """Speed is shown, and so is its hand-written dynamic schedule against the fixed k."""
    speed = speed_metrics() | {"dynamic_vs_best_k"}
    assert all(set(s.informational) == speed for s in load_profile("cpu-smoke").scenarios)


# --------------------------------------------------------------------------
# the format's JSON Schema and its documentation
# --------------------------------------------------------------------------


def test_schema_command_prints_the_json_schema():
    out = subprocess.run(
        [sys.executable, "-m", "specperf.profiles.schema"], capture_output=True, text=True, check=True, cwd=REPO
    )
    schema = json.loads(out.stdout)
    assert list(schema["properties"]) == ["profile", "models", "methods", "cells"]
    assert schema["required"] == ["models", "cells"] and schema["additionalProperties"] is False
    cell = schema["$defs"]["CellTable"]["properties"]
    assert cell["datasets"]["items"]["enum"] == list(workload_names())
    assert cell["batch_sizes"] == {
        "description": "offline cells: batch sizes",
        "items": {"maximum": 8192, "minimum": 1, "type": "integer"},
        "minItems": 1,
        "title": "Batch Sizes",
        "type": "array",
    }
    assert schema["required"] == ["models", "cells"] and "batch_sizes" not in schema["$defs"]["CellTable"]["required"]


def test_profile_format_doc_names_every_field():
    doc = (REPO / "docs" / "profile-format.md").read_text(encoding="utf-8")
    for table in (ProfileTable, ModelTable, MethodTable, CellTable):
        for name in table.model_fields:
            assert f"| `{name}` |" in doc, (table.__name__, name)
    assert "python -m specperf.profiles.schema" in doc


def test_profile_format_doc_example_loads(tmp_path):
    doc = (REPO / "docs" / "profile-format.md").read_text(encoding="utf-8")
    example = re.search(r"```toml\n(.*?)```", doc, re.S).group(1)
    ids = [s.id for s in load_profile(str(write_profile(tmp_path, example))).scenarios]
    assert len(ids) == 12
    assert {"llama3.1-8b-eagle3-k3-bs16-gsm8k", "llama3.1-8b-nosd-bs16-gsm8k"} <= set(ids)


@pytest.mark.parametrize("dataset", workload_names())
def test_every_registered_workload_is_a_valid_dataset(tmp_path, dataset):
    text = CELL.replace('datasets = ["gsm8k"]', f'datasets = ["{dataset}"]')
    assert {s.dataset for s in load_profile(str(write_profile(tmp_path, text))).scenarios} == {dataset}


# --------------------------------------------------------------------------
# prompt and engine settings: selection, chat, thinking, env, vllm
# --------------------------------------------------------------------------


def with_settings(tmp_path: Path, profile: str = "", model: str = "", cell: str = "", name: str = "own.toml"):
    text = CELL.replace("rounds = 5\n", f"rounds = 5\n{profile}\n").replace(
        'path = "org/model"\n', f'path = "org/model"\n{model}\n'
    )
    return load_profile(str(write_profile(tmp_path, text + cell, name))).scenarios


def test_prompt_settings_at_their_defaults_keep_the_hash(tmp_path):
    plain = with_settings(tmp_path)
    explicit = with_settings(tmp_path, profile='selection = "hash"\nvllm = "0.10.1.1"', name="b.toml")
    assert [s.hash for s in plain] == [s.hash for s in explicit]
    assert [s.selection for s in plain] == ["hash"] * 4 and plain[0].chat is None and plain[0].model.thinking is None


@pytest.mark.parametrize(
    "profile, model, cell",
    [
        ('selection = "study"', "", ""),
        ("", "thinking = false", ""),
        ("", "", "chat = false\n"),
        ('[profile.env]\nVLLM_DISABLE_COMPILE_CACHE = "1"', "", ""),
    ],
)
def test_prompt_and_engine_settings_change_the_hash(tmp_path, profile, model, cell):
    plain = with_settings(tmp_path)
    if profile.startswith("[profile.env]"):  # a table goes after the [profile] keys
        text = CELL.replace("[models.m]", f"{profile}\n\n[models.m]")
        changed = load_profile(str(write_profile(tmp_path, text, "c.toml"))).scenarios
    else:
        changed = with_settings(tmp_path, profile, model, cell, name="c.toml")
    assert [s.id for s in changed] == [s.id for s in plain]
    assert not {s.hash for s in changed} & {s.hash for s in plain}


def test_env_goes_to_the_engine_and_into_its_key(tmp_path):
    from specperf.run.pool import engine_config

    text = CELL.replace("[models.m]", '[profile.env]\nVLLM_DISABLE_COMPILE_CACHE = "1"\n\n[models.m]')
    scenario = load_profile(str(write_profile(tmp_path, text))).scenarios[0]
    assert scenario.env == {"VLLM_DISABLE_COMPILE_CACHE": "1"}
    assert '"env":{"VLLM_DISABLE_COMPILE_CACHE":"1"}' in scenario.engine_key
    config = engine_config(scenario)
    assert config.env["VLLM_DISABLE_COMPILE_CACHE"] == "1"
    assert config.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # the suite's own stay
    assert scenario.to_json()["env"] == {"VLLM_DISABLE_COMPILE_CACHE": "1"}


def test_a_reference_keeps_the_vllm_of_the_first_cell_that_declares_it(tmp_path):
    cell = '\n[[cells]]\nmodel = "m"\nmethods = ["ngram-k3"]\nbatch_sizes = [1]\ndatasets = ["gsm8k"]\nvllm = "fork"\n'
    by_id = {s.id: s for s in with_settings(tmp_path, profile='vllm = "0.10.1.1"', cell=cell)}
    assert by_id["m-nosd-bs1-gsm8k"].vllm == "0.10.1.1"


@pytest.mark.parametrize(
    "text, message",
    [
        ('selection = "random"', "profile.selection: unknown selection mode 'random' (known: hash, study)"),
        ("vllm = 10", "profile.vllm: must be a non-empty string, got 10"),
    ],
)
def test_bad_prompt_settings_are_one_line(tmp_path, text, message):
    assert profile_error(tmp_path, CELL.replace("rounds = 5\n", f"rounds = 5\n{text}\n")).endswith(message)


def test_every_scenario_shares_its_xdist_worker_with_its_reference_and_serving_has_workers_of_its_own():
    """A paired SD scenario starts its no-SD engine beside its own and needs no reference result:
    each paired SD engine's scenarios are a group of their own."""
    from specperf.suite.selection import worker_group

    profile = load_profile("cpu-full")
    by_id = {s.id: s for s in profile.scenarios}
    for s in profile.scenarios:
        if not s.paired_reference:
            assert worker_group(by_id[s.reference_id]) == worker_group(s), s.id
    groups = {worker_group(s) for s in profile.scenarios}
    paired = {"smollm2-135m-ngram-k1", "smollm2-135m-ngram-k3", "smollm2-135m-ngram-k5", "smollm2-135m-ngram-dynamic"}
    assert groups == {"smollm2-135m", "smollm2-135m-serve", "tiny-llama", "tiny-mimo"} | paired


TREE_PROFILE = """
[models.m]
path = "org/model"

[methods.tree]
method = "{method}"
model = "org/head"
num_speculative_tokens = {k}
speculative_token_tree = "[(0,), (1,), (0, 0)]"

[[cells]]
model = "m"
methods = ["tree"]
batch_sizes = [1]
datasets = ["sharegpt"]
"""


def test_a_token_tree_is_checked_where_the_profile_gives_it(tmp_path):
    loaded = load_profile(str(write_profile(tmp_path, TREE_PROFILE.format(method="eagle3_tree", k=3), "tree.toml")))
    tree = next(s for s in loaded.scenarios if s.method.label == "tree")
    assert tree.method.params["speculative_token_tree"] == "[(0,), (1,), (0, 0)]"
    message = profile_error(tmp_path, TREE_PROFILE.format(method="eagle3_tree", k=4))
    assert message.endswith(
        "methods.tree.speculative_token_tree: the tree has 3 nodes, num_speculative_tokens is 4: "
        "one draft token per node"
    )
    message = profile_error(tmp_path, TREE_PROFILE.format(method="eagle3", k=3))
    assert message.endswith(
        "methods.tree.speculative_token_tree: a token tree is verified by method eagle_tree or eagle3_tree"
    )
    missing = TREE_PROFILE.format(method="eagle3_tree", k=3).replace(
        'speculative_token_tree = "[(0,), (1,), (0, 0)]"\n', ""
    )
    assert "methods.tree.speculative_token_tree: required for method 'eagle3_tree'" in profile_error(tmp_path, missing)


@pytest.mark.parametrize(
    "table, line",
    [
        ("[profile.engine_args]\ntrust_remote_code = true", "profile.engine_args.trust_remote_code: loads code"),
        ('[profile.engine_args]\nworker_cls = "evil.Worker"', "profile.engine_args.worker_cls: loads code"),
        ('[profile.env]\nLD_PRELOAD = "/tmp/x.so"', "profile.env.LD_PRELOAD: loads code"),
        ('[profile.env]\nPYTHONPATH = "/tmp"', "profile.env.PYTHONPATH: loads code"),
    ],
)
def test_what_loads_code_into_the_engines_needs_allow_code(tmp_path, table, line):
    """These were once accepted without a word; allowed, they load, and the terminal and report say so."""
    path = tmp_path / "code.toml"
    cells = '[models.m]\npath = "builtin:tiny-llama"\n[[cells]]\nmodel = "m"\nmethods = ["nosd"]\n'
    cells += 'batch_sizes = [1]\ndatasets = ["gsm8k"]\n'
    path.write_text(f'[profile]\ntier = "cpu"\n{table}\n{cells}')
    with pytest.raises(ProfileError, match=rf"^{path}: {line} into the engines: allow it with allow_code = true"):
        load_profile(path)
    path.write_text(f'[profile]\ntier = "cpu"\nallow_code = true\n{table}\n{cells}')
    (scenario,) = load_profile(path).scenarios
    assert code_loading(scenario.engine_args, scenario.env) == [line.split(":")[0].split(".")[-1]]


def test_a_false_trust_remote_code_loads_nothing():
    assert code_loading({"trust_remote_code": False}, {}) == []


@pytest.mark.parametrize("ref", ["https://evil.example/m", "file:///etc/passwd", "org/name/extra", "justaname"])
def test_a_model_path_is_a_hub_id_a_local_path_or_a_builtin(tmp_path, ref):
    """A URL was once taken as a hub id."""
    path = tmp_path / "paths.toml"
    path.write_text(
        f'[profile]\ntier = "cpu"\n[models.m]\npath = "{ref}"\n[[cells]]\nmodel = "m"\nmethods = ["nosd"]\n'
        'batch_sizes = [1]\ndatasets = ["gsm8k"]\n'
    )
    with pytest.raises(ProfileError, match=r"models\.m\.path: .* is not a checkpoint: a hub id \(org/name\)"):
        load_profile(path)
