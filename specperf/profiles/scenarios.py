"""Scenario profiles: TOML files in fixtures/scenarios/ expanded into frozen Scenario records.

A profile declares models, SD methods and cells; each cell is the cross product
model x methods x batch sizes x datasets.  The no-SD reference of every
(model, batch size, dataset) is added automatically, because speedup needs it.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checkpoints import BUILTIN_PREFIX, BUILTINS, checkpoint_path, is_builtin
from ..run.gpus import GPU_CLASSES
from ..judge.metrics import METRICS

PROFILE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"
NO_SD = "none"
NO_SD_LABEL = "nosd"
BATCHING_MODES = ("replicate", "distinct")
TIERS = ("cpu", "gpu")
# The speculative methods this suite measures (each a pytest marker); whether the installed vLLM
# runs one is checked when its engine starts.
SD_METHODS = ("ngram", "eagle", "eagle3", "draft_model", "mtp", "suffix")
WORKLOAD_NAMES = ("cnn_dailymail", "sharegpt", "instructcoder", "gsm8k", "aime", "gpqa")

_PROFILE_KEYS = {
    "name", "description", "tier", "rounds", "warmup", "seed", "num_requests", "output_len",
    "batching", "engine_args", "tolerances", "informational", "requires_gpu",
}
_MODEL_KEYS = {"path", "tokenizer", "tp", "methods"}
_CELL_KEYS = {
    "model", "methods", "batch_sizes", "datasets", "num_requests", "output_len", "rounds",
    "batching", "engine_args", "tolerances",
}
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class ProfileError(Exception):
    """A malformed profile; the message is one line naming the file and the field."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Method:
    """An SD method as vLLM's speculative_config sees it; name "none" means no SD."""

    label: str                    # the profile's key, used in scenario ids ("eagle3-k3")
    name: str                     # vLLM's method ("eagle3"), or "none"
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
    return [checkpoint_path(ref[len(BUILTIN_PREFIX):]).name
            for ref in refs if isinstance(ref, str) and is_builtin(ref)]


