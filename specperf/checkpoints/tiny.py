"""Tiny random-weight targets and "echo" heads for the EAGLE, EAGLE-3 and MTP methods.

An echo head's fc passes the target's last hidden state through and its attention and MLP add
nothing, so each draft repeats the token the target just produced. tiny-llama's output head is
partly aligned with its input embeddings, so its greedy text falls into runs of one repeated
token and breaks out of them again: the echo drafts get real, request-dependent, repeatable
partial acceptance, and outputs stay identical to no-SD.
"""

from __future__ import annotations

import pathlib
from typing import Any

from .build import Recipe, ensure, load_tensors, save_tensors, write_json
from .smollm2 import TOKENIZER, copy_tokenizer, llama_config

TINY_SEED = 20240601
TINY_VOCAB = 49152  # SmolLM2's tokenizer
TINY_HIDDEN = 64
TINY_INTERMEDIATE = 256
TINY_LAYERS = 2
TINY_HEADS = 2
TINY_HEAD_DIM = 32  # vLLM's CPU attention needs head_dim >= 32
TINY_MAX_POSITIONS = 8192
TINY_ROPE_THETA = 100000.0
TINY_RMS_EPS = 1e-5
#: Share of the input embedding mixed into tiny-llama's lm_head (the rest is random). 0 gives
#: text with almost no repeated tokens (echo drafts accept nothing), 0.5 and above a single token
#: repeated forever (echo drafts accept everything); 0.2 gives runs that start and stop.
TINY_LM_HEAD_EMBED_SHARE = 0.2
#: EAGLE-3 heads usually draft over a reduced vocabulary mapped back to the target's by ``d2t``.
TINY_EAGLE3_DRAFT_VOCAB = 32768


class _Init:
    """Seeded tensor source; the order of calls fixes the bytes."""

    def __init__(self, seed: int):
        import torch

        self.torch = torch
        self.gen = torch.Generator().manual_seed(seed)

    def normal(self, *shape: int, std: float = 1.0):
        return self.torch.randn(*shape, generator=self.gen, dtype=self.torch.float32) * std

    def linear(self, out_features: int, in_features: int):
        # unit-gain random projection: std 1/sqrt(fan_in)
        return self.normal(out_features, in_features, std=in_features**-0.5)

    def ones(self, *shape: int):
        return self.torch.ones(*shape, dtype=self.torch.float32)

    def zeros(self, *shape: int):
        return self.torch.zeros(*shape, dtype=self.torch.float32)


def _decoder_layer(
    init: _Init,
    prefix: str,
    *,
    qkv_bias: bool = False,
    echo: bool = False,
    input_layernorm: bool = True,
    qkv_in: int | None = None,
) -> dict[str, Any]:
    """One Llama/Qwen2 decoder layer. ``echo`` zeroes o_proj and down_proj so that the layer
    adds nothing to its residual stream (its input passes through unchanged)."""
    h, i = TINY_HIDDEN, TINY_INTERMEDIATE
    q_out = TINY_HEADS * TINY_HEAD_DIM
    kv_out = TINY_HEADS * TINY_HEAD_DIM
    qkv_in = qkv_in or h
    t: dict[str, Any] = {}
    if input_layernorm:
        t[prefix + "input_layernorm.weight"] = init.ones(h)
    t[prefix + "self_attn.q_proj.weight"] = init.linear(q_out, qkv_in)
    t[prefix + "self_attn.k_proj.weight"] = init.linear(kv_out, qkv_in)
    t[prefix + "self_attn.v_proj.weight"] = init.linear(kv_out, qkv_in)
    if qkv_bias:
        t[prefix + "self_attn.q_proj.bias"] = init.normal(q_out, std=0.1)
        t[prefix + "self_attn.k_proj.bias"] = init.normal(kv_out, std=0.1)
        t[prefix + "self_attn.v_proj.bias"] = init.normal(kv_out, std=0.1)
    t[prefix + "self_attn.o_proj.weight"] = init.zeros(h, q_out) if echo else init.linear(h, q_out)
    t[prefix + "post_attention_layernorm.weight"] = init.ones(h)
    t[prefix + "mlp.gate_proj.weight"] = init.linear(i, h)
    t[prefix + "mlp.up_proj.weight"] = init.linear(i, h)
    t[prefix + "mlp.down_proj.weight"] = init.zeros(h, i) if echo else init.linear(h, i)
    return t


