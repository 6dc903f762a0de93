"""The scenario: what a profile expands into (profiles/scenarios.py), what the suite runs, and what a
result stores, one frozen record for all three.

Adding a setting is one field here (with its default, so older result files still read) and its
entry in the profile format (profiles/schema.py); the expansion copies every field the two share.
The id and the reference's id follow from the fields; the content hash is stored, because a
result keeps the hash it was measured under even after a checkpoint recipe changes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, computed_field, model_validator

from ..methods import K_FIELD, REFERENCE
from .base import NO_SD, Record

NO_SD_LABEL = REFERENCE.marker  # the reference's label in scenario ids, and its pytest marker
OFFLINE, SERVE = "offline", "serve"  # LLM.generate, the study's; vLLM's OpenAI server under streamed load
MODES = (OFFLINE, SERVE)
DERIVED = ("id", "reference_id")  # stored with a scenario, computed from its fields
GATE_TOLERANCE = 0.03  # a paired speed change shown within this passes (judge/paired.py three_way)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# A name in scenario ids: what a terminal line, a file name and a -k expression all take as it is.
SLUG = r"^[a-z0-9][a-z0-9._-]*$"
Slug = Annotated[str, Field(pattern=SLUG)]

# The largest value a profile may give each setting (profiles/fields.py holds profiles to them with
# its own messages): far beyond any real run.  A stored scenario outside them is a corrupt file,
# never a value an analysis computes with (a gate_engine_offset of 1e308 overflowed the report).
MAX_BATCH_SIZE = 8192
MAX_CONCURRENCY = 4096
MAX_REQUESTS = 100_000
MAX_OUTPUT_LEN = 131_072  # 128 Ki tokens, beyond any model's context in the study
MAX_ROUNDS = 1000  # also rounds per gate block
MAX_WARMUP = 100
MAX_GATE_ENGINES = 64
MAX_GATE_ENGINE_OFFSET = 0.2
MAX_TOLERANCE = 10  # a relative tolerance, below this
MAX_REQUEST_RATE = 1e6
MAX_DRAFT_TOKENS = 64  # k
MAX_GPUS = 64  # tensor-parallel size

BatchSize = Annotated[int, Field(ge=1, le=MAX_BATCH_SIZE)]
Concurrency = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]
Requests = Annotated[int, Field(ge=1, le=MAX_REQUESTS)]
OutputLen = Annotated[int, Field(ge=1, le=MAX_OUTPUT_LEN)]
Rounds = Annotated[int, Field(ge=1, le=MAX_ROUNDS)]
Warmup = Annotated[int, Field(ge=0, le=MAX_WARMUP)]
GateEngines = Annotated[int, Field(ge=1, le=MAX_GATE_ENGINES)]
Tolerance = Annotated[float, Field(ge=0, lt=MAX_TOLERANCE)]
EngineOffset = Annotated[float, Field(ge=0, le=MAX_GATE_ENGINE_OFFSET)]
RequestRate = Annotated[float, Field(gt=0, le=MAX_REQUEST_RATE)]


class Model(Record):
    name: Slug
    path: str
    tokenizer: str | None = None
    tp: Annotated[int, Field(ge=1, le=MAX_GPUS)] = 1
    thinking: bool | None = None  # enable_thinking for the chat template; None: the template's default


class Method(Record):
    """An SD method as vLLM's speculative_config sees it; name "none" means no SD."""

    label: Slug  # the profile's key, used in scenario ids ("eagle3-k3")
    name: str  # vLLM's method ("eagle3"), or "none"
    params: dict[str, Any] = Field(default_factory=dict)  # the rest of speculative_config

    @model_validator(mode="after")
    def _k_in_range(self) -> Method:
        """A stored k is one a profile can give: the best-k table sorts and compares them."""
        k = self.params.get(K_FIELD)
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_DRAFT_TOKENS):
            raise ValueError(f"params.{K_FIELD}: {k!r} is not a k from 1 to {MAX_DRAFT_TOKENS}")
        return self

    @property
    def is_reference(self) -> bool:
        return self.name == NO_SD

    def speculative_config(self) -> dict[str, Any] | None:
        if self.is_reference:
            return None
        return {"method": self.name, **self.params}


REFERENCE_METHOD = Method(label=NO_SD_LABEL, name=NO_SD)


CHECK_DRAWS = 64  # a distribution check's draws of each prompt per side, by default (docs/methodology/sampled.md)


