"""Memory from the checkpoints' configs (profiles.model_memory): tiny checkpoints written here, their
bytes checked against sums worked out by hand; where the result records them, and how the report shows them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from records import make_scenario, reference_scenario
from safetensors.numpy import save_file
from test_report import make_record, make_run, section, view_of
from test_session import session

from specperf import report
from specperf.profiles import model_memory
from specperf.profiles.scenarios import REFERENCE_METHOD, Method, Model
from specperf.records import Memory, ScenarioResult
from specperf.storage import read_record, result_path

# A GQA target: 3 layers, 4 query heads, 2 KV heads, hidden 32 -> head_dim 8.
GQA = {
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 32,
    "torch_dtype": "float32",
}
GQA_ELEMENTS = 100 * 32 + 3 * 4 * 32 * 32 + 32  # embeddings, 3 x 4 projections, a norm
GQA_KV_FP32 = 2 * 3 * 2 * 8 * 4  # K and V x layers x KV heads x head_dim x bytes = 384


def gqa_tensors(layers: int = 3, dtype=np.float32) -> dict[str, np.ndarray]:
    tensors = {"model.embed_tokens.weight": np.zeros((100, 32), dtype), "model.norm.weight": np.zeros(32, dtype)}
    for i in range(layers):
        for proj in "qkvo":
            tensors[f"model.layers.{i}.self_attn.{proj}_proj.weight"] = np.zeros((32, 32), dtype)
    return tensors


def checkpoint(folder, config: dict, tensors: dict[str, np.ndarray] | None = None, shards: int = 1) -> str:
    """A checkpoint folder: config.json and the tensors in one file or `shards` files with an index."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    tensors = gqa_tensors() if tensors is None else tensors
    if shards == 1:
        save_file(tensors, folder / "model.safetensors")
        return str(folder)
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        part = {n: tensors[n] for n in names[s::shards]}
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, folder / file)
        weight_map |= {n: file for n in part}
    total = sum(t.nbytes for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    return str(folder)


def scenario(target: str, method: Method = REFERENCE_METHOD, **engine_args):
    return make_scenario(method).replace(model=Model(name="m", path=target), engine_args=engine_args)


def draft_method(name: str, path: str) -> Method:
    return Method(label=f"{name}-k3", name=name, params={"model": path, "num_speculative_tokens": 3})


# --------------------------------------------------------------------------- the target


def test_gqa_target_in_float32(tmp_path):
    estimate = model_memory.estimate(scenario(checkpoint(tmp_path / "t", GQA), dtype="float32"))
    assert estimate.weights_bytes == GQA_ELEMENTS * 4
    assert estimate.kv_bytes_per_token == GQA_KV_FP32 == 384
    assert estimate.draft_weights_bytes == estimate.draft_kv_bytes_per_token == 0  # no SD: nothing drafts
    assert (estimate.weights_dtype, estimate.kv_dtype, estimate.note) == ("float32", "float32", None)


def test_bfloat16_engine_halves_float_weights_and_keeps_quantised_ones(tmp_path):
    tensors = gqa_tensors() | {"model.layers.0.mlp.qweight": np.zeros((64, 16), np.int8)}
    estimate = model_memory.estimate(scenario(checkpoint(tmp_path / "t", GQA, tensors), dtype="bfloat16"))
    assert estimate.weights_bytes == GQA_ELEMENTS * 2 + 64 * 16
    assert estimate.kv_bytes_per_token == GQA_KV_FP32 // 2 and estimate.kv_dtype == "bfloat16"


def test_fp8_kv_cache_and_the_live_engines_dtype(tmp_path):
    target = checkpoint(tmp_path / "t", GQA)
    estimate = model_memory.estimate(scenario(target, dtype="auto", kv_cache_dtype="fp8"), "torch.float16")
    assert estimate.weights_dtype == "float16" and estimate.weights_bytes == GQA_ELEMENTS * 2
    assert estimate.kv_dtype == "fp8" and estimate.kv_bytes_per_token == 2 * 3 * 2 * 8 * 1


def test_auto_runs_a_float32_config_in_16_bits_and_a_float16_one_as_it_is(tmp_path):
    fp32 = model_memory.estimate(scenario(checkpoint(tmp_path / "a", GQA)))
    assert fp32.weights_dtype == "bfloat16" and fp32.weights_bytes == GQA_ELEMENTS * 2
    fp16 = checkpoint(tmp_path / "b", GQA | {"torch_dtype": "float16"}, gqa_tensors(dtype=np.float16))
    assert model_memory.estimate(scenario(fp16)).weights_bytes == GQA_ELEMENTS * 2
    assert model_memory.estimate(scenario(fp16, dtype="float32")).weights_bytes == GQA_ELEMENTS * 4


def test_head_dim_from_the_config_wins_over_hidden_size(tmp_path):
    config = GQA | {"head_dim": 16}  # e.g. Qwen3, Gemma: head_dim x heads != hidden_size
    estimate = model_memory.estimate(scenario(checkpoint(tmp_path / "t", config), dtype="float32"))
    assert estimate.kv_bytes_per_token == 2 * 3 * 2 * 16 * 4


def test_mla_keeps_the_latent_and_the_rope_key_per_layer(tmp_path):
    config = {
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "hidden_size": 32,
        "kv_lora_rank": 16,
        "qk_rope_head_dim": 8,
        "torch_dtype": "bfloat16",
    }
    estimate = model_memory.estimate(scenario(checkpoint(tmp_path / "t", config, gqa_tensors(2))))
    assert estimate.kv_bytes_per_token == (16 + 8) * 2 * 2


def test_sharded_weights_are_summed_over_their_headers(tmp_path):
    target = checkpoint(tmp_path / "t", GQA, shards=3)
    estimate = model_memory.estimate(scenario(target, dtype="bfloat16"))
    assert estimate.weights_bytes == GQA_ELEMENTS * 2 and estimate.note is None


def test_missing_shards_fall_back_to_the_index_total_as_stored(tmp_path):
    target = checkpoint(tmp_path / "t", GQA, shards=3)
    (tmp_path / "t" / "model-00002-of-00003.safetensors").unlink()
    estimate = model_memory.estimate(scenario(target, dtype="bfloat16"))
    assert estimate.weights_bytes == GQA_ELEMENTS * 4  # the index's total_size, float32 as stored
    assert "weights as stored" in estimate.note and estimate.kv_bytes_per_token == GQA_KV_FP32 // 2


# --------------------------------------------------------------------------- drafts and heads


def test_draft_model_has_weights_and_a_kv_cache_of_its_own(tmp_path):
    target = checkpoint(tmp_path / "t", GQA)
    draft = checkpoint(tmp_path / "d", GQA | {"num_hidden_layers": 1}, gqa_tensors(1))
    estimate = model_memory.estimate(scenario(target, draft_method("draft_model", draft), dtype="float32"))
    assert estimate.draft_weights_bytes == (100 * 32 + 4 * 32 * 32 + 32) * 4
    assert estimate.draft_kv_bytes_per_token == 2 * 1 * 2 * 8 * 4
    assert Memory(**estimate.fields()).draft_kv_bytes_per_token == 128


def test_eagle3_head_counts_only_its_own_tensors(tmp_path):
    target = checkpoint(tmp_path / "t", GQA)
    head = {
        "fc.weight": np.zeros((32, 96), np.float32),
        "midlayer.self_attn.k_proj.weight": np.zeros((16, 64)),
        "d2t": np.zeros(50, np.int64),
    }
    config = {
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 32,
        "head_dim": 8,
        "torch_dtype": "float32",
    }
    path = checkpoint(tmp_path / "h", config, head)
    estimate = model_memory.estimate(scenario(target, draft_method("eagle3", path), dtype="bfloat16"))
    assert estimate.draft_weights_bytes == 32 * 96 * 2 + 16 * 64 * 2 + 50 * 8  # the int64 map as stored
    assert estimate.draft_kv_bytes_per_token == 2 * 1 * 2 * 8 * 2


def test_adaptive_drafts_keep_their_cache_in_the_models_dtype(tmp_path):
    target = checkpoint(tmp_path / "t", GQA)
    draft = checkpoint(tmp_path / "d", GQA | {"num_hidden_layers": 1}, gqa_tensors(1))
    estimate = model_memory.estimate(
        scenario(target, draft_method("adaptive", draft), dtype="bfloat16", kv_cache_dtype="fp8")
    )
    assert estimate.kv_bytes_per_token == 2 * 3 * 2 * 8 * 1
    assert estimate.draft_kv_bytes_per_token == 2 * 1 * 2 * 8 * 2


@pytest.mark.parametrize("method", ["ngram", "suffix"])
def test_ngram_and_suffix_have_no_weights_and_no_cache(tmp_path, method):
    target = checkpoint(tmp_path / "t", GQA)
    estimate = model_memory.estimate(scenario(target, Method(label=method, name=method, params={})))
    assert estimate.draft_weights_bytes == estimate.draft_kv_bytes_per_token == 0 and estimate.note is None


MTP = Method(label="mtp-k1", name="mtp", params={"num_speculative_tokens": 1})


@pytest.mark.parametrize("prefix", ["model.mtp_layers.0.", "model.layers.3.", "mtp.layers.0."])
def test_mtp_layers_are_told_apart_from_the_target_by_name(tmp_path, prefix):
    tensors = gqa_tensors() | {f"{prefix}{name}": np.zeros((32, 64), np.float32) for name in ("proj", "fc")}
    target = checkpoint(tmp_path / "t", GQA | {"num_nextn_predict_layers": 1}, tensors)
    estimate = model_memory.estimate(scenario(target, MTP, dtype="float32"))
    assert estimate.weights_bytes == GQA_ELEMENTS * 4
    assert estimate.draft_weights_bytes == 2 * 32 * 64 * 4
    assert estimate.draft_kv_bytes_per_token == 2 * 1 * 2 * 8 * 4 and estimate.note is None
    assert model_memory.estimate(scenario(target, dtype="float32")).weights_bytes == GQA_ELEMENTS * 4  # no-SD skips it


def test_mtp_layers_without_telling_names_stay_in_the_targets_weights(tmp_path):
    target = checkpoint(tmp_path / "t", GQA | {"num_nextn_predict_layers": 2})
    estimate = model_memory.estimate(scenario(target, MTP, dtype="float32"))
    assert estimate.weights_bytes == GQA_ELEMENTS * 4 and estimate.draft_weights_bytes is None
    assert estimate.note == "MTP head: in the target's weights"
    assert estimate.draft_kv_bytes_per_token == 2 * 2 * 2 * 8 * 4


# --------------------------------------------------------------------------- what is not here


def test_a_hub_id_outside_the_local_cache_is_not_fetched(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    estimate = model_memory.estimate(scenario("nobody/no-such-model", draft_method("eagle", "nobody/head")))
    assert estimate == model_memory.MemoryEstimate(note="nobody/no-such-model: config not available offline")


def test_a_hub_id_in_the_local_cache_is_read_from_its_snapshot(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub))
    commit = "0123456789abcdef0123456789abcdef01234567"
    checkpoint(hub / "models--org--tiny" / "snapshots" / commit, GQA)
    (hub / "models--org--tiny" / "refs").mkdir()
    (hub / "models--org--tiny" / "refs" / "main").write_text(commit)
    estimate = model_memory.estimate(scenario("org/tiny", draft_method("draft_model", "org/absent"), dtype="float32"))
    assert estimate.weights_bytes == GQA_ELEMENTS * 4 and estimate.kv_bytes_per_token == GQA_KV_FP32
    assert estimate.draft_weights_bytes is None and estimate.note == "org/absent: config not available offline"


def test_a_builtin_not_built_yet_is_not_built_for_an_estimate(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPERF_CACHE", str(tmp_path))
    estimate = model_memory.estimate(scenario("builtin:tiny-llama"))
    assert estimate.weights_bytes is None and estimate.note == "builtin:tiny-llama: config not available offline"
    assert not any(tmp_path.iterdir())
    assert model_memory.estimate(scenario("builtin:no-such")).note == "builtin:no-such: config not available offline"


def test_a_broken_config_is_named_in_the_note(tmp_path):
    target = checkpoint(tmp_path / "t", GQA)
    (tmp_path / "t" / "config.json").write_text("{not json")
    note = model_memory.estimate(scenario(target)).note
    assert note.startswith(f"{tmp_path / 't' / 'config.json'}: not readable JSON") and "\n" not in note
    (tmp_path / "t" / "config.json").write_text(json.dumps({"num_hidden_layers": 3, "torch_dtype": "float32"}))
    estimate = model_memory.estimate(scenario(target, dtype="float32"))
    assert estimate.weights_bytes == GQA_ELEMENTS * 4 and estimate.kv_bytes_per_token is None
    assert "KV bytes per token not known: config has no usable num_attention_heads" in estimate.note


# --------------------------------------------------------------------------- the result and the report


def test_the_session_records_the_estimate_beside_the_measured_peak(tmp_path):
    target = checkpoint(tmp_path / "t", GQA)
    draft = checkpoint(tmp_path / "d", GQA | {"num_hidden_layers": 1}, gqa_tensors(1))
    run = session(tmp_path)
    ref = reference_scenario().replace(model=Model(name="tiny-llama", path=target), engine_args={"dtype": "float32"})
    sd = ref.replace(method=draft_method("draft_model", draft))
    run.run(ref)
    result = run.run(sd)
    stored = read_record(result_path(run.run_dir, sd.id), ScenarioResult, "result").memory
    assert stored == result.memory and stored.peak_mib == 100.0 and stored.source == "fake"
    assert (stored.weights_bytes, stored.kv_bytes_per_token) == (GQA_ELEMENTS * 4, GQA_KV_FP32)
    assert stored.draft_weights_bytes == (100 * 32 + 4 * 32 * 32 + 32) * 4 and stored.draft_kv_bytes_per_token == 128


def test_results_written_before_the_estimate_still_load():
    memory = Memory.model_validate({"peak_mib": 1000.0, "source": "rss"})
    assert memory.weights_bytes is None and memory.estimate_note is None


def estimated(method: str, peak: float, memory: dict) -> ScenarioResult:
    record = make_record(method=method, speedup=None if method == "nosd" else 1.3)
    record.memory = Memory(peak_mib=peak, source="rss", **memory)
    return record


def test_the_report_shows_weights_and_kv_per_token_beside_the_peak(tmp_path):
    target = {"weights_bytes": 513 * 2**20, "kv_bytes_per_token": 45 * 2**10}
    run = make_run(
        tmp_path / "run",
        [
            estimated("nosd", 1000.0, target | {"draft_weights_bytes": 0, "draft_kv_bytes_per_token": 0}),
            estimated(
                "draft_model",
                1300.0,
                target | {"draft_weights_bytes": 270 * 2**20, "draft_kv_bytes_per_token": 6 * 2**10},
            ),
            estimated(
                "mtp",
                1010.0,
                target
                | {"draft_kv_bytes_per_token": 1536, "estimate_note": "MTP head: in the target's <b>weights</b>"},
            ),
            estimated("eagle", 1020.0, {"estimate_note": "org/<i>head</i>: config not available offline"}),
        ],
    )
    view = view_of(run)
    html = section(report.render_html(view), "memory")
    assert "weights 513 MiB, KV 45 KiB/token" in html
    assert "draft 270 MiB, KV +6 KiB/token x1.13" in html  # (45 + 6) / 45
    assert "draft —, KV +1.5 KiB/token x1.03 (MTP head: in the target&#39;s &lt;b&gt;weights&lt;/b&gt;)" in html
    assert "org/&lt;i&gt;head&lt;/i&gt;: config not available offline" in html and "<i>" not in html
    md = report.render_markdown(view)
    assert (
        "| 1000 MiB; weights 513 MiB, KV 45 KiB/token | 1300 MiB x1.30; draft 270 MiB, KV +6 KiB/token x1.13 "
        "| 1020 MiB x1.02; org/&lt;i&gt;head&lt;/i&gt;: config not available offline |"
    ) in md
    assert "<b>" not in md
    cells = report.summary_json(view)["memory"][0]
    assert cells["reference"]["weights_mib"] == 513 and cells["methods"][0]["kv_ratio"] == pytest.approx(51 / 45)