@dataclass(frozen=True)
class Model:
    name: str
    path: str
    tokenizer: str | None = None
    tp: int = 1


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
    informational: tuple = ()     # metrics judged and shown, whose regression does not fail the case

    @property
    def id(self) -> str:
        return self._id(self.method.label)

    @property
    def reference_id(self) -> str:
        """Id of the no-SD scenario this one's speedup and lossless check are measured against."""
        return self._id(NO_SD_LABEL)

    def _id(self, method_label: str) -> str:
        # The study's batches replicate one prompt; batches of distinct prompts say so in the id.
        suffix = "" if self.batching == "replicate" else f"-{self.batching}"
        return f"{self.model.name}-{method_label}-bs{self.batch_size}-{self.dataset}{suffix}"

    @property
    def engine_key(self) -> str:
        """Scenarios with the same key share one engine (batch size and dataset may differ).

        A builtin checkpoint ("builtin:NAME") is keyed by its recipe version too, so a changed
        recipe changes the scenario hash and never compares with a baseline of the old one."""
        return _canonical({
            "checkpoints": sorted(_builtin_versions(self.model.path, self.model.tokenizer,
                                                    self.method.params.get("model"))),
            "model": self.model.path, "tokenizer": self.model.tokenizer, "tp": self.model.tp,
            "speculative_config": self.method.speculative_config(),
            "engine_args": self.engine_args, "seed": self.seed,
        })

    @property
    def content_hash(self) -> str:
        """Hash of everything that changes what is measured; a baseline only compares under the same hash.

        Rounds, warm-up and tolerances change how much and how strictly, not what, so they are left out.
        """
        return hashlib.sha256(_canonical({
            "engine": json.loads(self.engine_key), "batch_size": self.batch_size,
            "dataset": self.dataset, "num_requests": self.num_requests,
            "output_len": self.output_len, "batching": self.batching,
        }).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {
            "id": self.id, "hash": self.content_hash, "profile": self.profile,
            "model": {"name": self.model.name, "path": self.model.path,
                      "tokenizer": self.model.tokenizer, "tp": self.model.tp},
            "method": {"label": self.method.label, "name": self.method.name,
                       "params": self.method.params},
            "batch_size": self.batch_size, "dataset": self.dataset,
            "num_requests": self.num_requests, "output_len": self.output_len,
            "rounds": self.rounds, "warmup": self.warmup, "seed": self.seed,
            "batching": self.batching, "engine_args": self.engine_args,
            "tolerances": self.tolerances, "informational": list(self.informational),
            "reference_id": self.reference_id,
        }


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    tier: str
    scenarios: tuple[Scenario, ...]
    requires_gpu: str | None = None     # oldest GPU class that may run the GPU tier, e.g. "H100"


def profile_path(name_or_path: str) -> Path:
    """A profile name ("cpu-smoke") resolves in fixtures/scenarios/; anything with a suffix is a path."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml":
        return candidate
    return PROFILE_DIR / f"{name_or_path}.toml"


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def load_profile(name_or_path: str) -> Profile:
    path = profile_path(name_or_path)
    if not path.is_file():
        raise ProfileError(
            f"{path}: no such profile (available: {', '.join(available_profiles())})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ProfileError(f"{path}: not valid TOML: {err}") from None
    return _ProfileReader(path, data).read()


class _ProfileReader:
    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data

    def fail(self, where: str, problem: str) -> ProfileError:
        return ProfileError(f"{self.path}: {where}: {problem}")

    def check_keys(self, table: Any, allowed: set[str], where: str) -> dict:
        if not isinstance(table, dict):
            raise self.fail(where, "must be a table")
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise self.fail(f"{where}.{unknown[0]}", f"unknown field (allowed: {', '.join(sorted(allowed))})")
        return table

    def positive_int(self, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(where, f"must be a positive integer, got {value!r}")
        return value

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(where, f"must be a non-empty string, got {value!r}")
        return value

    def slug(self, value: str, where: str) -> str:
        if not _SLUG.match(value):
            raise self.fail(where, f"{value!r} must be lower-case letters, digits, '.', '_' or '-'")
        return value

    def checkpoint(self, value: Any, where: str) -> str:
        """A hub id, a local path, or builtin:NAME naming one of the suite's own checkpoints."""
        ref = self.string(value, where)
        if is_builtin(ref) and ref[len(BUILTIN_PREFIX):] not in BUILTINS:
            raise self.fail(where, f"unknown builtin checkpoint {ref!r} (known: {', '.join(sorted(BUILTINS))})")
        if ref.startswith(("/", "./", "../", "~")) and not Path(ref).expanduser().exists():
            raise self.fail(where, f"no such local checkpoint {ref!r}")
        return ref

    def string_list(self, value: Any, where: str) -> list[str]:
        if not isinstance(value, list) or not value:
            raise self.fail(where, "must be a non-empty list")
        return [self.string(v, f"{where}[{i}]") for i, v in enumerate(value)]

    def read(self) -> Profile:
        top = self.check_keys(self.data, {"profile", "models", "methods", "cells"}, "file")
        settings = self.check_keys(top.get("profile", {}), _PROFILE_KEYS, "profile")
        name = self.slug(self.string(settings.get("name", self.path.stem), "profile.name"), "profile.name")
        models = self.read_models(top.get("models"))
        shared_methods = self.read_methods(top.get("methods", {}), "methods")
        model_methods = {
            name: {**shared_methods, **self.read_methods(top["models"][name].get("methods", {}),
                                                         f"models.{name}.methods")}
            for name in models
        }
        cells = top.get("cells")
        if not isinstance(cells, list) or not cells:
            raise self.fail("cells", "a profile needs at least one [[cells]] entry")
        scenarios: dict[str, Scenario] = {}
        for index, cell in enumerate(cells):
            for scenario in self.expand(name, settings, models, model_methods, cell, f"cells[{index}]"):
                known = scenarios.get(scenario.id)
                if known is not None and known != scenario:
                    raise self.fail(f"cells[{index}]", f"scenario {scenario.id} is declared twice with different settings")
                scenarios[scenario.id] = scenario
        return Profile(
            name=name, path=self.path,
            description=str(settings.get("description", "")),
            tier=self.tier(settings.get("tier", "gpu")),
            scenarios=tuple(scenarios.values()),
            requires_gpu=self.gpu_class(settings.get("requires_gpu")),
        )

    def tier(self, value: Any) -> str:
        if value not in TIERS:
            raise self.fail("profile.tier", f"must be one of {', '.join(TIERS)}, got {value!r}")
        return value

    def gpu_class(self, value: Any) -> str | None:
        if value is None:
            return None
        if value not in GPU_CLASSES:
            raise self.fail("profile.requires_gpu", f"unknown GPU class {value!r} (known: {', '.join(GPU_CLASSES)})")
        return value

    def read_models(self, table: Any) -> dict[str, Model]:
        if not isinstance(table, dict) or not table:
            raise self.fail("models", "a profile needs at least one [models.NAME] table")
        models = {}
        for name, spec in table.items():
            where = f"models.{name}"
            self.slug(name, where)
            spec = self.check_keys(spec, _MODEL_KEYS, where)
            tokenizer = spec.get("tokenizer")
            models[name] = Model(
                name=name,
                path=self.checkpoint(spec.get("path"), f"{where}.path"),
                tokenizer=None if tokenizer is None else self.checkpoint(tokenizer, f"{where}.tokenizer"),
                tp=self.positive_int(spec.get("tp", 1), f"{where}.tp"),
            )
        return models

    def read_methods(self, table: Any, prefix: str) -> dict[str, Method]:
        """Methods declared at the top level serve every model; a model's own table adds or overrides
        (an EAGLE head belongs to one target, yet its label "eagle3-k3" is the same for all)."""
        if not isinstance(table, dict):
            raise self.fail(prefix, f"must be a table of [{prefix}.LABEL] entries")
        methods = {NO_SD_LABEL: REFERENCE_METHOD}
        for label, spec in table.items():
            where = f"{prefix}.{label}"
            self.slug(label, where)
            if label == NO_SD_LABEL:
                raise self.fail(where, f"{NO_SD_LABEL!r} is the built-in no-SD reference")
            if not isinstance(spec, dict):
                raise self.fail(where, "must be a table")
            params = dict(spec)
            name = self.string(params.pop("method", None), f"{where}.method")
            if name == NO_SD:
                raise self.fail(f"{where}.method", "'none' is the built-in reference; do not declare it")
            if name not in SD_METHODS:
                raise self.fail(f"{where}.method", f"unknown method {name!r} (known: {', '.join(SD_METHODS)})")
            if "model" in params:
                self.checkpoint(params["model"], f"{where}.model")
            k = params.get("num_speculative_tokens")
            self.positive_int(k, f"{where}.num_speculative_tokens")
            methods[label] = Method(label=label, name=name, params=params)
        return methods

    def expand(self, profile: str, settings: dict, models: dict, model_methods: dict, cell: Any, where: str):
        cell = self.check_keys(cell, _CELL_KEYS, where)

        def setting(key: str, default: Any) -> Any:
            return cell.get(key, settings.get(key, default))

        def field_of(key: str) -> str:
            """Where a setting came from, so an error names the field that holds it."""
            return f"{where}.{key}" if key in cell or key not in settings else f"profile.{key}"

        model_name = self.string(cell.get("model"), f"{where}.model")
        if model_name not in models:
            raise self.fail(f"{where}.model", f"unknown model {model_name!r} (declared: {', '.join(models)})")
        methods = model_methods[model_name]
        labels = self.string_list(cell.get("methods"), f"{where}.methods")
        for i, label in enumerate(labels):
            if label not in methods:
                raise self.fail(f"{where}.methods[{i}]", f"unknown method {label!r} (declared: {', '.join(methods)})")
        batch_sizes = cell.get("batch_sizes")
        if not isinstance(batch_sizes, list) or not batch_sizes:
            raise self.fail(f"{where}.batch_sizes", "must be a non-empty list of positive integers")
        batch_sizes = [self.positive_int(b, f"{where}.batch_sizes[{i}]") for i, b in enumerate(batch_sizes)]
        datasets = self.string_list(cell.get("datasets"), f"{where}.datasets")
        for i, dataset in enumerate(datasets):
            if dataset not in WORKLOAD_NAMES:
                raise self.fail(f"{where}.datasets[{i}]", f"unknown dataset {dataset!r} (known: {', '.join(WORKLOAD_NAMES)})")
        batching = setting("batching", "replicate")
        if batching not in BATCHING_MODES:
            raise self.fail(field_of("batching"), f"must be one of {', '.join(BATCHING_MODES)}, got {batching!r}")
        engine_args = {**self.table(settings.get("engine_args", {}), "profile.engine_args"),
                       **self.table(cell.get("engine_args", {}), f"{where}.engine_args")}
        tolerances = {**self.tolerances(settings.get("tolerances", {}), "profile.tolerances"),
                      **self.tolerances(cell.get("tolerances", {}), f"{where}.tolerances")}
        common = dict(
            profile=profile, model=models[model_name],
            num_requests=self.positive_int(setting("num_requests", 8), field_of("num_requests")),
            output_len=self.positive_int(setting("output_len", 128), field_of("output_len")),
            rounds=self.positive_int(setting("rounds", 5), field_of("rounds")),
            warmup=self.non_negative_int(setting("warmup", 1), field_of("warmup")),
            seed=self.non_negative_int(settings.get("seed", 42), "profile.seed"),
            batching=batching, engine_args=engine_args, tolerances=tolerances,
            informational=self.informational(settings.get("informational", []), "profile.informational"),
        )
        ordered_methods = [REFERENCE_METHOD] + [methods[l] for l in labels if l != NO_SD_LABEL]
        for method in ordered_methods:
            for batch_size in batch_sizes:
                for dataset in datasets:
                    yield Scenario(method=method, batch_size=batch_size, dataset=dataset, **common)

    def table(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, "must be a table")
        return dict(value)

    def informational(self, value: Any, where: str) -> tuple:
        """Metric names whose regressions are reported but do not fail a case (e.g. throughput on a
        shared CPU machine, where speed drifts over time more than any tolerance can absorb)."""
        if not isinstance(value, list):
            raise self.fail(where, "must be a list of metric names")
        for i, metric in enumerate(value):
            if metric not in METRICS:
                raise self.fail(f"{where}[{i}]", f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
        return tuple(value)

    def tolerances(self, value: Any, where: str) -> dict:
        """Relative tolerances per metric name, e.g. throughput_tok_s = 0.25."""
        table = self.table(value, where)
        for metric, tolerance in table.items():
            if metric not in METRICS:
                raise self.fail(f"{where}.{metric}", f"unknown metric (known: {', '.join(METRICS)})")
            if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 10:
                raise self.fail(f"{where}.{metric}", f"must be a relative tolerance such as 0.05, got {tolerance!r}")
        return table

    def non_negative_int(self, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(where, f"must be a non-negative integer, got {value!r}")
        return value
