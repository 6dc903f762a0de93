"""Splitting a profile across machines (`--shard I/N`).

The unit of assignment is an SD engine key: all scenarios that share one speculative engine run on
one shard, so that engine starts once.  A whole model would be too coarse a unit: h100-nightly has
two models and six SD engines, so it could use at most two machines and split unevenly.

An SD scenario's speedup and lossless check need its no-SD reference measured in the same run, so
a shard also runs every reference its SD scenarios name (`reference_id`).  A reference may thus run
on several shards; that is deliberate, because a reference is cheap next to the SD engines it
serves.  References that no selected SD scenario needs form units of their own, one per engine key.

With a longest shard (`--max-shard-hours`), a unit that alone costs more is cut into pieces of its
scenarios, in id order, each as long as fits (a piece of one scenario may still cost more), each
with the references its scenarios need and an engine start of its own: a scheduler can place
shards of a few hours where one engine key of a study's largest model runs for days.

Units are placed by greedy longest-processing-time: most expensive first (alone, with its
references), each onto the shard whose load it leaves lowest, a shard paying for a reference (and
its engine start) only the first time it takes it; ties go to the lower shard index.  Units are
ordered by cost, then engine key, so the split depends only on the set of scenarios, never on their
order, and every machine computes the same one.  A shard that gets no unit is empty.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..analysis.cost import H100, Machine, engine_start_default, measuring_s

# The split is by the default cost model on one H100, whatever the tier: every machine computes
# the same split from the scenarios alone, and only the proportions matter.
MACHINE = H100
MAX_SHARDS = 4096  # far beyond any fleet; the split's work grows with the count
MAX_SHARD_HOURS = 8760.0  # a year


def parse_shard(text: str) -> tuple[int, int]:
    """ "2/3" -> (2, 3); the index is 1-based."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if match:
        index, count = int(match.group(1)), int(match.group(2))
        if 1 <= index <= count <= MAX_SHARDS:
            return index, count
    raise ValueError(f"--shard: expected I/N with 1 <= I <= N <= {MAX_SHARDS}, got {text!r}")


def estimated_cost(scenario, machine: Machine = MACHINE) -> float:
    """Measuring time of one scenario (analysis/cost.py's default model), engine start not included."""
    return measuring_s(scenario, machine)


def start_cost(scenario, machine: Machine = MACHINE) -> float:
    """The start of the scenario's engine, paid once per engine key on a shard (kept per engine key:
    a study's split asks for it millions of times)."""
    key = (scenario.engine_key, machine.name)
    if key not in _STARTS:
        _STARTS[key] = engine_start_default(scenario, machine)
    return _STARTS[key]


_STARTS: dict[tuple[str, str], float] = {}


def group_cost(scenarios, machine: Machine = MACHINE) -> float:
    """Cost of running scenarios together: their measurements plus one engine start per engine key."""
    starts = {s.engine_key: start_cost(s, machine) for s in scenarios}
    return math.fsum(estimated_cost(s, machine) for s in scenarios) + math.fsum(starts.values())


@dataclass(frozen=True)
class Unit:
    """What is assigned to one shard: the scenarios of one engine key and the references they need."""

    engine_key: str
    scenarios: tuple  # SD scenarios of one engine key, or references no selected SD scenario needs
    references: tuple  # the no-SD reference scenarios (from the input) that `scenarios` need

    @property
    def cost(self) -> float:
        """Cost on a shard that has none of its references yet."""
        return group_cost(self.scenarios + self.references)


def _by_name(scenarios) -> tuple:
    return tuple(sorted(scenarios, key=lambda s: (s.id, s.engine_key)))