class Sampling(Record):
    """How every request draws its tokens (vLLM's SamplingParams).  Greedy at temperature 0, as the
    study and vLLM's acceptance test measure; above 0 each request draws with a seed of its own,
    `seed` + its place in the round, so that every round draws the same tokens and a run with
    another seed draws another sample of the same distribution.  Greedy ignores top_p and top_k."""

    model_config = ConfigDict(frozen=True)

    temperature: Annotated[float, Field(ge=0, le=10)] = 0.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    top_k: Annotated[int, Field(ge=0)] = 0  # 0: every token
    seed: Annotated[int, Field(ge=0)] = 0
    # draws of each prompt per side in an SD scenario's distribution check (run/distribution_check.py);
    # 0: none.  Like the seed, in neither the id nor the hash: the p it gives is judged on its own
    # value.  Left out of a file at its default, so that files stay as they were
    check_draws: Annotated[int, Field(ge=0, le=1024, exclude_if=lambda draws: draws == CHECK_DRAWS)] = CHECK_DRAWS

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def label(self) -> str:
        """The scenario id's suffix: none for greedy, else "-t0.8", "-p0.95" where top_p < 1, "-topk50"."""
        if self.greedy:
            return ""
        return (
            f"-t{self.temperature:g}"
            + (f"-p{self.top_p:g}" if self.top_p < 1 else "")
            + (f"-topk{self.top_k}" if self.top_k else "")
        )

    def hashed(self) -> dict[str, Any]:
        """What changes the measured distribution (not the seed: another seed is another sample of it)."""
        return {} if self.greedy else {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}

    def params(self, place: int) -> dict[str, Any]:
        """SamplingParams' keywords for the request at `place` in the round (its seed: seed + place)."""
        if self.greedy:
            return {"temperature": 0.0}
        return {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k, "seed": self.seed + place}


GREEDY = Sampling()


