"""Scenario profiles: TOML files in fixtures/scenarios/ expanded into frozen Scenario records.

A profile declares models, SD methods and cells (the format: schema.py and
docs/profile-format.md); each cell is the cross product model x methods x batch sizes x
datasets.  The no-SD reference of every (model, batch size, dataset) is added automatically,
because speedup needs it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import paths
from .checkpoints import BUILTIN_PREFIX, checkpoint_path, is_builtin
from .registry import NO_SD, NO_SD_LABEL
from .schema import CellTable, ProfileFile, check_slug, problem


class ProfileError(Exception):
    """A malformed profile; the message is one line naming the file and the field."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Method:
    """An SD method as vLLM's speculative_config sees it; name "none" means no SD."""

    label: str  # the profile's key, used in scenario ids ("eagle3-k3")
    name: str  # vLLM's method ("eagle3"), or "none"
    params: dict = field(default_factory=dict)  # the rest of speculative_config

    @property
    def is_reference(self) -> bool:
        return self.name == NO_SD

    def speculative_config(self) -> dict | None:
        if self.is_reference:
            return None
        return {"method": self.name, **self.params}


REFERENCE_METHOD = Method(label=NO_SD_LABEL, name=NO_SD)


def _builtin_versions(*refs) -> list[str]:
    return [
        checkpoint_path(ref[len(BUILTIN_PREFIX) :]).name for ref in refs if isinstance(ref, str) and is_builtin(ref)
    ]


@dataclass(frozen=True)
class Model:
    name: str
    path: str
    tokenizer: str | None = None
    tp: int = 1
    thinking: bool | None = None  # enable_thinking for the chat template; None: the template's default


