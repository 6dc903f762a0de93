"""The memory a scenario's checkpoints call for, read from their configs and safetensors headers.

The study reports, beside the measured peak, the weights of each method's draft or head and the
KV-cache bytes per token of the target and of the draft.  They are worked out here from config.json
and the safetensors headers (names, dtypes and shapes; no tensor is loaded) of a builtin
checkpoint's folder, a local folder, or a hub id already in the local Hugging Face cache; never from
the network.  What is not on this machine is left None, with a note saying so.

- Weights count floating-point tensors at the dtype the engine runs (vLLM casts them on loading) and
  quantised ones as stored.  An EAGLE head that shares the target's embeddings and LM head has only
  its own tensors counted, as vLLM shares them.
- KV bytes per token: 2 x layers x KV heads x head dim x bytes of the KV-cache dtype; MLA models
  (``kv_lora_rank``) keep (kv_lora_rank + qk_rope_head_dim) per layer.  Every layer is taken as full
  attention.  A draft model and an EAGLE head have a KV cache of their own, MTP layers too.
- MTP layers live in the target's checkpoint: their tensors (``mtp`` in the name, or layer indices
  past ``num_hidden_layers``) are the head's weights, the rest the target's, with or without SD (vLLM's
  target model skips them on loading).
- n-gram and suffix decoding have no weights and no KV cache of their own.

safetensors and huggingface_hub (both come with vLLM) are imported where they are used.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..analysis.cost import DTYPE_BYTES
from ..checkpoints import builtin_recipe, is_builtin
from ..methods import method_of

#: Config keys that count a model's MTP layers.
MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")

#: Bits per element of each safetensors dtype code.
SAFETENSORS_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}
FLOAT_CODES = ("F16", "BF16", "F32", "F64")  # cast to the engine's dtype on loading
#: Bytes per element of a torch or vLLM dtype name (engine ``dtype`` and ``kv_cache_dtype``).
AUTO = "auto"


@dataclass(frozen=True)
class MemoryEstimate:
    """What a scenario's checkpoints need, in bytes; None where not known (the note says why)."""

    weights_bytes: int | None = None  # the target's weights
    draft_weights_bytes: int | None = None  # the draft's or head's (0: none)
    kv_bytes_per_token: int | None = None  # the target's KV cache per token
    draft_kv_bytes_per_token: int | None = None  # the draft's or head's (0: none)
    weights_dtype: str | None = None
    kv_dtype: str | None = None
    note: str | None = None

    def fields(self) -> dict:
        """The estimate as records.Memory names its fields."""
        return {
            "weights_bytes": self.weights_bytes,
            "draft_weights_bytes": self.draft_weights_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "draft_kv_bytes_per_token": self.draft_kv_bytes_per_token,
            "weights_dtype": self.weights_dtype,
            "kv_dtype": self.kv_dtype,
            "estimate_note": self.note,
        }


class Unavailable(Exception):
    """A checkpoint's config or weights cannot be read on this machine; the message says which and why."""


@dataclass(frozen=True)
class Tensor:
    dtype: str  # safetensors' code: "F32", "BF16", "I8", ...
    numel: int

    def bytes_at(self, float_bytes: int | None) -> int:
        """Its bytes once loaded: a floating-point tensor at `float_bytes` per element (None: as stored)."""
        if self.dtype in FLOAT_CODES and float_bytes is not None:
            return self.numel * float_bytes
        if self.dtype not in SAFETENSORS_BITS:
            raise ValueError(f"unknown safetensors dtype {self.dtype}")
        return math.ceil(self.numel * SAFETENSORS_BITS[self.dtype] / 8)


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint's files tell without loading it."""

    ref: str
    folder: Path
    config: dict
    tensors: dict[str, Tensor] | None  # None where its safetensors files are not all here
    stored_bytes: int | None  # then the sharded index's total_size, where the index is here

    @property
    def text_config(self) -> dict:
        """The language model's part of the config (multimodal configs nest it)."""
        return self.config.get("text_config") or self.config


