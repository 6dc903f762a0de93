"""The suite's scenarios as pytest items: their marks, which of them run (the references they need,
this shard's share) and in what order."""

from __future__ import annotations

import re

import pytest

from ..options import options
from ..profiles.registry import method_marker
from ..profiles.scenarios import Profile, Scenario

PLANNED_KEY = pytest.StashKey[tuple[Scenario, ...]]()

SCENARIO_PROPERTY = "specperf_scenario"
NODE_PARAM = re.compile(r"\[(.+)\](@[^\]]*)?$")  # a test's parameter id; loadgroup appends "@" and the group
VERDICT_PROPERTY = "verdict"  # a measured scenario's verdict status, as its test case records it


def model_marker(model_name: str) -> str:
    return "model_" + "".join(c if c.isalnum() else "_" for c in model_name)


def worker_group(scenario: Scenario) -> str:
    """Scenarios that must share a pytest-xdist worker: one model's, offline or served (an SD
    scenario's no-SD reference is of the same model and mode), so each engine starts once.  SD
    scenarios paired with their reference (`paired_reference`) start its engine beside their own and
    need no result of it: each SD engine's form a group of their own, which another worker may take."""
    paired = scenario.paired_reference and not scenario.is_reference
    return scenario.model.name + (f"-{scenario.method.label}" if paired else "") + ("-serve" if scenario.serves else "")


def marks(scenario: Scenario, profile: Profile) -> list:
    marks = [
        getattr(pytest.mark, method_marker(scenario.method.name)),
        getattr(pytest.mark, scenario.dataset),
        getattr(pytest.mark, model_marker(scenario.model.name)),
        pytest.mark.xdist_group(worker_group(scenario)),
    ]
    if scenario.serves:
        marks.append(pytest.mark.serve)
    if profile.tier == "gpu":
        marks.append(pytest.mark.requires_gpu(min_class=profile.requires_gpu, count=scenario.model.tp))
    return marks


def scenario_of(item) -> Scenario | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("specperf_scenario") if callspec else None


def scenarios_of_ids(profile: Profile, node_ids) -> list[Scenario]:
    """The profile's scenarios among pytest node ids (`...::test_scenario[<scenario id>]`, with
    `@<group>` after it under --dist loadgroup): what an xdist worker collected, as the controller hears it."""
    by_id = {s.id: s for s in profile.scenarios}
    params = (match.group(1) for node_id in node_ids if (match := NODE_PARAM.search(node_id)))
    return [by_id[param] for param in params if param in by_id]


def order_scenarios(config, everything: list, selected: list) -> list:
    """The items to run: the selected ones, the references their SD scenarios need, this shard's
    share only, references first and each engine key as one block (others keep their place first)."""
    attached = options(config).serve_url is not None
    if attached:
        selected = only_served(config, selected)
    chosen = {id(item) for item in selected}
    by_id = {s.id: item for item in everything if (s := scenario_of(item)) is not None}
    # a running server is one build of one method: no no-SD server beside it
    needed = set() if attached else {s.reference_id for item in selected if (s := scenario_of(item)) is not None}
    missing = [by_id[ref] for ref in needed if ref in by_id and id(by_id[ref]) not in chosen]
    perf = [item for item in selected if scenario_of(item) is not None] + missing
    others = [item for item in selected if scenario_of(item) is None]
    position = {id(item): i for i, item in enumerate(everything)}
    first_seen: dict[str, int] = {}
    for item in sorted(perf, key=lambda it: position[id(it)]):
        first_seen.setdefault(scenario_of(item).engine_key, position[id(item)])

    def order(item):
        s = scenario_of(item)
        return (not s.method.is_reference, first_seen[s.engine_key], position[id(item)])

    perf = sorted(this_shard(config, perf), key=order)
    # an xdist worker parses the command line itself (-n alone: "load"); the controller says loadgroup
    if config.getoption("dist", "no") == "loadgroup" or getattr(config, "workerinput", {}).get("specperf_loadgroup"):
        from .profile import chosen_profile

        perf = longest_group_first(perf, chosen_profile(config).tier)
    config.stash[PLANNED_KEY] = tuple(scenario_of(item) for item in perf)
    return others + perf


def longest_group_first(perf: list, tier: str) -> list:
    """Worker groups by their cost (analysis/cost.py's default model, and the checkpoints they
    would build first: a fresh machine builds the SmolLM2 draft for a minute), the most expensive
    first, each keeping its order: xdist hands groups out in this order (the plugin turns its
    reordering by test count off), so the longest start first and the short ones fill in at the end."""
    from ..analysis.cost import CPU, H100
    from ..plan.progress import builds_left_s
    from ..run.sharding import group_cost

    machine = H100 if tier == "gpu" else CPU
    groups: dict[str, list] = {}
    for item in perf:
        groups.setdefault(worker_group(scenario_of(item)), []).append(item)

    def cost(items: list) -> float:
        scenarios = [scenario_of(item) for item in items]
        return group_cost(scenarios, machine) + sum(builds_left_s(scenarios).values())

    return [item for items in sorted(groups.values(), key=cost, reverse=True) for item in items]


def only_served(config, selected: list) -> list:
    """With --serve-url, the serve scenarios only: an offline one has no server to measure on."""
    offline = [item for item in selected if (s := scenario_of(item)) is not None and not s.serves]
    if offline:
        config.hook.pytest_deselected(items=offline)
    return [item for item in selected if item not in offline]


def this_shard(config, perf: list) -> list:
    """With --shard I/N, only this machine's share of the selected scenarios; the rest is deselected."""
    if options(config).shard is None:
        return perf
    from ..run.sharding import parse_max_shard_hours, parse_shard, shard

    index, count = parse_shard(options(config).shard)
    hours = options(config).max_shard_hours
    max_s = parse_max_shard_hours(hours) if hours is not None else None
    mine = {s.id for s in shard([scenario_of(item) for item in perf], index, count, max_s)}
    kept = [item for item in perf if scenario_of(item).id in mine]
    config.hook.pytest_deselected(items=[item for item in perf if scenario_of(item).id not in mine])
    return kept
