"""vLLM's speculative-decoding method names and config quirks, per release.

Pure: imports no vLLM.  A profile names a method as the suite knows it (ngram, eagle, eagle3,
draft_model, mtp, suffix, ...); each `Span` below says in which vLLM releases that method is
accepted, under which vLLM name, and what the config needs there.  Every fact was read in the
release's own source; the file is named in each entry.  A method name the table does not know
is passed through unchanged, and only vLLM's own declaration can reject it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

# The oldest release the table was read for; older ones are refused.
OLDEST = "0.10.0"
PROPOSER_CLASS = "specperf.run.engines.adaptive_proposer.AdaptiveProposer"
PROPOSER_OPTIONS_KEY = "specperf_proposer"  # its options in vLLM's additional_config


@dataclass(frozen=True)
class Span:
    """Releases `since` <= v < `until` accept `method`, under the name `vllm_name`."""

    method: str  # the suite's name, as a profile writes it
    since: str
    until: str | None  # the first release that no longer accepts it; None: still accepted
    vllm_name: str
    source: str  # where this was read
    model_is_target: bool = False  # an absent `model` must be set to the target model
    needs_module: str | None = None  # a module the engine process must be able to import
    needs_package: str | None = None  # the distribution that provides it
    proposer_class: str | None = None  # a custom proposer: vLLM's `model` names this class, and the
    #                                  method's other params travel in additional_config (proposer_options)
    env: tuple[tuple[str, str], ...] = ()  # engine environment without which the method is not what it says


TREE_SOURCE = "SpeculativeConfig.speculative_token_tree, v0.10.0 to v0.20.2"
ATTENTION_BACKEND_ENV = "VLLM_ATTENTION_BACKEND"  # how a scenario's env names the backend
ATTENTION_BACKEND_ARG = "attention_backend"  # how vLLM 0.13 and later take it (attention_backend_arg)
TREE_BACKEND = (ATTENTION_BACKEND_ENV, "TREE_ATTN")

# Names: `SpeculativeMethod` in vllm/config.py (v0.10.0), vllm/config/__init__.py (v0.10.1.1,
# v0.10.2) and vllm/config/speculative.py (v0.11.0 to v0.33.0).
SPANS: tuple[Span, ...] = (
    Span("ngram", OLDEST, None, "ngram", "SpeculativeMethod, v0.10.0 to v0.33.0"),
    Span("eagle", OLDEST, None, "eagle", "SpeculativeMethod, v0.10.0 to v0.33.0"),
    # v0.10.x detects a head named "eagle3-..." as "eagle" when `method` is absent
    # (vllm/config/__init__.py v0.10.1.1, SpeculativeConfig.__post_init__): `method` is always passed.
    Span("eagle3", OLDEST, None, "eagle3", "SpeculativeMethod, v0.10.0 to v0.33.0"),
    # Tree verification: EAGLE or EAGLE-3 with a speculative_token_tree, a field of SpeculativeConfig
    # in v0.10.0 to v0.20.2, gone in v0.21.0 (vllm/config/speculative.py v0.20.2, v0.21.0).  The
    # proposer drafts the tree only under the tree attention backend: with any other it drafts a
    # chain of k and ignores the tree, without a word (vllm/v1/spec_decode/eagle.py v0.10.1.1 and
    # v0.11.1, llm_base_proposer.py v0.20.2: propose_tree only for TreeAttentionMetadata).  That
    # backend is CUDA's alone (platforms/cuda.py; platforms/cpu.py refuses every other backend).
    Span("eagle_tree", OLDEST, "0.21.0", "eagle", TREE_SOURCE, env=(TREE_BACKEND,)),
    Span("eagle3_tree", OLDEST, "0.21.0", "eagle3", TREE_SOURCE, env=(TREE_BACKEND,)),
    # v0.10.x: __post_init__ raises NotImplementedError for a draft model (vllm/config/__init__.py
    # v0.10.1.1); v0.11.0 to v0.14.0: EngineArgs raises "Draft model speculative decoding is not
    # supported yet" (vllm/engine/arg_utils.py); v0.15.0 drops that check and builds a
    # DraftModelProposer (vllm/v1/worker/gpu_model_runner.py v0.15.0).
    Span(
        "draft_model", "0.15.0", None, "draft_model", "vllm/engine/arg_utils.py v0.14.0 (refused), v0.15.0 (accepted)"
    ),
    # v0.10.x knows MTP as "deepseek_mtp" only, and fills an absent `model` with the target only
    # for deepseek_v3 and mimo targets (v0.10.2: also ernie4_5_moe, qwen3_next); any other target
    # (GLM-4.5-Air: glm4_moe) raises "num_speculative_tokens was provided without speculative
    # model" (vllm/config/__init__.py v0.10.1.1, SpeculativeConfig.__post_init__).
    Span(
        "mtp",
        OLDEST,
        "0.11.0",
        "deepseek_mtp",
        "vllm/config.py v0.10.0, vllm/config/__init__.py v0.10.1.1 and v0.10.2",
        model_is_target=True,
    ),
    # v0.11.0 adds "mtp", fills an absent `model` with the target for every target and renames
    # the model-specific names to "mtp" (vllm/config/speculative.py v0.11.0).
    Span("mtp", "0.11.0", None, "mtp", "vllm/config/speculative.py v0.11.0 to v0.33.0"),
    # "suffix" enters SpeculativeMethod in v0.11.1 (absent in v0.11.0), with
    # _validate_suffix_decoding raising ImportError without arctic_inference
    # (vllm/config/speculative.py v0.11.1 to v0.33.0).
    Span(
        "suffix",
        "0.11.1",
        None,
        "suffix",
        "vllm/config/speculative.py v0.11.0 (absent), v0.11.1",
        needs_module="arctic_inference",
        needs_package="arctic-inference",
    ),
    # Removed from SpeculativeMethod in v0.33.0 (vllm/config/speculative.py v0.32.0 has both).
    Span("medusa", OLDEST, "0.33.0", "medusa", "vllm/config/speculative.py v0.32.0, v0.33.0"),
    Span("mlp_speculator", OLDEST, "0.33.0", "mlp_speculator", "vllm/config/speculative.py v0.32.0, v0.33.0"),
    Span("ngram_gpu", "0.18.0", None, "ngram_gpu", "vllm/config/speculative.py v0.17.0 (absent), v0.18.0"),
    Span("custom_class", "0.22.0", None, "custom_class", "vllm/config/speculative.py v0.21.0 (absent), v0.22.0"),
    # specperf's own proposer (run/engines/adaptive_proposer.py) through that extension point; vLLM 0.22 to
    # 0.33 call `propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, ...)` on it
    # (vllm/v1/worker/gpu_model_runner.py, propose_draft_token_ids).
    Span(
        "adaptive",
        "0.22.0",
        None,
        "custom_class",
        "vllm/v1/spec_decode/custom_class_proposer.py v0.22.0",
        proposer_class=PROPOSER_CLASS,
    ),
)

# speculative_config keys that only some releases accept.  SpeculativeConfig forbids unknown keys
# from v0.21.0 (vllm/config/utils.py: ConfigDict(extra="forbid")).
PARAM_SPANS: dict[str, tuple[str, str | None, str]] = {
    # tree drafting: a field of SpeculativeConfig in v0.10.0 to v0.20.2, gone in v0.21.0
    "speculative_token_tree": (OLDEST, "0.21.0", "vllm/config/speculative.py v0.20.2, v0.21.0"),
}


class UnsupportedMethod(ValueError):
    """The installed vLLM cannot run this speculative config; the message is one line."""


def parse_version(vllm_version: str) -> Version:
    try:
        return Version(vllm_version)
    except InvalidVersion:
        raise UnsupportedMethod(f"unsupported: cannot read the vLLM version {vllm_version!r}") from None


def extra_modules() -> list[str]:
    """The modules some methods need besides vLLM (arctic_inference for suffix)."""
    return sorted({span.needs_module for span in SPANS if span.needs_module})


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _spans(method: str) -> list[Span]:
    return [span for span in SPANS if span.method == method]


def _within(version: Version, since: str, until: str | None) -> bool:
    return Version(since) <= version and (until is None or version < Version(until))


def _span_for(method: str, version: Version) -> Span | None:
    return next((s for s in _spans(method) if _within(version, s.since, s.until)), None)


def _range_reason(what: str, version: Version, since: str, until: str | None) -> str:
    if version < Version(since):
        return f"{what} needs vLLM >= {since} (installed {version})"
    return f"{what} was removed in vLLM {until} (installed {version})"


def unsupported_reason(
    method_name: str, params: dict | None, vllm_version: str, importable: Callable[[str], bool] | None = _importable
) -> str | None:
    """Why `vllm_version` cannot run this method with these speculative_config params; None if it can.

    `importable(module)` tells whether a method's extra package is present (by default: in this
    Python environment); None skips that check.  Names the table does not know give None."""
    try:
        version = parse_version(vllm_version)
    except UnsupportedMethod as err:
        return str(err).removeprefix("unsupported: ")
    if version < Version(OLDEST):
        return f"vLLM {version} is older than specperf's method table (from {OLDEST})"
    spans = _spans(method_name)
    span = _span_for(method_name, version)
    if spans and span is None:
        since = min((s.since for s in spans), key=Version)
        untils = [s.until for s in spans if s.until is not None]
        until = max(untils, key=Version) if untils else None
        return _range_reason(f"method {method_name}", version, since, until)
    if span is not None and span.needs_module and importable is not None and not importable(span.needs_module):
        return f"method {method_name} needs the {span.needs_package} package (module {span.needs_module} not found)"
    for key in params or {}:
        if key in PARAM_SPANS:
            since, until, _ = PARAM_SPANS[key]
            if not _within(version, since, until):
                return _range_reason(key, version, since, until)
    return None


def supported_methods(
    vllm_version: str,
    importable: Callable[[str], bool] | None = _importable,
) -> dict[str, str | None]:
    """Every method in the table: None where `vllm_version` runs it, else the reason it does not."""
    return {
        method: unsupported_reason(method, None, vllm_version, importable)
        for method in dict.fromkeys(span.method for span in SPANS)
    }


def vllm_speculative_config(
    spec: dict, vllm_version: str, target_model: str, importable: Callable[[str], bool] | None = _importable
) -> dict:
    """A scenario's speculative_config as `vllm_version` wants it: method renamed, quirks applied.

    Raises UnsupportedMethod ("unsupported: ...", one line) where that version cannot run it."""
    method = spec.get("method")
    if not method:
        raise UnsupportedMethod(
            "unsupported: speculative_config without a method (vLLM 0.10 misdetects EAGLE-3 heads): name the method"
        )
    reason = unsupported_reason(method, spec, vllm_version, importable)
    if reason is not None:
        raise UnsupportedMethod(f"unsupported: {reason}")
    mapped = dict(spec)
    span = _span_for(method, parse_version(vllm_version))
    if span is not None and span.proposer_class:
        return {
            "method": span.vllm_name,
            "model": span.proposer_class,
            **{key: spec[key] for key in ("num_speculative_tokens",) if key in spec},
        }
    if span is not None:
        mapped["method"] = span.vllm_name
        if span.model_is_target and not mapped.get("model"):
            mapped["model"] = target_model
    return mapped


def method_env(method: str) -> dict[str, str]:
    """The engine environment a method needs to be what it says (a tree: the tree attention
    backend); a scenario's own `env` wins over it."""
    return {key: value for span in _spans(method) for key, value in span.env}


def attention_backend_arg(env: Mapping[str, str], engine_args: Collection[str]) -> dict[str, str]:
    """The attention backend an engine's environment names (ATTENTION_BACKEND_ENV), as the engine
    argument `attention_backend` where the installed vLLM's EngineArgs has it; empty where it has
    not (vLLM 0.10 to 0.12 read the variable) or no backend is named.  The engine then takes the
    variable out of its environment: vLLM 0.13 and 0.14 read both and refuse them together
    ("mutually exclusive"), and from 0.15 the variable is not read at all, so a tree would draft a
    chain without a word (vllm/envs.py, vllm/engine/arg_utils.py, vllm/config/attention.py, v0.12.0
    to v0.20.2)."""
    backend = env.get(ATTENTION_BACKEND_ENV)
    return {ATTENTION_BACKEND_ARG: backend} if backend and ATTENTION_BACKEND_ARG in engine_args else {}


def proposer_options(spec: dict | None) -> dict | None:
    """The options of a custom-proposer method (all its params but k), for vLLM's additional_config;
    None for every other method."""
    if not spec or not any(s.proposer_class for s in _spans(spec.get("method", ""))):
        return None
    return {key: value for key, value in spec.items() if key not in ("method", "num_speculative_tokens")}