class Scenario(Record):
    model_config = ConfigDict(frozen=True)

    profile: Slug
    model: Model
    method: Method
    batch_size: BatchSize
    dataset: Slug
    num_requests: Requests
    output_len: OutputLen
    rounds: Rounds
    warmup: Warmup = 1
    seed: int = 42
    batching: str = "replicate"
    engine_args: dict[str, Any] = Field(default_factory=dict)
    tolerances: dict[str, Tolerance] = Field(default_factory=dict)
    informational: list[str] = Field(default_factory=list)  # judged and shown, never failing the case
    sampling: Sampling = GREEDY  # how requests draw tokens; greedy by default
    paired_reference: bool = False  # the no-SD engine runs beside the SD one, rounds alternating
    gate_tolerance: Tolerance = GATE_TOLERANCE
    gate_instances: GateEngines = 1  # paired engines per side, side by side (run/measurement.py)
    gate_engine_sets: GateEngines = 1  # sets of fresh engines the pairs are split over
    # SD of the offset between fresh engines, a prior (judge/paired.py)
    gate_engine_offset: EngineOffset = 0.0
    gate_blocks: Rounds | None = None  # paired runs: blocks of this many rounds, one engine alive
    trace: bool = False  # per-step acceptance and step times (run/tracing/trace.py)
    selection: str = "hash"  # which records the sample takes (workloads/sampling.py)
    prompt_form: str = "token_ids"  # how a request reaches the engine (workloads/prompts.py prompt_ids)
    mode: str = OFFLINE  # offline: LLM.generate in rounds of calls; serve: a server under streamed requests
    concurrency: Concurrency | None = None  # serve: requests in flight at most (run/serving/load.py)
    request_rate: RequestRate | None = None  # serve: per second, Poisson
    chat: bool | None = None  # chat template on the prompts; None: the workload's default
    env: dict[str, str] = Field(
        default_factory=dict
    )  # engine process environment, over run.engines.engine.default_env()
    vllm: str | None = None  # the vLLM its reference figures came from
    checkpoints: dict[str, str] = Field(default_factory=dict)  # builtin ref -> its recipe's version (a folder name)
    hash: str = ""  # the content hash; computed when not given

    @model_validator(mode="wrap")
    @classmethod
    def _derived_agree(cls, data: Any, handler: ModelWrapValidatorHandler[Scenario]) -> Scenario:
        """A stored scenario also holds its id and its reference's id; they must follow from the rest."""
        stored = {k: data[k] for k in DERIVED if k in data} if isinstance(data, dict) else {}
        scenario = handler({k: v for k, v in data.items() if k not in DERIVED} if stored else data)
        for name, value in stored.items():
            if value != getattr(scenario, name):
                raise ValueError(
                    f"{name} {value!r} does not follow from the scenario's fields ({getattr(scenario, name)!r})"
                )
        return scenario

    @model_validator(mode="after")
    def _mode_fits(self) -> Scenario:
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.serves and (self.concurrency is None or self.concurrency < 1 or self.trace):
            raise ValueError("a serve scenario needs a concurrency of 1 or more, and is not traced")
        if not self.serves and (self.concurrency is not None or self.request_rate is not None):
            raise ValueError("concurrency and request_rate are serve settings")
        return self

    @model_validator(mode="after")
    def _fill_hash(self) -> Scenario:
        if not self.hash:
            self.__dict__["hash"] = self._content_hash()  # frozen: set once, while being built
        return self

    def replace(self, **changes: Any) -> Scenario:
        """A copy with `changes`, validated, its content hash computed anew."""
        return Scenario.model_validate({**dict(self), "hash": "", **changes})

    @computed_field  # type: ignore[prop-decorator]
    @property
    def id(self) -> str:
        return self._id(self.method.label)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reference_id(self) -> str:
        """Id of the no-SD scenario this one's speedup and lossless check are measured against."""
        return self._id(NO_SD_LABEL)

    @property
    def is_reference(self) -> bool:
        return self.method.is_reference

    @property
    def prompt_replicas(self) -> int:
        """Consecutive requests of a round that share one prompt: an offline call's batch, where it
        replicates one prompt (the study's); else 1."""
        return self.batch_size if self.batching == "replicate" and not self.serves else 1

    @property
    def serves(self) -> bool:
        """Measured behind vLLM's OpenAI-compatible server (run/serving/served.py), not with LLM.generate."""
        return self.mode == SERVE

    def _id(self, method_label: str) -> str:
        sampled = self.sampling.label()
        if self.serves:  # concurrency (and arrival rate) instead of a batch size
            rate = f"-r{self.request_rate:g}" if self.request_rate else ""
            return f"{self.model.name}-{method_label}-c{self.concurrency}{rate}-{self.dataset}{sampled}-serve"
        # The study's batches replicate one prompt; batches of distinct prompts say so in the id.
        # A traced scenario is another measurement (tracing costs throughput), with baselines of its own.
        suffix = ("" if self.batching == "replicate" else f"-{self.batching}") + ("-traced" if self.trace else "")
        return f"{self.model.name}-{method_label}-bs{self.batch_size}-{self.dataset}{sampled}{suffix}"

    @property
    def engine_key(self) -> str:
        """Scenarios with the same key share one engine (batch size and dataset may differ).

        A builtin checkpoint is keyed by its recipe version too, so a changed recipe changes the
        scenario hash and never compares with a baseline of the old one."""
        named = (self.model.path, self.model.tokenizer, self.method.params.get("model"))
        key: dict[str, Any] = {
            "checkpoints": sorted(version for ref, version in self.checkpoints.items() if ref in named),
            "model": self.model.path,
            "tokenizer": self.model.tokenizer,
            "tp": self.model.tp,
            "speculative_config": self.method.speculative_config(),
            "engine_args": self.engine_args,
            "seed": self.seed,
        }
        if self.env:
            key["env"] = self.env
        if self.serves:
            key["mode"] = SERVE  # a server, shared by the key's concurrencies and workloads
        if not self.sampling.greedy and self.method.speculative_config():
            key["request_metrics"] = True  # counts each request's acceptance: greedy engines do not pay for it
        return canonical({**key, "trace": True} if self.trace else key)

    def _content_hash(self) -> str:
        """Hash of everything that changes what is measured; a baseline only compares under the same hash.

        Rounds, warm-up and tolerances change how much and how strictly, not what, so they are left out;
        so are the gate_* settings (how a paired run spreads its rounds over engines, how strictly it
        judges them), which change no round.
        Prompt and sampling settings at their defaults are left out too, so adding one kept the hashes
        of the rest.
        """
        prompts: dict[str, Any] = {"selection": self.selection} if self.selection != "hash" else {}
        if self.prompt_form != "token_ids":
            prompts["prompt_form"] = self.prompt_form
        prompts.update({k: v for k, v in (("chat", self.chat), ("thinking", self.model.thinking)) if v is not None})
        if self.serves:  # offline scenarios keep the hashes they had before the serving mode
            prompts.update(concurrency=self.concurrency, request_rate=self.request_rate)
        if not self.sampling.greedy:  # greedy scenarios keep theirs
            prompts["sampling"] = self.sampling.hashed()
        return hashlib.sha256(
            canonical(
                {
                    "engine": json.loads(self.engine_key),
                    "batch_size": self.batch_size,
                    "dataset": self.dataset,
                    "num_requests": self.num_requests,
                    "output_len": self.output_len,
                    "batching": self.batching,
                    **prompts,
                }
            ).encode()
        ).hexdigest()[:16]