@dataclass(frozen=True)
class Scenario:
    profile: str
    model: Model
    method: Method
    batch_size: int
    dataset: str
    num_requests: int
    output_len: int
    rounds: int
    warmup: int
    seed: int
    batching: str
    engine_args: dict
    tolerances: dict
    informational: tuple = ()  # metrics judged and shown, whose regression does not fail the case
    paired_reference: bool = False  # the no-SD engine runs beside the SD one, rounds alternating
    gate_tolerance: float = 0.03  # paired speed changes within this never regress (judge/paired.py)
    gate_instances: int = 1  # paired engines per side, side by side (run/measurement.py)
    gate_engine_sets: int = 1  # sets of fresh engines the pairs are split over (run/measurement.py)
    gate_engine_offset: float = 0.0  # least SD of the offset between fresh engines (judge/paired.py)
    trace: bool = False  # per-step acceptance and step times (run/tracing.py)
    selection: str = "hash"  # which records the sample takes (workloads/sampling.py)
    chat: bool | None = None  # chat template on the prompts; None: the workload's default
    env: dict = field(default_factory=dict)  # engine process environment, over run.engine.default_env()
    vllm: str | None = field(default=None, compare=False)  # the vLLM its reference figures came from

    @property
    def id(self) -> str:
        return self._id(self.method.label)

    @property
    def reference_id(self) -> str:
        """Id of the no-SD scenario this one's speedup and lossless check are measured against."""
        return self._id(NO_SD_LABEL)

    def _id(self, method_label: str) -> str:
        # The study's batches replicate one prompt; batches of distinct prompts say so in the id.
        # A traced scenario is another measurement (tracing costs throughput), with baselines of its own.
        suffix = ("" if self.batching == "replicate" else f"-{self.batching}") + ("-traced" if self.trace else "")
        return f"{self.model.name}-{method_label}-bs{self.batch_size}-{self.dataset}{suffix}"

    @property
    def engine_key(self) -> str:
        """Scenarios with the same key share one engine (batch size and dataset may differ).

        A builtin checkpoint ("builtin:NAME") is keyed by its recipe version too, so a changed
        recipe changes the scenario hash and never compares with a baseline of the old one."""
        key = {
            "checkpoints": sorted(
                _builtin_versions(self.model.path, self.model.tokenizer, self.method.params.get("model"))
            ),
            "model": self.model.path,
            "tokenizer": self.model.tokenizer,
            "tp": self.model.tp,
            "speculative_config": self.method.speculative_config(),
            "engine_args": self.engine_args,
            "seed": self.seed,
        }
        if self.env:
            key["env"] = self.env
        return _canonical({**key, "trace": True} if self.trace else key)

    @property
    def content_hash(self) -> str:
        """Hash of everything that changes what is measured; a baseline only compares under the same hash.

        Rounds, warm-up and tolerances change how much and how strictly, not what, so they are left out.
        Prompt settings at their defaults are left out too, so adding one kept the hashes of the rest.
        """
        prompts = {"selection": self.selection} if self.selection != "hash" else {}
        prompts.update({k: v for k, v in (("chat", self.chat), ("thinking", self.model.thinking)) if v is not None})
        return hashlib.sha256(
            _canonical(
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

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "hash": self.content_hash,
            "profile": self.profile,
            "model": {
                "name": self.model.name,
                "path": self.model.path,
                "tokenizer": self.model.tokenizer,
                "tp": self.model.tp,
                "thinking": self.model.thinking,
            },
            "method": {"label": self.method.label, "name": self.method.name, "params": self.method.params},
            "batch_size": self.batch_size,
            "dataset": self.dataset,
            "num_requests": self.num_requests,
            "output_len": self.output_len,
            "rounds": self.rounds,
            "warmup": self.warmup,
            "seed": self.seed,
            "batching": self.batching,
            "engine_args": self.engine_args,
            "tolerances": self.tolerances,
            "informational": list(self.informational),
            "reference_id": self.reference_id,
            "paired_reference": self.paired_reference,
            "gate_tolerance": self.gate_tolerance,
            "gate_instances": self.gate_instances,
            "gate_engine_sets": self.gate_engine_sets,
            "gate_engine_offset": self.gate_engine_offset,
            "trace": self.trace,
            "selection": self.selection,
            "chat": self.chat,
            "env": self.env,
            "vllm": self.vllm,
        }


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    tier: str
    scenarios: tuple[Scenario, ...]
    requires_gpu: str | None = None  # oldest GPU class that may run the GPU tier, e.g. "H100"


def traced(profile: Profile) -> Profile:
    """The profile with every scenario traced (`--sd-trace`); one that was traced already and its
    untraced twin become one."""
    scenarios = {s.id: s for s in (dataclasses.replace(s, trace=True) for s in profile.scenarios)}
    return dataclasses.replace(profile, scenarios=tuple(scenarios.values()))


def profile_path(name_or_path: str) -> Path:
    """A profile name ("cpu-smoke") resolves in fixtures/scenarios/; anything with a suffix is a path."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml":
        return candidate
    return paths.profile_dir() / f"{name_or_path}.toml"


def available_profiles() -> list[str]:
    return sorted(p.stem for p in paths.profile_dir().glob("*.toml"))


def load_profile(name_or_path: str) -> Profile:
    path = profile_path(name_or_path)
    if not path.is_file():
        raise ProfileError(f"{path}: no such profile (available: {', '.join(available_profiles())})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ProfileError(f"{path}: not valid TOML: {err}") from None
    except RecursionError:
        raise ProfileError(f"{path}: not valid TOML: nested too deeply") from None
    try:
        spec = ProfileFile.model_validate(data)
    except ValidationError as err:
        raise ProfileError(f"{path}: {problem(err)}") from None
    name = spec.profile.name
    if name is None:
        try:
            name = check_slug(path.stem)
        except ValueError as err:
            raise ProfileError(f"{path}: profile.name: {err}") from None
    return Profile(
        name=name,
        path=path,
        description=spec.profile.description,
        tier=spec.profile.tier,
        scenarios=_scenarios(name, spec, path),
        requires_gpu=spec.profile.requires_gpu,
    )


def _scenarios(profile: str, spec: ProfileFile, path: Path) -> tuple[Scenario, ...]:
    """Every cell's scenarios in order, with the no-SD reference first; a scenario declared by
    two cells must have the same settings in both."""
    scenarios: dict[str, Scenario] = {}
    for index, cell in enumerate(spec.cells):
        for scenario in _expand(profile, spec, cell):
            known = scenarios.get(scenario.id)
            if known is not None and known != scenario:
                raise ProfileError(
                    f"{path}: cells[{index}]: scenario {scenario.id} is declared twice with different settings"
                )
            scenarios.setdefault(scenario.id, scenario)  # a reference keeps its first cell's `vllm`
    return tuple(scenarios.values())


def _expand(profile: str, spec: ProfileFile, cell: CellTable) -> Iterator[Scenario]:
    """The cross product model x methods x batch sizes x datasets; unset cell settings come from
    [profile], tables of both are merged."""
    settings = spec.profile
    model = spec.models[cell.model]
    methods = spec.methods_of(cell.model)

    def setting(key: str) -> Any:
        value = getattr(cell, key)
        return getattr(settings, key) if value is None else value

    common = dict(
        profile=profile,
        model=Model(name=cell.model, path=model.path, tokenizer=model.tokenizer, tp=model.tp, thinking=model.thinking),
        num_requests=setting("num_requests"),
        output_len=setting("output_len"),
        rounds=setting("rounds"),
        warmup=settings.warmup,
        seed=settings.seed,
        batching=setting("batching"),
        trace=setting("trace"),
        selection=setting("selection"),
        chat=cell.chat,
        env=dict(settings.env),
        vllm=setting("vllm"),
        engine_args={**settings.engine_args, **cell.engine_args},
        tolerances={**settings.tolerances, **cell.tolerances},
        informational=tuple(settings.informational),
        paired_reference=settings.paired_reference,
        gate_tolerance=settings.gate_tolerance,
        gate_instances=settings.gate_instances,
        gate_engine_sets=settings.gate_engine_sets,
        gate_engine_offset=settings.gate_engine_offset,
    )
    labels = [label for label in cell.methods if label != NO_SD_LABEL]
    ordered = [REFERENCE_METHOD] + [Method(label, methods[label].method, methods[label].params()) for label in labels]
    for method in ordered:
        for batch_size in cell.batch_sizes:
            for dataset in cell.datasets:
                yield Scenario(method=method, batch_size=batch_size, dataset=dataset, **common)
