"""Hub checkpoints fetched into the Hugging Face cache before their engine starts, outside its start limit.

An engine's start has a limit of its own (engine.DEFAULT_START_TIMEOUT_S), sized for what a start does:
imports, weights read from disk, compilation, CUDA graphs.  vLLM downloads a hub checkpoint it does
not find in the cache inside that start, and the study's TP 4 targets weigh 140-220 GB.  So the pool
fetches every hub checkpoint an engine names (its target, its draft model or head, a tokenizer given
as a hub id) before the engine starts, through huggingface_hub, and only the files vLLM loads: the
configs and tokenizer files at the repository's top level, and the weights vLLM picks (vLLM's
model_loader/default_loader.py and weight_utils.py: the shards the safetensors index names, else
every top-level *.safetensors, else *.bin, else *.pt).  Files already in the cache are not fetched
again.  Nothing is fetched where the engine's environment says HF_HUB_OFFLINE (vLLM then reads the
cache or fails in one line of its own) or VLLM_USE_MODELSCOPE (vLLM downloads from ModelScope).
Local paths, and the suite's builtin checkpoints (folders by the time an engine is configured), are
not hub ids.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from .engine import EngineConfig

# Besides the weights: configs, tokenizer files (SentencePiece, tiktoken, BPE merges and vocabularies),
# chat templates, and the code a trust_remote_code checkpoint brings.
SMALL_FILES = ("*.json", "*.model", "*.tiktoken", "*.txt", "*.jinja", "*.py")
WEIGHT_FORMATS = ("*.safetensors", "*.bin", "*.pt")  # vLLM takes the first the repository has
SAFETENSORS_INDEX = "model.safetensors.index.json"
ENV_TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub's true values of HF_HUB_OFFLINE


@dataclass(frozen=True)
class HubCheckpoint:
    repo_id: str
    revision: str | None = None  # None: the repository's default branch
    cache_dir: str | None = None  # the engine's download_dir; None: the Hugging Face cache


def is_hub_id(ref: str | None) -> bool:
    """A hub id as vLLM takes one: not a folder on this machine, not a local path, a valid repo id."""
    if not ref or ref.startswith(("/", "./", "../", "~")) or os.path.isdir(ref):
        return False
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(ref)
    except HFValidationError:
        return False
    return True


def _fetching_off(env: Mapping[str, str]) -> bool:
    offline = env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE") or ""
    return offline.upper() in ENV_TRUE or env.get("VLLM_USE_MODELSCOPE", "").lower() == "true"


def hub_checkpoints(config: EngineConfig, environ: Mapping[str, str] = os.environ) -> list[HubCheckpoint]:
    """The hub checkpoints an engine loads, each once, with the revision it asks for; none where its
    environment (`environ` under the engine's own variables) turns fetching off."""
    if _fetching_off({**environ, **config.env}):
        return []
    args, draft = config.engine_args, config.speculative_config or {}
    refs = (
        (config.model, args.get("revision")),
        (config.tokenizer, args.get("tokenizer_revision")),
        (draft.get("model"), draft.get("revision")),
    )
    found: list[HubCheckpoint] = []
    for ref, revision in refs:
        checkpoint = HubCheckpoint(ref, revision, args.get("download_dir")) if is_hub_id(ref) else None
        if checkpoint is not None and checkpoint not in found:
            found.append(checkpoint)
    return found


def small_files(files: list[str]) -> list[str]:
    """Of a repository's files, the configs, tokenizer files and code at its top level."""
    return [name for name in files if "/" not in name and any(fnmatchcase(name, p) for p in SMALL_FILES)]


def weight_files(files: list[str], index: dict | None) -> list[str]:
    """Of a repository's files, the weights vLLM loads: the shards its safetensors `index` names
    (None: it has none), else the top-level files of the first format the repository has."""
    named = sorted(set((index or {}).get("weight_map", {}).values()))
    if named:
        return named
    top = [name for name in files if "/" not in name]
    for pattern in WEIGHT_FORMATS:
        weights = [name for name in top if fnmatchcase(name, pattern)]
        if weights:
            return weights
    return []


def fetch_checkpoint(checkpoint: HubCheckpoint) -> None:
    """Bring what vLLM loads of `checkpoint` into the cache: its small files first, then the weight
    shards its safetensors index names (or the weights vLLM would pick without one)."""
    from huggingface_hub import HfApi, snapshot_download

    info = HfApi().model_info(checkpoint.repo_id, revision=checkpoint.revision)
    files = [sibling.rfilename for sibling in info.siblings or ()]

    def download(names: list[str]) -> Path:
        return Path(
            snapshot_download(
                checkpoint.repo_id,
                revision=checkpoint.revision,  # as vLLM asks: the cache's refs then lead it to these files
                cache_dir=checkpoint.cache_dir,
                allow_patterns=[glob.escape(name) for name in names],
            )
        )

    folder = download(small_files(files))
    index_path = folder / SAFETENSORS_INDEX
    index = json.loads(index_path.read_text(encoding="utf-8")) if index_path.is_file() else None
    download(weight_files(files, index))
