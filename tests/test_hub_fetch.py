"""Hub checkpoints fetched into the cache before their engine starts (run/engines/hub_fetch.py, run/pool.py):
which refs are hub ids, which files vLLM loads, and a download that is no part of the start."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from records import make_scenario
from test_session import Starter

import specperf.run.pool as pool_module
from specperf.run.engines.engine import EngineConfig
from specperf.run.engines.hub_fetch import HubCheckpoint, fetch_checkpoint, hub_checkpoints, small_files, weight_files
from specperf.run.pool import EngineKeyFailed, EnginePool
from specperf.status import ERROR_ENGINE

TARGET, HEAD = "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


def config(model=TARGET, draft=HEAD, tokenizer=None, engine_args=None, env=None) -> EngineConfig:
    return EngineConfig(
        model=model,
        tokenizer=tokenizer,
        tensor_parallel_size=1,
        seed=42,
        speculative_config={"method": "eagle3", "model": draft, "num_speculative_tokens": 3} if draft else None,
        engine_args=engine_args or {},
        env=env or {},
    )


def test_hub_ids_are_fetched_once_each_with_their_revisions(tmp_path):
    pinned = config(engine_args={"revision": "abc123", "download_dir": "/models"}, tokenizer="Org/tok")
    assert hub_checkpoints(pinned, environ={}) == [
        HubCheckpoint(TARGET, "abc123", "/models"),
        HubCheckpoint("Org/tok", None, "/models"),
        HubCheckpoint(HEAD, None, "/models"),
    ]
    mtp = config(model="zai-org/GLM-4.5-Air", draft="zai-org/GLM-4.5-Air")  # MTP: the target is the draft
    assert hub_checkpoints(mtp, environ={}) == [HubCheckpoint("zai-org/GLM-4.5-Air")]
    folder = tmp_path / "tiny-llama"  # a builtin, resolved to its folder, or any local checkpoint
    folder.mkdir()
    local = config(model=str(folder), draft="./heads/eagle3", tokenizer="~/tok")
    assert hub_checkpoints(local, environ={}) == []
    assert hub_checkpoints(config(draft="builtin:tiny-llama-eagle3"), environ={}) == [HubCheckpoint(TARGET)]


@pytest.mark.parametrize(
    "environ, env",
    [
        ({"HF_HUB_OFFLINE": "1"}, {}),
        ({}, {"HF_HUB_OFFLINE": "true"}),  # the engine's own environment
        ({"TRANSFORMERS_OFFLINE": "YES"}, {}),
        ({}, {"VLLM_USE_MODELSCOPE": "True"}),  # vLLM downloads from ModelScope instead
    ],
)
def test_nothing_is_fetched_offline_or_from_modelscope(environ, env):
    assert hub_checkpoints(config(env=env), environ=environ) == []
    assert hub_checkpoints(config(env={"HF_HUB_OFFLINE": "0"}), environ={}) != []


LLAMA_FILES = [
    ".gitattributes",
    "LICENSE",
    "README.md",
    "config.json",
    "generation_config.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "model.safetensors.index.json",
    "original/consolidated.00.pth",
    "original/params.json",
    "original/tokenizer.model",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
]
INDEX = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}


def test_only_what_vllm_loads_is_chosen():
    assert small_files(LLAMA_FILES) == [
        "config.json",
        "generation_config.json",
        "model.safetensors.index.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert weight_files(LLAMA_FILES, INDEX) == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    mistral = ["consolidated.safetensors", "model-00001-of-00001.safetensors", "params.json"]
    assert weight_files(mistral, {"weight_map": {"x": "model-00001-of-00001.safetensors"}}) == [
        "model-00001-of-00001.safetensors"
    ]
    assert weight_files(["config.json", "pytorch_model.bin", "sub/model.safetensors"], None) == ["pytorch_model.bin"]
    assert weight_files(["model.safetensors", "pytorch_model.bin"], None) == ["model.safetensors"]
    assert small_files(["tokenizer.model", "merges.txt", "vocab.txt", "modeling_glm.py", "chat_template.jinja"]) == [
        "tokenizer.model",
        "merges.txt",
        "vocab.txt",
        "modeling_glm.py",
        "chat_template.jinja",
    ]


def test_fetch_takes_small_files_then_the_shards_the_index_names(tmp_path, monkeypatch):
    import huggingface_hub

    downloads = []
    snapshot = tmp_path / "snapshots" / "sha1"

    def snapshot_download(repo_id, revision, cache_dir, allow_patterns):
        downloads.append((repo_id, revision, cache_dir, allow_patterns))
        snapshot.mkdir(parents=True, exist_ok=True)
        (snapshot / "model.safetensors.index.json").write_text(json.dumps(INDEX))
        return str(snapshot)

    class Api:
        def model_info(self, repo_id, revision):
            assert (repo_id, revision) == (TARGET, "main")
            return SimpleNamespace(siblings=[SimpleNamespace(rfilename=f) for f in LLAMA_FILES])

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    fetch_checkpoint(HubCheckpoint(TARGET, "main", "/models"))
    assert downloads == [
        (TARGET, "main", "/models", small_files(LLAMA_FILES)),
        (TARGET, "main", "/models", ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]),
    ]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_pool_fetches_before_the_start_and_outside_its_limit(monkeypatch):
    """A stand-in fetch that takes an hour: the start still gets its whole limit, and the pool counts
    the hour as fetching, not as starting."""
    clock, events, lines = Clock(), [], []
    monkeypatch.setattr(pool_module, "time", SimpleNamespace(monotonic=clock))  # the pool's clock only

    def fetch(checkpoint):
        events.append(("fetch", checkpoint.repo_id))
        clock.now += 3600.0

    class TimedStarter(Starter):
        def __call__(self, config, start_timeout_s, python=None):
            events.append(("start", start_timeout_s))
            clock.now += 60.0
            return super().__call__(config, start_timeout_s, python)

    pool = EnginePool(
        start=TimedStarter(), configure=lambda s: config(), fetch=fetch, log=lines.append, start_timeout_s=1800
    )
    scenario = make_scenario()
    _, start_s = pool.engines_for({"current": (scenario, None)})
    assert events == [("fetch", TARGET), ("fetch", HEAD), ("start", 1800)]
    assert start_s == 60.0 and pool.stats.start_s == 60.0
    assert (pool.stats.fetches, pool.stats.fetch_s) == (2, 7200.0)
    assert f"fetching {TARGET} into the Hugging Face cache (not engine start time)" in lines
    assert f"fetched {TARGET} in 3600.0 s" in lines
    pool.engines_for({"candidate": (scenario, "/envs/candidate/bin/python")})  # the same checkpoints
    assert [kind for kind, _ in events] == ["fetch", "fetch", "start", "start"]


def test_a_failed_download_fails_the_engine_key_naming_the_repository():
    starter = Starter()

    def fetch(checkpoint):
        if checkpoint.repo_id == HEAD:
            raise OSError("401 Client Error:\n  gated repository")

    pool = EnginePool(start=starter, configure=lambda s: config(), fetch=fetch, log=lambda line: None)
    with pytest.raises(EngineKeyFailed) as failed:
        pool.engines_for({"current": (make_scenario(), None)})
    assert str(failed.value) == (
        f"{HEAD}: download into the Hugging Face cache failed: OSError: 401 Client Error: gated repository"
    )
    assert failed.value.kind == ERROR_ENGINE and starter.started == []
    with pytest.raises(EngineKeyFailed) as again:  # the key's later scenarios fail at once
        pool.engines_for({"current": (make_scenario(batch_size=8), None)})
    assert again.value is failed.value
