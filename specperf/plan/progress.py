"""The time a run has left, said before each scenario: the planner's cost model (plan/planner.py)
fed with what this run has measured so far.

The planner reads the finished results as its history, so a scenario like one measured already
(the same model, another batch size or workload) is costed from it, and an engine start from the
same model's; where this machine holds a baseline of a scenario, its throughput and speedup count
too (an SD method's speedup is otherwise unknown until the run measures it).  What the model still
misses (the run's own overhead, a machine slower than its default) is corrected by how long the
finished scenarios really took against what the same model says they cost.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..checkpoints import builtin_recipe
from ..history.queries import TimedResult
from ..history.record import cost_fields
from ..judge.baselines import load_baseline
from ..profiles.scenarios import Profile, Scenario
from ..records import Baseline, Metric, ScenarioResult
from ..storage import ResultFileError
from .planner import Planner


def _speeds(scenario: Scenario, metrics: dict[str, Metric], run_id: str) -> TimedResult:
    """A history row of the scenario with its throughput and speedup, nothing measured yet."""
    throughput, speedup = metrics.get("throughput_tok_s"), metrics.get("speedup")
    return TimedResult(
        run_id=run_id,
        run_started_at=None,
        run_finished_at=None,
        scenario_hash=scenario.hash,
        model=scenario.model.name,
        method=scenario.method.label,
        batch_size=scenario.batch_size,
        dataset=scenario.dataset,
        throughput=throughput.value if throughput else None,
        speedup=speedup.value if speedup and not scenario.method.is_reference else None,
        engine_start_s=None,
        warmup_s=None,
        measure_s=None,
        rounds=None,
        output_tokens=None,
    )


def timed_result(result: ScenarioResult, run_id: str = "") -> TimedResult:
    """A finished result as the planner reads the history's."""
    return dataclasses.replace(_speeds(result.scenario, result.metrics, run_id), **cost_fields(result))


def baseline_row(baseline: Baseline, scenario: Scenario) -> TimedResult:
    """A baseline of this machine as a history row: its throughput and speedup, no timings."""
    return _speeds(scenario, baseline.metrics, "baseline")


def baseline_rows(baseline_dir: Path, hardware_key: str, scenarios: Sequence[Scenario]) -> list[TimedResult]:
    """The rows of the scenarios' baselines on this machine (same definition); an unreadable one is
    left out here, and judged where the scenario is."""
    rows = []
    for scenario in scenarios:
        try:
            baseline = load_baseline(baseline_dir, hardware_key, scenario.id)
        except ResultFileError:
            continue
        if baseline is not None and baseline.scenario_hash == scenario.hash:
            rows.append(baseline_row(baseline, scenario))
    return rows


def builds_left_s(scenarios: Sequence[Scenario]) -> dict[str, float]:
    """Of the builtin checkpoints the scenarios load (by ref), those still to build (a fresh machine
    builds the SmolLM2 draft model for a minute or more), with about how long each has left."""
    recipes = {ref: recipe for s in scenarios for ref in s.checkpoints if (recipe := builtin_recipe(ref))}
    left = {ref: recipe.build_s_left() for ref, recipe in recipes.items()}
    return {ref: seconds for ref, seconds in left.items() if seconds > 0}


def modelled_s(
    planner: Planner, scenarios: Sequence[Scenario], alive: str | None = None, builds: Mapping[str, float] = {}
) -> float:
    """What `scenarios` cost by the planner: each one's warm-up, rounds and overhead, one engine
    start per engine key but `alive`'s (the engine already up), and what is left of the `builds`
    (builds_left_s) of the checkpoints they load, each once."""
    by_key: dict[str, list[Scenario]] = {}
    for scenario in scenarios:
        by_key.setdefault(scenario.engine_key, []).append(scenario)
    starts = math.fsum(planner.engine_start(group).value for key, group in by_key.items() if key != alive)
    loaded = {ref for s in scenarios for ref in s.checkpoints}
    return (
        starts
        + math.fsum(builds.get(ref, 0.0) for ref in loaded)
        + math.fsum(planner.estimate(s).seconds for s in scenarios)
    )


def time_left_s(
    profile: Profile,
    planned: Sequence[Scenario],
    known: Sequence[TimedResult],
    finished: Sequence[ScenarioResult],
    measured: Sequence[ScenarioResult],
    elapsed_s: float,
    builds: Mapping[str, float] = {},
) -> float | None:
    """Seconds left for the `planned` scenarios not among `finished` (the run's results, kept by
    --resume or measured), after `elapsed_s` of this run; `known`: rows from before the run
    (baseline_rows).  Only the `measured` ones, in the order they finished, took `elapsed_s`;
    `builds`: the checkpoint builds still to come (builds_left_s).  None before any."""
    if not measured or elapsed_s <= 0:
        return None
    planner = Planner(profile, [*known, *(timed_result(r) for r in finished if r.ok)])
    done = {r.id for r in finished}
    left = [s for s in planned if s.id not in done]
    took = modelled_s(planner, [r.scenario for r in measured])
    still = modelled_s(planner, left, alive=measured[-1].scenario.engine_key, builds=builds)
    return still * elapsed_s / took if took > 0 else None


def parallel_time_left_s(
    profile: Profile,
    planned: Sequence[Scenario],
    known: Sequence[TimedResult],
    finished: Sequence[ScenarioResult],
    elapsed_s: float,
    workers: int,
    group_of: Callable[[Scenario], str],
    reporting: int | None = None,
    builds: Mapping[str, float] = {},
) -> float | None:
    """Seconds left for a run on `workers` pytest-xdist workers, after `finished` (in the order they
    finished) took `elapsed_s` of it.  A group (`group_of`: the scenarios one worker runs) never
    splits, so the time left is the larger of the work left per worker and the longest group left.
    The model's seconds are scaled by what the finished ones took themselves (engine start, warm-up,
    rounds) against what the model says: the run's elapsed time would also count the scenarios the
    workers are in the middle of.  Of the workers, `reporting` have finished a scenario (default
    all); each silent one has spent `elapsed_s` on the next group not yet seen, in planned order.
    `builds`: the checkpoint builds still to come (builds_left_s).  None before any."""
    if not finished or elapsed_s <= 0:
        return None
    planner = Planner(profile, [*known, *(timed_result(r) for r in finished if r.ok)])
    took = modelled_s(planner, [r.scenario for r in finished])
    if took <= 0:
        return None
    alive = {group_of(r.scenario): r.scenario.engine_key for r in finished}  # each group's engine up now
    done = {r.id for r in finished}
    left: dict[str, list[Scenario]] = {}
    for scenario in planned:
        if scenario.id not in done:
            left.setdefault(group_of(scenario), []).append(scenario)
    reporting = workers if reporting is None else max(1, min(reporting, workers))
    own = math.fsum(r.timings.engine_start_s + r.timings.warmup_s + r.timings.measure_s for r in finished)
    if own <= 0:  # none of them got as far as an engine: nothing to scale by
        return None
    scale = own / took
    silent = workers - reporting
    groups = []
    for group, members in left.items():
        seconds = modelled_s(planner, members, alive=alive.get(group), builds=builds) * scale
        if group not in alive and silent > 0:  # a silent worker's, running since the start
            seconds, silent = max(0.0, seconds - elapsed_s), silent - 1
        groups.append(seconds)
    return max(math.fsum(groups) / workers, max(groups, default=0.0))
