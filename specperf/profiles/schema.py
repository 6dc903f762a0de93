"""The profile file format as pydantic models: its tables, fields, types, defaults and rules.

Names come from the registry (datasets, methods, GPU classes), the metric list and the builtin
checkpoints. :func:`problem` turns the first validation error into one line ``field.path:
problem``. ``python -m specperf.profiles.schema`` prints the format's JSON Schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, model_validator

from ..checkpoints import BUILTIN_PREFIX, BUILTINS, is_builtin
from ..judge.metrics import METRICS
from ..messages import field_path
from ..methods import method_of
from ..records.scenario import MODES, OFFLINE, SERVE
from .registry import (
    BATCHING_MODES,
    GPU_CLASSES,
    NO_SD,
    NO_SD_LABEL,
    SELECTION_MODES,
    TIERS,
    method_names,
    workload_names,
)

SLUG = r"^[a-z0-9][a-z0-9._-]*$"


class Invalid(ValueError):
    """A broken rule at ``loc``, relative to the table whose validator raises it."""

    def __init__(self, loc: tuple[str | int, ...], problem: str):
        super().__init__(problem)
        self.loc = loc


# --------------------------------------------------------------------------
# Field types: a check whose ValueError is the message shown, and the JSON Schema it documents.
# --------------------------------------------------------------------------


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


def _checkpoint(value: Any) -> str:
    """A hub id, a local path, or builtin:NAME naming one of the suite's own checkpoints."""
    ref = _text(value)
    if is_builtin(ref) and ref[len(BUILTIN_PREFIX) :] not in BUILTINS:
        raise ValueError(f"unknown builtin checkpoint {ref!r} (known: {', '.join(sorted(BUILTINS))})")
    if ref.startswith(("/", "./", "../", "~")):
        local = Path(ref).expanduser()
        if not local.exists():
            raise ValueError(f"no such local checkpoint {ref!r}")
        if not (local / "config.json").is_file() and local.suffix != ".gguf":
            raise ValueError(f"{ref!r} is not a checkpoint (a folder with config.json, or a .gguf file)")
    return ref


def _tolerance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 10:
        raise ValueError(f"must be a relative tolerance such as 0.05, got {value!r}")
    return value


NonNegativeInt = _checked(lambda v: _integer(v, 0, "non-negative"), Annotated[int, Field(ge=0)])
Rounds = _bounded(1000)
Warmup = _bounded(100, low=0)
Requests = _bounded(100_000)
OutputLen = _bounded(131_072)  # 128 Ki tokens, beyond any model's context in the study
DraftTokens = _bounded(64)
BatchSize = _bounded(8192)
Concurrency = _bounded(4096)
GpuCount = _bounded(64)
GateEngines = _bounded(64)
Text = _checked(_text, Annotated[str, Field(min_length=1)])
Slug = _checked(check_slug, Annotated[str, Field(pattern=SLUG)])
MethodLabel = _checked(_method_label, Annotated[str, Field(pattern=SLUG)])
SDMethodName = _checked(_sd_method, Literal[method_names()])
Dataset = _name_in("dataset", workload_names())
MetricName = _name_in("metric", tuple(METRICS))
GpuClass = _name_in("GPU class", GPU_CLASSES)
Tier = _name_in("tier", TIERS)
Batching = _name_in("batching mode", BATCHING_MODES)
Selection = _name_in("selection mode", SELECTION_MODES)
Mode = _name_in("mode", MODES)
Checkpoint = _checked(_checkpoint, Annotated[str, Field(min_length=1)])
Tolerance = _checked(_tolerance, Annotated[float, Field(ge=0, lt=10)])
Tolerances = Annotated[
    dict[MetricName, Tolerance],
    Field(description="relative tolerance per metric name, e.g. throughput_tok_s = 0.25 (0 <= t < 10)"),
]
EngineArgs = Annotated[dict[str, Any], Field(description="keyword arguments of vllm.LLM(...)")]
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


# --------------------------------------------------------------------------
# Tables.
# --------------------------------------------------------------------------