def _tiny_config(**overrides: Any) -> dict[str, Any]:
    config = llama_config(
        hidden=TINY_HIDDEN,
        intermediate=TINY_INTERMEDIATE,
        layers=TINY_LAYERS,
        heads=TINY_HEADS,
        kv_heads=TINY_HEADS,
        head_dim=TINY_HEAD_DIM,
        vocab=TINY_VOCAB,
        max_positions=TINY_MAX_POSITIONS,
        rope_theta=TINY_ROPE_THETA,
        rms_eps=TINY_RMS_EPS,
        tie=False,
    )
    config.update(overrides)
    return config


def _tiny_target(seed: int, *, qkv_bias: bool) -> dict[str, Any]:
    init = _Init(seed)
    embed = init.normal(TINY_VOCAB, TINY_HIDDEN)
    t: dict[str, Any] = {"model.embed_tokens.weight": embed}
    for layer in range(TINY_LAYERS):
        t.update(_decoder_layer(init, f"model.layers.{layer}.", qkv_bias=qkv_bias))
    t["model.norm.weight"] = init.ones(TINY_HIDDEN)
    share = TINY_LM_HEAD_EMBED_SHARE
    t["lm_head.weight"] = share * embed + (1.0 - share) * init.normal(TINY_VOCAB, TINY_HIDDEN)
    return t


def _build_tiny_llama(out: pathlib.Path) -> None:
    save_tensors(out, _tiny_target(TINY_SEED, qkv_bias=False))
    write_json(out / "config.json", _tiny_config())
    copy_tokenizer(out)


def _build_tiny_llama_eagle(out: pathlib.Path) -> None:
    # EAGLE-1 (vLLM: EagleLlamaForCausalLM): fc maps cat(token embedding, target hidden) to H;
    # one decoder layer without input_layernorm; embeddings and lm_head come from the target.
    # vLLM hands the head the target's final (normed) hidden state, so passing it through
    # reproduces the target's own logits for the token just produced.
    import torch

    init = _Init(TINY_SEED + 1)
    h = TINY_HIDDEN
    t = {"fc.weight": torch.cat([init.zeros(h, h), torch.eye(h, dtype=torch.float32)], dim=1)}
    t.update(_decoder_layer(init, "layers.0.", echo=True, input_layernorm=False))
    save_tensors(out, t)
    write_json(out / "config.json", _tiny_config(num_hidden_layers=1))
    copy_tokenizer(out)


def _eagle3_draft_vocab() -> Any:
    """Sorted target ids of the EAGLE-3 draft vocabulary: special tokens 0-2 plus a seeded
    random choice of the rest (a real head keeps its most frequent tokens)."""
    import torch

    gen = torch.Generator().manual_seed(TINY_SEED + 2)
    rest = torch.randperm(TINY_VOCAB - 3, generator=gen)[: TINY_EAGLE3_DRAFT_VOCAB - 3] + 3
    return torch.cat([torch.arange(3), rest]).sort().values


def _build_tiny_llama_eagle3(out: pathlib.Path) -> None:
    # EAGLE-3 (vLLM: Eagle3LlamaForCausalLM). fc takes the target's aux hidden states after
    # layers [0, 1, 2] (embeddings, layer 0, layer 1: the final residual stream before norm)
    # and keeps only the last; hidden_norm/attention/MLP add nothing; the head's final norm and
    # lm_head are the target's (restricted to the draft vocabulary), so the head reproduces the
    # target's logits for the token just produced.
    import torch

    target = load_tensors(ensure(TINY_LLAMA))
    init = _Init(TINY_SEED + 3)
    h = TINY_HIDDEN
    ids = _eagle3_draft_vocab()
    t = {
        "fc.weight": torch.cat([init.zeros(h, 2 * h), torch.eye(h, dtype=torch.float32)], dim=1),
        "norm.weight": target["model.norm.weight"].clone(),
        "lm_head.weight": target["lm_head.weight"][ids].clone(),
        "d2t": (ids - torch.arange(len(ids))).to(torch.int64),
        "midlayer.hidden_norm.weight": init.ones(h),
    }
    t.update(_decoder_layer(init, "midlayer.", echo=True, qkv_in=2 * h))
    save_tensors(out, t)
    config = _tiny_config(
        architectures=["LlamaForCausalLMEagle3"],
        num_hidden_layers=1,
        draft_vocab_size=TINY_EAGLE3_DRAFT_VOCAB,
        target_hidden_size=h,
        eagle_config={
            "eagle_aux_hidden_state_layer_ids": [0, 1, 2],
            "use_aux_hidden_state": True,
        },
    )
    write_json(out / "config.json", config)
    copy_tokenizer(out)