def locate(ref: str) -> Path | None:
    """The folder on this machine of a builtin, a local folder or a cached hub id; None where there is none.

    A builtin that is not built yet is not built here: that takes minutes, an estimate must be cheap."""
    if is_builtin(ref):
        recipe = builtin_recipe(ref)
        return recipe.path() if recipe and recipe.path().is_dir() else None
    path = Path(ref).expanduser()
    if path.is_dir():
        return path
    from huggingface_hub import try_to_load_from_cache

    try:
        config = try_to_load_from_cache(ref, "config.json")
    except ValueError:  # not a hub id (huggingface_hub's HFValidationError)
        return None
    return Path(config).parent if isinstance(config, str) else None


def read_tensors(folder: Path) -> tuple[dict[str, Tensor] | None, int | None]:
    """(name -> dtype and size of every tensor, None where a shard is missing; the index's total_size)."""
    from safetensors import SafetensorError, safe_open

    index_path = folder / "model.safetensors.index.json"
    total = None
    if index_path.is_file():
        index = _read_json(index_path)
        files = sorted(set(index.get("weight_map", {}).values()))
        total = (index.get("metadata") or {}).get("total_size")
        total = total if isinstance(total, int) else None
    elif (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        files = sorted(p.name for p in folder.glob("*.safetensors"))
    if not files or not all((folder / name).is_file() for name in files):
        return None, total
    tensors = {}
    for name in files:
        try:
            with safe_open(folder / name, framework="numpy") as f:
                for key in f.keys():
                    part = f.get_slice(key)
                    tensors[key] = Tensor(part.get_dtype(), math.prod(part.get_shape()))
        except (OSError, SafetensorError) as err:
            raise Unavailable(f"{folder / name}: unreadable safetensors header: {err}") from None
    return tensors, total


def read_checkpoint(ref: str) -> Checkpoint:
    folder = locate(ref)
    if folder is None:
        raise Unavailable(f"{ref}: config not available offline")
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise Unavailable(f"{config_path}: no such file")
    tensors, total = read_tensors(folder)
    return Checkpoint(ref, folder, _read_json(config_path), tensors, total)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise Unavailable(f"{path}: not readable JSON: {err}") from None
    if not isinstance(data, dict):
        raise Unavailable(f"{path}: not a JSON object")
    return data


def dtype_name(value) -> str | None:
    """ "torch.bfloat16" and "bfloat16" -> "bfloat16"; None and "auto" -> None."""
    if value is None:
        return None
    name = str(value).removeprefix("torch.").lower()
    return None if name == AUTO else name


def dtype_bytes(name: str | None) -> int | None:
    if name is None:
        return None
    return 1 if name.startswith("fp8") else DTYPE_BYTES.get(name)


def engine_dtype(engine_args: dict, config: dict, effective: str | None = None) -> str | None:
    """The dtype the engine runs the model in: the live engine's where known, else the scenario's, else
    what vLLM's "auto" makes of the config's (a float32 config runs in 16 bits)."""
    chosen = dtype_name(effective) or dtype_name(engine_args.get("dtype"))
    if chosen:
        return chosen
    stored = dtype_name(config.get("torch_dtype") or config.get("dtype"))
    return "bfloat16" if stored in ("float32", "float") else stored


def kv_bytes_per_token(config: dict, layers, bytes_per_element: int | None) -> int:
    """KV-cache bytes per token of `layers` attention layers described by `config`; ValueError where
    the config lacks what it takes."""
    if not isinstance(layers, int):
        raise ValueError("layer count not in the config")
    if bytes_per_element is None:
        raise ValueError("KV-cache dtype not known")
    if config.get("kv_lora_rank"):
        return (_int(config, "kv_lora_rank") + _int(config, "qk_rope_head_dim", 0)) * layers * bytes_per_element
    heads = _int(config, "num_attention_heads")
    kv_heads = _int(config, "num_key_value_heads", heads)
    head_dim = _int(config, "head_dim", 0) or _int(config, "hidden_size") // heads
    return 2 * layers * kv_heads * head_dim * bytes_per_element


def _int(config: dict, key: str, default: int | None = None) -> int:
    value = config.get(key)
    if value is None and default is not None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or (value == 0 and default is None):
        raise ValueError(f"config has no usable {key} ({value!r})")
    return value


def is_mtp_tensor(name: str, num_hidden_layers: int) -> bool:
    """An MTP layer's tensor: "mtp" in the name (MiMo, Qwen3-Next), or a layer index past the model's
    layers (DeepSeek-V3, GLM-4.5)."""
    if re.search(r"(^|\.)mtp(_layers)?\.", name):
        return True
    layer = re.match(r"(?:model\.)?layers\.(\d+)\.", name)
    return bool(layer) and int(layer.group(1)) >= num_hidden_layers


def estimate(scenario, effective_dtype: str | None = None) -> MemoryEstimate:
    """The scenario's memory from its checkpoints' configs (a profiles.scenarios.Scenario);
    `effective_dtype` is the live engine's dtype where it is known."""
    notes: list[str] = []
    try:
        target = read_checkpoint(scenario.model.path)
    except (Unavailable, ImportError) as err:
        return MemoryEstimate(note=_line(err))
    weights_dtype = engine_dtype(scenario.engine_args, target.text_config, effective_dtype)
    kv_dtype = dtype_name(scenario.engine_args.get("kv_cache_dtype")) or weights_dtype
    float_bytes, kv_bytes = dtype_bytes(weights_dtype), dtype_bytes(kv_dtype)
    method = scenario.method.name
    layers = target.text_config.get("num_hidden_layers")

    target_tensors, head_tensors = target.tensors, None
    if target.tensors is not None and isinstance(layers, int):
        head_tensors = {n: t for n, t in target.tensors.items() if is_mtp_tensor(n, layers)}
        target_tensors = {n: t for n, t in target.tensors.items() if n not in head_tensors}
    weights = _weights(target, target_tensors, float_bytes, notes)
    kv = _kv(target.ref, target.text_config, layers, kv_bytes, notes)

    draft_weights = draft_kv = None
    traits = method_of(method)
    if not traits.has_own_weights:
        draft_weights = draft_kv = 0
    elif traits.head_in_target:
        mtp_layers = next((target.text_config[k] for k in MTP_LAYER_KEYS if target.text_config.get(k)), None)
        if head_tensors:
            draft_weights = _weights(target, head_tensors, float_bytes, notes)
        else:
            notes.append("MTP head: in the target's weights")
        draft_kv = _kv(f"{target.ref} (MTP layers)", target.text_config, mtp_layers, kv_bytes, notes)
    elif scenario.method.params.get("model"):
        try:
            draft = read_checkpoint(str(scenario.method.params["model"]))
        except (Unavailable, ImportError) as err:
            notes.append(_line(err))
        else:
            draft_weights = _weights(draft, draft.tensors, float_bytes, notes)
            # A draft run in the engine process (the adaptive proposer's) keeps a transformers cache
            # in the model's dtype.
            draft_kv = _kv(
                draft.ref,
                draft.text_config,
                draft.text_config.get("num_hidden_layers"),
                float_bytes if traits.draft_in_engine else kv_bytes,
                notes,
            )
    else:
        notes.append(f"method {method}: no draft checkpoint named")
    return MemoryEstimate(weights, draft_weights, kv, draft_kv, weights_dtype, kv_dtype, "; ".join(notes) or None)


def _weights(
    checkpoint: Checkpoint, tensors: dict[str, Tensor] | None, float_bytes: int | None, notes: list[str]
) -> int | None:
    if tensors is not None:
        try:
            return sum(t.bytes_at(float_bytes) for t in tensors.values())
        except ValueError as err:
            notes.append(f"{checkpoint.ref}: {err}")
            return None
    if checkpoint.stored_bytes is not None:
        notes.append(f"{checkpoint.ref}: weights as stored (the index's total_size; shards not on this machine)")
        return checkpoint.stored_bytes
    notes.append(f"{checkpoint.ref}: no safetensors weights in {checkpoint.folder}")
    return None


def _kv(ref: str, config: dict, layers, bytes_per_element: int | None, notes: list[str]) -> int | None:
    try:
        return kv_bytes_per_token(config, layers, bytes_per_element)
    except ValueError as err:
        notes.append(f"{ref}: KV bytes per token not known: {_line(err)}")
        return None


def _line(err: Exception) -> str:
    return " ".join(str(err).split()) or type(err).__name__