class _Table(BaseModel):
    """A TOML table: strict types; an unknown field is an error that lists the allowed ones."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.model_config.get("extra") == "forbid":
            for key in data:
                if key not in cls.model_fields:
                    raise Invalid((key,), f"unknown field (allowed: {', '.join(sorted(cls.model_fields))})")
        return data


class ProfileTable(_Table):
    """[profile]: the profile's name and the settings every cell inherits."""

    name: Slug = _optional("the profile's name; default: the file name without .toml")
    description: str = ""
    tier: Tier = Field("gpu", description="cpu: runs without a GPU; gpu: every case is marked requires_gpu")
    rounds: Rounds = Field(5, description="measured rounds per scenario")
    warmup: Warmup = Field(1, description="unmeasured rounds before them")
    seed: NonNegativeInt = Field(42, description="engine seed and workload sampling seed")
    num_requests: Requests = Field(8, description="requests drawn from the dataset per scenario")
    output_len: OutputLen = Field(128, description="max_tokens of each request")
    batching: Batching = Field(
        "replicate",
        description="replicate: one prompt B times per call (the "
        "study's); distinct: B different prompts (named in the scenario id)",
    )
    selection: Selection = Field(
        "hash",
        description="hash: the first num_requests records ranked by "
        "sha256(seed:id); study: the study's order (a streaming shuffle with the seed, "
        "ShareGPT a seeded random.shuffle) and its length filters",
    )
    engine_args: EngineArgs = {}
    env: EngineEnv = {}
    vllm: VllmVersion = _optional("the vLLM the reference figures were measured with; default: none")
    tolerances: Tolerances = {}
    informational: list[MetricName] = Field(
        [], description="metrics judged and shown whose regression does not fail a case"
    )
    requires_gpu: GpuClass = _optional("oldest GPU class that may run the gpu tier; default: any")
    paired_reference: bool = Field(
        False,
        description="keep each SD scenario's no-SD engine alive beside "
        "it and alternate their rounds, so speedup is a ratio per pair of rounds",
    )
    gate_instances: GateEngines = Field(
        1,
        description="paired runs (--candidate, paired_reference): engines "
        "per side, side by side, pairs taking them in turn; averages the offset "
        "between fresh engines of one build",
    )
    gate_engine_sets: GateEngines = Field(
        1,
        description="paired runs: the pairs split over this many "
        "sets of fresh engines, started anew for each set (more engine "
        "pairs, each an independent draw of the offset between engines)",
    )
    gate_engine_offset: Annotated[float, Field(ge=0, le=0.2)] = Field(
        0.0,
        description="paired runs: the least SD of the offset between a fresh current and candidate "
        "engine (log units), as benchmarks/engine_offsets.py measures it on this tier; the change's "
        "error is never below what it implies",
    )
    gate_tolerance: Tolerance = Field(
        0.03,
        description="a paired speed change (--candidate, paired_reference) within this fraction is never a regression",
    )
    trace: bool = Field(
        False,
        description="record per-step acceptance and step times (ids end in -traced; tracing costs some throughput)",
    )
    mode: Mode = Field(
        OFFLINE,
        description="offline: LLM.generate in rounds of batched calls (the study's); serve: vLLM's "
        "OpenAI-compatible server under streamed requests, judged by latency too (ids end in -serve)",
    )


class MethodTable(_Table):
    """[methods.LABEL] or [models.NAME.methods.LABEL]: one speculative_config. Fields besides
    ``method`` pass to vLLM unchanged (prompt_lookup_min, ...)."""

    model_config = ConfigDict(extra="allow", strict=True)

    method: SDMethodName
    model: Checkpoint = _optional("the draft model or head: hub id, local path or builtin:NAME")
    num_speculative_tokens: DraftTokens = Field(description="draft tokens per step (k)")

    @model_validator(mode="after")
    def _required_params(self) -> MethodTable:
        """What a method cannot run without (the adaptive proposer: its draft model and n-gram window)."""
        extra = self.model_extra or {}
        for key in method_of(self.method).requires:
            if (self.model if key == "model" else extra.get(key)) is None:
                raise Invalid(
                    (key,),
                    f"required for method {self.method!r} (it needs {', '.join(method_of(self.method).requires)})",
                )
        return self

    def params(self) -> dict[str, Any]:
        """The speculative_config without ``method``."""
        return self.model_dump(exclude={"method"}, exclude_unset=True)


class ModelTable(_Table):
    """[models.NAME]: a target model; NAME starts its scenarios' ids."""

    path: Checkpoint = Field(description="hub id, local path or builtin:NAME")
    tokenizer: Checkpoint = _optional("hub id, local path or builtin:NAME; default: the model's own")
    tp: GpuCount = Field(1, description="tensor-parallel size (GPUs per engine)")
    thinking: bool = _optional(
        "enable_thinking passed to the chat template (Qwen3's reasoning switch); default: the template's own default"
    )
    methods: dict[MethodLabel, MethodTable] = Field(
        {}, description="methods of this model only; they override shared methods of the same label"
    )