def _build_tiny_mimo(out: pathlib.Path) -> None:
    # MiMo (vLLM: MiMoForCausalLM + MiMoMTP for method="mtp") is Qwen2 (q/k/v biases) plus
    # ``num_nextn_predict_layers`` MTP layers stored as model.mtp_layers.<i>.*. The MTP layer
    # computes final_layernorm(block(input_proj(cat(hidden_layernorm(h), token_layernorm(e)))));
    # with input_proj = [I | 0] and a block that adds nothing, it reproduces the target's
    # logits for the token just produced (an echo head).
    import torch

    t = _tiny_target(TINY_SEED + 4, qkv_bias=True)
    init = _Init(TINY_SEED + 5)
    h = TINY_HIDDEN
    p = "model.mtp_layers.0."
    t[p + "token_layernorm.weight"] = init.ones(h)
    t[p + "hidden_layernorm.weight"] = init.ones(h)
    t[p + "input_proj.weight"] = torch.cat([torch.eye(h, dtype=torch.float32), init.zeros(h, h)], dim=1)
    t.update(_decoder_layer(init, p, qkv_bias=True, echo=True))
    t[p + "final_layernorm.weight"] = t["model.norm.weight"].clone()
    save_tensors(out, t)
    config = _tiny_config(
        architectures=["MiMoForCausalLM"],
        model_type="qwen2",
        num_nextn_predict_layers=1,
        use_sliding_window=False,
        sliding_window=None,
        max_window_layers=TINY_LAYERS,
    )
    for key in ("attention_bias", "mlp_bias", "head_dim"):
        config.pop(key)
    write_json(out / "config.json", config)
    copy_tokenizer(out)


def _tiny_params(**extra: Any) -> tuple[tuple[str, Any], ...]:
    base = {
        "seed": TINY_SEED,
        "hidden_size": TINY_HIDDEN,
        "intermediate_size": TINY_INTERMEDIATE,
        "num_hidden_layers": TINY_LAYERS,
        "num_attention_heads": TINY_HEADS,
        "head_dim": TINY_HEAD_DIM,
        "vocab_size": TINY_VOCAB,
        "lm_head_embed_share": TINY_LM_HEAD_EMBED_SHARE,
    }
    base.update(extra)
    return tuple(sorted(base.items()))


TINY_LLAMA = Recipe(
    name="tiny-llama",
    version=1,
    build=_build_tiny_llama,
    description="tiny random-weight Llama target with the SmolLM2 tokenizer",
    requires=(TOKENIZER,),
    params=_tiny_params(),
)

TINY_LLAMA_EAGLE = Recipe(
    name="tiny-llama-eagle",
    version=1,
    build=_build_tiny_llama_eagle,
    description="EAGLE-1 echo head for tiny-llama (drafts the token just produced)",
    requires=(TOKENIZER,),
    params=_tiny_params(seed=TINY_SEED + 1, num_hidden_layers=1),
)

TINY_LLAMA_EAGLE3 = Recipe(
    name="tiny-llama-eagle3",
    version=1,
    build=_build_tiny_llama_eagle3,
    description="EAGLE-3 echo head for tiny-llama (drafts the token just produced, "
    f"over a {TINY_EAGLE3_DRAFT_VOCAB}-token draft vocabulary)",
    requires=(TINY_LLAMA, TOKENIZER),
    params=_tiny_params(seed=TINY_SEED + 3, num_hidden_layers=1, draft_vocab_size=TINY_EAGLE3_DRAFT_VOCAB),
)

TINY_MIMO = Recipe(
    name="tiny-mimo",
    version=1,
    build=_build_tiny_mimo,
    description="tiny random-weight MiMo-style target (Qwen2 + 1 echo MTP layer) for method='mtp'",
    requires=(TOKENIZER,),
    params=_tiny_params(seed=TINY_SEED + 4, num_nextn_predict_layers=1),
)
