"""The profile file format as pydantic models: its tables, fields, defaults and rules.

The field types (profiles/fields.py) take their names from the registry (datasets, methods, GPU
classes), the metric list and the builtin checkpoints. :func:`problem` turns the first validation
error into one line ``field.path: problem``; ``python -m specperf.profiles.schema`` prints the JSON Schema."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..messages import field_path
from ..methods import METHODS, method_of, token_tree
from ..records.scenario import SERVE, EngineOffset, Model, RequestRate, Scenario
from ..schedule import FIELD as SCHEDULE_FIELD
from ..schedule import check_schedule
from .fields import (
    Batching,
    BatchSize,
    Checkpoint,
    Concurrency,
    Dataset,
    DraftTokens,
    EngineArgs,
    EngineEnv,
    GateBlocks,
    GateEngines,
    GpuClass,
    GpuCount,
    InformationalName,
    MethodLabel,
    Mode,
    NonNegativeInt,
    OutputLen,
    PromptForm,
    Requests,
    Rounds,
    SamplingSettings,
    SDMethodName,
    Selection,
    Slug,
    Text,
    Tier,
    Tolerance,
    Tolerances,
    VllmVersion,
    Warmup,
    _optional,
)
from .registry import CODE_ARGS, CODE_ENV, NO_SD_LABEL
from .sweeps import sweep_problem


def _as_scenario(name: str, description: str, record: type[BaseModel] = Scenario) -> Any:
    """A setting the profile hands on to its scenarios: its default is the record's (records/scenario.py),
    stated there only."""
    return Field(record.model_fields[name].default, description=description)


class Invalid(ValueError):
    """A broken rule at ``loc``, relative to the table whose validator raises it."""

    def __init__(self, loc: tuple[str | int, ...], problem: str):
        super().__init__(problem)
        self.loc = loc


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
    warmup: Warmup = _as_scenario("warmup", "unmeasured rounds before them")
    seed: NonNegativeInt = _as_scenario("seed", "engine seed and workload sampling seed")
    num_requests: Requests = Field(8, description="requests drawn from the dataset per scenario")
    output_len: OutputLen = Field(128, description="max_tokens of each request")
    batching: Batching = _as_scenario(
        "batching",
        "replicate: one prompt B times per call (the study's); distinct: B different prompts "
        "(named in the scenario id)",
    )
    selection: Selection = _as_scenario(
        "selection",
        "hash: the first num_requests records ranked by sha256(seed:id); study: the study's order (a streaming "
        "shuffle with the seed, ShareGPT a seeded random.shuffle) and its length filters",
    )
    prompt_form: PromptForm = _as_scenario(
        "prompt_form", "token_ids: the suite's token ids; study: the study's prompt strings (prompt_ids)"
    )
    engine_args: EngineArgs = {}
    env: EngineEnv = {}
    sampling: SamplingSettings = Field({}, description="each request's temperature, top_p, top_k, seed; check_draws")
    allow_code: bool = Field(False, description="let engine_args and env load code: " + ", ".join(CODE_ARGS + CODE_ENV))
    vllm: VllmVersion = _optional("the vLLM the reference figures were measured with; default: none")
    tolerances: Tolerances = {}
    informational: list[InformationalName] = Field(
        [], description="metrics (and dynamic_vs_best_k) judged and shown whose regression fails nothing"
    )
    requires_gpu: GpuClass = _optional("oldest GPU class that may run the gpu tier; default: any")
    paired_reference: bool = _as_scenario(
        "paired_reference",
        "keep each SD scenario's no-SD engine alive beside "
        "it and alternate their rounds, so speedup is a ratio per pair of rounds",
    )
    gate_instances: GateEngines = _as_scenario(
        "gate_instances",
        "paired runs (--candidate, paired_reference): engines per side, side by side, pairs taking them in "
        "turn; averages the offset between fresh engines of one build",
    )
    gate_engine_sets: GateEngines = _as_scenario(
        "gate_engine_sets",
        "paired runs: the pairs split over this many sets of fresh engines, started anew for each set (more "
        "engine pairs, each an independent draw of the offset between engines)",
    )
    gate_engine_offset: EngineOffset = _as_scenario(
        "gate_engine_offset",
        "paired runs: the SD of the offset between a fresh current and candidate engine (log "
        "units), as benchmarks/engine_offsets.py measures it on this tier; the prior the change's "
        "error pools with the spread between engine pairs (0: the spread alone)",
    )
    gate_blocks: GateBlocks = _optional(
        "paired runs (--candidate, paired_reference): alternate blocks of this many rounds with one engine "
        "alive (each block starts the engine it lacks), where the engines of a pair do not fit in memory "
        "together; --gate-blocks overrides; default: engines side by side"
    )
    gate_tolerance: Tolerance = _as_scenario(
        "gate_tolerance",
        "a paired speed change (--candidate, paired_reference) shown within this passes; tolerances' entry overrides",
    )
    trace: bool = _as_scenario(
        "trace",
        "record per-step acceptance and step times (ids end in -traced; tracing costs some throughput)",
    )
    mode: Mode = _as_scenario(
        "mode",
        "offline: LLM.generate in rounds of batched calls (the study's); serve: vLLM's "
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
        if SCHEDULE_FIELD in extra:
            try:
                check_schedule(extra[SCHEDULE_FIELD], self.num_speculative_tokens)
            except ValueError as err:
                raise Invalid((SCHEDULE_FIELD,), str(err)) from None
        tree = extra.get("speculative_token_tree")
        if tree is not None:
            if not method_of(self.method).tree_of:
                trees = " or ".join(m.name for m in METHODS.values() if m.tree_of)
                raise Invalid(("speculative_token_tree",), f"a token tree is verified by method {trees}")
            try:
                token_tree(str(tree), self.num_speculative_tokens)
            except ValueError as err:
                raise Invalid(("speculative_token_tree",), str(err)) from None
        return self

    def params(self) -> dict[str, Any]:
        """The speculative_config without ``method``."""
        return self.model_dump(exclude={"method"}, exclude_unset=True)


class ModelTable(_Table):
    """[models.NAME]: a target model; NAME starts its scenarios' ids."""

    path: Checkpoint = Field(description="hub id, local path or builtin:NAME")
    tokenizer: Checkpoint = _optional("hub id, local path or builtin:NAME; default: the model's own")
    tp: GpuCount = _as_scenario("tp", "tensor-parallel size (GPUs per engine)", Model)
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
    request_rate: RequestRate = _optional(
        "serve cells: requests per second arriving as a seeded Poisson process; default: all at once"
    )
    num_speculative_tokens: Annotated[list[DraftTokens], Field(min_length=1)] = _optional(
        "a k sweep: each method of the cell once per k, each k an engine of its own and its label's "
        "-kN naming it (ngram-k3 becomes ngram-k1, ngram-k5); swept scenarios run paired with their "
        "no-SD reference (paired_reference), so that each k's speedup is a ratio per pair of rounds"
    )
    mode: Mode = _optional("default: [profile] mode")
    datasets: Annotated[list[Dataset], Field(min_length=1)]
    num_requests: Requests = _optional("default: [profile] num_requests")
    output_len: OutputLen = _optional("default: [profile] output_len")
    rounds: Rounds = _optional("default: [profile] rounds")
    gate_engine_sets: GateEngines = _optional("default: [profile] gate_engine_sets")
    gate_blocks: GateBlocks = _optional("default: [profile] gate_blocks")
    batching: Batching = _optional("default: [profile] batching")
    selection: Selection = _optional("default: [profile] selection")
    prompt_form: PromptForm = _optional("default: [profile] prompt_form")
    chat: bool = _optional(
        "apply the target's chat template to the prompts; default: the workload's (every workload but AIME)"
    )
    vllm: VllmVersion = _optional("default: [profile] vllm")
    trace: bool = _optional("default: [profile] trace")
    engine_args: EngineArgs = Field({}, description="merged over [profile.engine_args]")
    sampling: SamplingSettings = Field({}, description="merged over [profile.sampling]")
    env: EngineEnv = Field({}, description="merged over [profile.env]")
    tolerances: Tolerances = Field({}, description="merged over [profile.tolerances]")
    informational: list[InformationalName] = _optional("default: [profile] informational")


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
            methods = self.methods_of(cell.model)
            swept = {
                label: (methods[label].model_extra or {}) if label != NO_SD_LABEL else {} for label in cell.methods
            }
            if cell.num_speculative_tokens and (bad := sweep_problem(cell.num_speculative_tokens, swept)):
                raise Invalid(("cells", i, *bad[0]), bad[1])
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