class CellTable(_Table):
    """[[cells]]: the cross product model x methods x batch sizes x datasets; unset settings
    come from [profile]."""

    model: Text = Field(description="a NAME of [models.NAME]")
    methods: Annotated[
        list[Text], Field(min_length=1, description="method labels; the no-SD reference is added by itself")
    ]
    batch_sizes: Annotated[list[BatchSize], Field(min_length=1)] = _optional("offline cells: batch sizes")
    concurrencies: Annotated[list[Concurrency], Field(min_length=1)] = _optional("serve cells: requests in flight")
    request_rate: Annotated[float, Field(gt=0, le=1e6)] = _optional(
        "serve cells: requests per second arriving as a seeded Poisson process; default: all at once"
    )
    mode: Mode = _optional("default: [profile] mode")
    datasets: Annotated[list[Dataset], Field(min_length=1)]
    num_requests: Requests = _optional("default: [profile] num_requests")
    output_len: OutputLen = _optional("default: [profile] output_len")
    rounds: Rounds = _optional("default: [profile] rounds")
    batching: Batching = _optional("default: [profile] batching")
    selection: Selection = _optional("default: [profile] selection")
    chat: bool = _optional(
        "apply the target's chat template to the prompts; default: the workload's (every workload but AIME)"
    )
    vllm: VllmVersion = _optional("default: [profile] vllm")
    trace: bool = _optional("default: [profile] trace")
    engine_args: EngineArgs = Field({}, description="merged over [profile.engine_args]")
    tolerances: Tolerances = Field({}, description="merged over [profile.tolerances]")


class ProfileFile(_Table):
    """A scenario profile (fixtures/scenarios/NAME.toml)."""

    profile: ProfileTable = Field(default_factory=ProfileTable)
    models: Annotated[dict[Slug, ModelTable], Field(min_length=1)]
    methods: dict[MethodLabel, MethodTable] = Field({}, description="methods every model may use")
    cells: Annotated[list[CellTable], Field(min_length=1)]

    def methods_of(self, model: str) -> dict[str, MethodTable]:
        """Shared methods, overridden and extended by the model's own."""
        return {**self.methods, **self.models[model].methods}

    @model_validator(mode="after")
    def _cells_name_declared_models_and_methods(self) -> ProfileFile:
        for i, cell in enumerate(self.cells):
            if cell.model not in self.models:
                raise Invalid(
                    ("cells", i, "model"), f"unknown model {cell.model!r} (declared: {', '.join(self.models)})"
                )
            self._mode_settings(i, cell)
            declared = [NO_SD_LABEL, *self.methods_of(cell.model)]
            for j, label in enumerate(cell.methods):
                if label not in declared:
                    raise Invalid(
                        ("cells", i, "methods", j), f"unknown method {label!r} (declared: {', '.join(declared)})"
                    )
        return self

    def _mode_settings(self, i: int, cell: CellTable) -> None:
        """Offline cells give batch sizes; serve cells concurrencies (and maybe a rate), and are not traced."""
        serve = (cell.mode or self.profile.mode) == SERVE
        for name, why in (
            ("concurrencies", serve and cell.concurrencies is None and "a serve cell needs concurrencies"),
            ("batch_sizes", serve and cell.batch_sizes is not None and "a serve cell has concurrencies instead"),
            ("batch_sizes", not serve and cell.batch_sizes is None and "required field is missing"),
            ("trace", serve and cell.trace and "serve scenarios are not traced"),
            ("concurrencies", not serve and cell.concurrencies is not None and 'a serve setting (mode = "serve")'),
            ("request_rate", not serve and cell.request_rate is not None and 'a serve setting (mode = "serve")'),
        ):
            if why:
                raise Invalid(("cells", i, name), why)


# --------------------------------------------------------------------------
# Errors and the schema.
# --------------------------------------------------------------------------


def problem(err: ValidationError) -> str:
    """The first error of ``err`` as one line: ``cells[0].batch_sizes[1]: must be ...``."""
    first = err.errors(include_url=False)[0]
    loc, kind, value = tuple(first["loc"]), first["type"], first.get("input")
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, Invalid):
        loc += cause.loc
    if kind == "value_error":
        text = str(cause)
    elif kind == "missing":
        text = "required field is missing"
    elif kind in ("model_type", "dict_type"):
        text = f"must be a table, got {value!r}"
    elif kind == "list_type":
        text = f"must be a list, got {value!r}"
    elif kind == "too_short":
        text = "must be a non-empty list" if isinstance(value, list) else "must not be empty"
    elif kind == "string_type":
        text = f"must be a string, got {value!r}"
    else:
        text = first["msg"]
    return f"{field_path(loc)}: {text}"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a profile file."""
    return ProfileFile.model_json_schema()


def main() -> int:
    """``python -m specperf.profiles.schema``: print the JSON Schema."""
    print(json.dumps(json_schema(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