def units(scenarios) -> list[Unit]:
    """The units of a selection, sorted by engine key.

    One unit per engine key of SD scenarios, carrying the references they name that are in the
    input (a missing one is not invented); one per engine key of references that no SD scenario needs."""
    scenarios = list(scenarios)
    references: dict[str, list] = {}
    sd_by_key: dict[str, list] = {}
    for s in scenarios:
        if s.method.is_reference:
            references.setdefault(s.id, []).append(s)
        else:
            sd_by_key.setdefault(s.engine_key, []).append(s)
    result = []
    needed: set[str] = set()
    for key, members in sd_by_key.items():
        wanted = {s.reference_id for s in members} & references.keys()
        needed |= wanted
        result.append(Unit(key, _by_name(members), _by_name(r for rid in wanted for r in references[rid])))
    spare_by_key: dict[str, list] = {}
    for rid in references.keys() - needed:
        for r in references[rid]:
            spare_by_key.setdefault(r.engine_key, []).append(r)
    result += [Unit(key, _by_name(members), ()) for key, members in spare_by_key.items()]
    return sorted(result, key=lambda u: u.engine_key)


def pieces(unit: Unit, max_s: float | None) -> list[Unit]:
    """`unit`, cut where it costs more than `max_s` seconds: its scenarios in order, a piece closed
    when the next scenario would take it past `max_s`, each piece with the references it needs."""
    if max_s is None or unit.cost <= max_s:
        return [unit]
    by_id = {r.id: r for r in unit.references}

    def piece(members: list) -> Unit:
        wanted = {s.reference_id for s in members} & by_id.keys()
        return Unit(unit.engine_key, tuple(members), tuple(r for r in unit.references if r.id in wanted))

    cut: list[Unit] = []
    members: list = []
    for scenario in unit.scenarios:
        if members and piece([*members, scenario]).cost > max_s:
            cut.append(piece(members))
            members = []
        members.append(scenario)
    return [*cut, piece(members)]


class _Shard:
    def __init__(self, keys: dict, costs: dict):
        self.keys, self.costs = keys, costs  # engine key and estimated cost by id() of a scenario
        self.members: set[int] = set()  # id() of the scenario objects it runs
        self.engine_keys: set[str] = set()
        self.load = 0.0

    def added_cost(self, scenarios) -> float:
        new = {id(s): s for s in scenarios if id(s) not in self.members}
        starts = {self.keys[i]: start_cost(s) for i, s in new.items() if self.keys[i] not in self.engine_keys}
        return math.fsum(self.costs[i] for i in new) + math.fsum(starts.values())

    def take(self, scenarios) -> None:
        self.load += self.added_cost(scenarios)
        self.members.update(id(s) for s in scenarios)
        self.engine_keys.update(self.keys[id(s)] for s in scenarios)


def assign(scenarios, count: int, max_s: float | None = None) -> list[list]:
    """All `count` shards (0-based list); each shard keeps the input order of its scenarios.
    max_s: the longest a unit may cost before it is cut into pieces (`--max-shard-hours`, in seconds)."""
    if count < 1:
        raise ValueError(f"shard count must be >= 1, got {count}")
    scenarios = list(scenarios)
    keys = {id(s): s.engine_key for s in scenarios}
    costs = {id(s): estimated_cost(s) for s in scenarios}
    shards = [_Shard(keys, costs) for _ in range(count)]
    cut = [piece for unit in units(scenarios) for piece in pieces(unit, max_s)]
    for unit in sorted(cut, key=lambda u: (-u.cost, u.engine_key)):
        wanted = unit.scenarios + unit.references
        target = min(shards, key=lambda sh: sh.load + sh.added_cost(wanted))  # first of equals: lowest index
        target.take(wanted)
    return [[s for s in scenarios if id(s) in sh.members] for sh in shards]


def shard(scenarios: list, index: int, count: int, max_s: float | None = None) -> list:
    """The scenarios of shard `index` of `count` (1-based, as parse_shard returns), in input order."""
    if not 1 <= index <= count:
        raise ValueError(f"--shard: expected I/N with 1 <= I <= N, got {index}/{count}")
    return assign(list(scenarios), count, max_s)[index - 1]


def parse_max_shard_hours(value: float) -> float:
    """--max-shard-hours in seconds: a positive number of hours, at most a year."""
    if not 0 < value <= MAX_SHARD_HOURS:  # NaN fails this too
        raise ValueError(f"--max-shard-hours: expected hours above 0 and at most {MAX_SHARD_HOURS}, got {value}")
    return value * 3600
