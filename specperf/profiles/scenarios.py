"""Scenario profiles: TOML files in fixtures/scenarios/ expanded into frozen Scenario records.

A profile declares models, SD methods and cells (the format: schema.py and
docs/profile-format.md); each cell is the cross product model x methods x batch sizes x
datasets.  The no-SD reference of every (model, batch size, dataset) is added automatically,
because speedup needs it.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .. import paths
from ..checkpoints import BUILTIN_PREFIX, checkpoint_path, is_builtin
from ..records.scenario import REFERENCE_METHOD, SERVE, Method, Model, Scenario
from ..schedule import FIELD as SCHEDULE_FIELD
from .fields import check_slug
from .registry import CODE_ARGS, NO_SD_LABEL, code_loading
from .schema import CellTable, ProfileFile, ProfileTable, problem
from .sweeps import with_k

__all__ = ["REFERENCE_METHOD", "Method", "Model", "Profile", "ProfileError", "Scenario", "load_profile", "scenario"]

# Scenario fields a profile sets: from the cell where it says, else from [profile]; tables merge.
EXPANDED = frozenset({"profile", "model", "method", "batch_size", "dataset", "checkpoints", "hash", "concurrency"})
MERGED = ("engine_args", "env", "tolerances", "sampling")


class ProfileError(Exception):
    """A malformed profile; the message is one line naming the file and the field."""


def builtin_versions(*refs: object) -> dict[str, str]:
    """Each builtin checkpoint among `refs` with its recipe's version (a scenario's `checkpoints`)."""
    builtin = [ref for ref in refs if isinstance(ref, str) and is_builtin(ref)]
    return {ref: checkpoint_path(ref[len(BUILTIN_PREFIX) :]).name for ref in builtin}


def scenario(**fields) -> Scenario:
    """A Scenario with the recipe versions of the builtin checkpoints it names filled in."""
    model, method = fields["model"], fields["method"]
    return Scenario(checkpoints=builtin_versions(model.path, model.tokenizer, method.params.get("model")), **fields)


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    tier: str
    scenarios: tuple[Scenario, ...]
    requires_gpu: str | None = None  # oldest GPU class that may run the GPU tier, e.g. "H100"


def traced(profile: Profile) -> Profile:
    """The profile with every offline scenario traced (`--sd-trace`: a served one is not traced); one
    that was traced already and its untraced twin become one."""
    scenarios = {s.id: s for s in (s if s.serves else s.replace(trace=True) for s in profile.scenarios)}
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
    if not spec.profile.allow_code and (found := _loads_code(spec)):
        raise ProfileError(
            f"{path}: {found}: loads code into the engines: allow it with allow_code = true in [profile]"
        )
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


def _loads_code(spec: ProfileFile) -> str | None:
    """The first engine argument or variable of the profile that loads code (a checkpoint's own, a
    worker class, a preloaded library), as a field path; None where none does."""
    tables = [("profile", spec.profile)] + [(f"cells[{i}]", cell) for i, cell in enumerate(spec.cells)]
    for where, table in tables:
        for name in code_loading(table.engine_args, table.env):
            return f"{where}.{'engine_args' if name in CODE_ARGS else 'env'}.{name}"
    return None


def _scenarios(profile: str, spec: ProfileFile, path: Path) -> tuple[Scenario, ...]:
    """Every cell's scenarios in order, with the no-SD reference first; a scenario declared by
    two cells must have the same settings in both."""
    scenarios: dict[str, Scenario] = {}
    for index, cell in enumerate(spec.cells):
        for scenario in _expand(profile, spec, cell):
            known = scenarios.get(scenario.id)
            if known is not None and known.replace(vllm=scenario.vllm) != scenario:
                raise ProfileError(
                    f"{path}: cells[{index}]: scenario {scenario.id} is declared twice with different settings"
                )
            scenarios.setdefault(scenario.id, scenario)  # a reference keeps its first cell's `vllm`
    return tuple(scenarios.values())


def _expand(profile: str, spec: ProfileFile, cell: CellTable) -> Iterator[Scenario]:
    """The cross product model x methods x batch sizes x datasets; unset cell settings come from
    [profile], tables of both are merged."""
    model = spec.models[cell.model]
    methods = spec.methods_of(cell.model)
    common = {
        "profile": profile,
        "model": Model(
            name=cell.model, path=model.path, tokenizer=model.tokenizer, tp=model.tp, thinking=model.thinking
        ),
        **settings(spec.profile, cell),
    }
    labels = [label for label in cell.methods if label != NO_SD_LABEL]
    ordered = [REFERENCE_METHOD] + [
        Method(label=label, name=methods[label].method, params=methods[label].params()) for label in labels
    ]
    sweep = cell.num_speculative_tokens is not None  # each k its own method, paired with its no-SD reference
    if sweep:
        ordered = [REFERENCE_METHOD] + [with_k(m, k) for m in ordered[1:] for k in cell.num_speculative_tokens]
    if common["mode"] == SERVE:  # one request per call; the server is never traced
        loads = [{"batch_size": 1, "concurrency": c, "trace": False} for c in cell.concurrencies or ()]
    else:
        loads = [{"batch_size": b} for b in cell.batch_sizes or ()]
    for method in ordered:
        # a sweep's k and a schedule are judged by their speedup's interval: rounds alternate with no-SD's
        dynamic = SCHEDULE_FIELD in method.params
        paired = {"paired_reference": True} if not method.is_reference and (sweep or dynamic) else {}
        for load in loads:
            for dataset in cell.datasets:
                yield scenario(method=method, dataset=dataset, **{**common, **load, **paired})


def settings(profile: ProfileTable, cell: CellTable) -> dict:
    """Every Scenario field a profile sets, for one cell: the cell's value where it gives one, else
    [profile]'s; engine_args, env, tolerances and sampling are [profile]'s updated by the cell's."""
    values = {}
    for name in Scenario.model_fields.keys() - EXPANDED:
        of_cell = getattr(cell, name, None)
        of_profile = getattr(profile, name, None)
        if name in MERGED:
            values[name] = {**of_profile, **of_cell}
        elif of_cell is not None:
            values[name] = of_cell
        elif of_profile is not None:
            values[name] = of_profile
    return values
