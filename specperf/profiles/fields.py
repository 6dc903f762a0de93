"""The field types of the profile format: each a check whose ValueError is the message shown, and
the JSON Schema it documents (profiles/schema.py builds the tables from them)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, ValidationError

from ..checkpoints import BUILTINS, builtin_recipe, is_builtin
from ..judge.metrics import DYNAMIC_VS_BEST_K, METRICS
from ..records.scenario import (
    MAX_BATCH_SIZE,
    MAX_CONCURRENCY,
    MAX_DRAFT_TOKENS,
    MAX_GATE_ENGINES,
    MAX_GPUS,
    MAX_OUTPUT_LEN,
    MAX_REQUESTS,
    MAX_ROUNDS,
    MAX_TOLERANCE,
    MAX_WARMUP,
    MODES,
    SLUG,
    Sampling,
)
from .registry import (
    BATCHING_MODES,
    GPU_CLASSES,
    NO_SD,
    NO_SD_LABEL,
    PROMPT_FORMS,
    SELECTION_MODES,
    TIERS,
    method_names,
    workload_names,
)


def _checked(check: Callable[[Any], Any], schema: Any) -> Any:
    return Annotated[Any, PlainValidator(check, json_schema_input_type=schema)]


def _integer(value: Any, low: int, kind: str, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"must be a {kind} integer, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"must be at most {high}, got {value!r}")
    return value


def _bounded(high: int, low: int = 1) -> Any:
    """An integer from `low` to `high`: bounds far beyond any real run, so that a typo is caught before
    the planner or vLLM is asked for a batch of 10^12."""
    kind = "positive" if low == 1 else "non-negative"
    return _checked(lambda v: _integer(v, low, kind, high), Annotated[int, Field(ge=low, le=high)])


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a non-empty string, got {value!r}")
    return value


def check_slug(value: Any) -> str:
    """A name used in scenario ids: lower-case letters, digits, '.', '_' or '-'."""
    if not re.fullmatch(SLUG, _text(value)):
        raise ValueError(f"{value!r} must be lower-case letters, digits, '.', '_' or '-'")
    return value


def _known(kind: str, names: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in names:
            raise ValueError(f"unknown {kind} {value!r} (known: {', '.join(names)})")
        return value

    return check


def _name_in(kind: str, names: tuple[str, ...]) -> Any:
    return _checked(_known(kind, names), Literal[names])


def _method_label(value: Any) -> str:
    if value == NO_SD_LABEL:
        raise ValueError(f"{NO_SD_LABEL!r} is the built-in no-SD reference")
    return check_slug(value)


def _sd_method(value: Any) -> str:
    if value == NO_SD:
        raise ValueError(f"{NO_SD!r} is the built-in reference; do not declare it")
    return _known("method", method_names())(value)


HUB_ID = r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*"  # the hub's org/name


def _checkpoint(value: Any) -> str:
    """A hub id, a local path, or builtin:NAME naming one of the suite's own checkpoints."""
    ref = _text(value)
    if is_builtin(ref) and builtin_recipe(ref) is None:
        raise ValueError(f"unknown builtin checkpoint {ref!r} (known: {', '.join(sorted(BUILTINS))})")
    if ref.startswith(("/", "./", "../", "~")):
        local = Path(ref).expanduser()
        if not local.exists():
            raise ValueError(f"no such local checkpoint {ref!r}")
        if not (local / "config.json").is_file() and local.suffix != ".gguf":
            raise ValueError(f"{ref!r} is not a checkpoint (a folder with config.json, or a .gguf file)")
    elif not is_builtin(ref) and not re.fullmatch(HUB_ID, ref):  # https://..., file:///...: never a hub id
        raise ValueError(
            f"{ref!r} is not a checkpoint: a hub id (org/name), a local path (/, ./, ../, ~) or builtin:NAME"
        )
    return ref


def _tolerance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < MAX_TOLERANCE:
        raise ValueError(f"must be a relative tolerance such as 0.05, got {value!r}")
    return value


def _sampling(value: Any) -> dict[str, Any]:
    """A [sampling] table: some of Sampling's fields (records/scenario.py), each in its range."""
    if not isinstance(value, dict):
        raise ValueError(f"must be a table, got {value!r}")
    if unknown := sorted(value.keys() - Sampling.model_fields.keys()):
        raise ValueError(f"unknown field {unknown[0]!r} (allowed: {', '.join(Sampling.model_fields)})")
    try:
        Sampling.model_validate(value)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        raise ValueError(f"{first['loc'][0]}: {first['msg']}, got {first['input']!r}") from None
    return dict(value)


NonNegativeInt = _checked(lambda v: _integer(v, 0, "non-negative"), Annotated[int, Field(ge=0)])
Rounds = _bounded(MAX_ROUNDS)
Warmup = _bounded(MAX_WARMUP, low=0)
Requests = _bounded(MAX_REQUESTS)
OutputLen = _bounded(MAX_OUTPUT_LEN)
DraftTokens = _bounded(MAX_DRAFT_TOKENS)
BatchSize = _bounded(MAX_BATCH_SIZE)
Concurrency = _bounded(MAX_CONCURRENCY)
GpuCount = _bounded(MAX_GPUS)
GateEngines = _bounded(MAX_GATE_ENGINES)
GateBlocks = _bounded(MAX_ROUNDS)  # rounds per block, as many as Rounds at most
Text = _checked(_text, Annotated[str, Field(min_length=1)])
Slug = _checked(check_slug, Annotated[str, Field(pattern=SLUG)])
MethodLabel = _checked(_method_label, Annotated[str, Field(pattern=SLUG)])
SDMethodName = _checked(_sd_method, Literal[method_names()])
Dataset = _name_in("dataset", workload_names())
MetricName = _name_in("metric", tuple(METRICS))
InformationalName = _name_in("metric", (*METRICS, DYNAMIC_VS_BEST_K))  # DYNAMIC_VS_BEST_K: judged across scenarios
GpuClass = _name_in("GPU class", GPU_CLASSES)
Tier = _name_in("tier", TIERS)
Batching = _name_in("batching mode", BATCHING_MODES)
Selection = _name_in("selection mode", SELECTION_MODES)
PromptForm = _name_in("prompt form", PROMPT_FORMS)
Mode = _name_in("mode", MODES)
Checkpoint = _checked(_checkpoint, Annotated[str, Field(min_length=1)])
Tolerance = _checked(_tolerance, Annotated[float, Field(ge=0, lt=MAX_TOLERANCE)])
Tolerances = Annotated[
    dict[MetricName, Tolerance],
    Field(description="relative tolerance per metric name, e.g. throughput_tok_s = 0.25 (0 <= t < 10)"),
]
EngineArgs = Annotated[dict[str, Any], Field(description="keyword arguments of vllm.LLM(...)")]
SamplingSettings = _checked(_sampling, Sampling)
EngineEnv = Annotated[
    dict[str, Text],
    Field(description='environment variables of the engine processes, e.g. VLLM_DISABLE_COMPILE_CACHE = "1"'),
]
VllmVersion = Annotated[
    Text,
    Field(
        description="the vLLM the profile's reference figures were measured with "
        "(a version such as 0.10.1.1, or a fork's name); a run on another vLLM warns"
    ),
]


def _optional(description: str) -> Any:
    """A field that may be left out; None stands for "not given" (TOML has no null)."""
    return Field(None, description=description, json_schema_extra=_without_default)


def _without_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)
