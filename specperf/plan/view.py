"""What `specperf plan` shows: the scenarios a `-k`/`-m` selection runs, and the plan as text."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterable

from ..profiles.scenarios import Profile, Scenario
from .planner import DEFAULT, FITTED, OUTPUT_LEN, Figure
from .shards import Plan


def select(profile: Profile, keyword: str | None = None, marks: str | None = None) -> list[Scenario]:
    """The scenarios `pytest -k/-m` would run: those matching, and the no-SD references they need."""
    from _pytest.mark.expression import Expression

    from ..profiles.registry import method_marker
    from ..suite.selection import model_marker

    def names(s: Scenario) -> set[str]:
        return {method_marker(s.method.name), s.dataset, model_marker(s.model.name)}

    chosen = list(profile.scenarios)
    for option, expression, own in (("-k", keyword, lambda s: names(s) | {s.id}), ("-m", marks, names)):
        if not expression:
            continue
        try:
            compiled = Expression.compile(expression)
        except Exception as err:  # pytest's ParseError (SyntaxError in older releases)
            raise ValueError(f"{option} {expression!r}: {err}") from None
        if option == "-k":
            chosen = [
                s
                for s in chosen
                if compiled.evaluate(lambda sub, s=s, own=own, **_: any(sub.lower() in n.lower() for n in own(s)))
            ]
        else:
            chosen = [s for s in chosen if compiled.evaluate(lambda name, s=s, own=own, **_: name in own(s))]
    needed = {s.reference_id for s in chosen}
    return [s for s in profile.scenarios if s in chosen or (s.method.is_reference and s.id in needed)]


def _counts(figures: Iterable[Figure]) -> str:
    found: dict[str, int] = {}
    for f in figures:
        found[f.source] = found.get(f.source, 0) + 1
    return ", ".join(f"{source} {n}" for source, n in sorted(found.items(), key=lambda kv: -kv[1]))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" + (f" ({seconds / 3600:.1f} h)" if seconds >= 7200 else "")


def plan_lines(plan: Plan, hardware: str, detail: bool = False) -> list[str]:
    """The plan as text: where the figures come from, a table per shard, the total and the GPU schedule."""
    estimates = list({e.scenario.id: e for s in plan.shards for line in s.engines for e in line.scenarios}.values())
    starts = [line.start for s in plan.shards for line in s.engines]
    machine = plan.planner.machine
    scenarios = {e.scenario.id for e in estimates}
    lines = [
        f"plan: {plan.profile.name} ({plan.profile.path}), {len(scenarios)} scenarios; {hardware}",
        f"throughput from: {_counts(e.throughput for e in estimates)}; output tokens from: "
        f"{_counts(e.tokens for e in estimates)}; engine starts from: {_counts(starts)}; overhead per "
        f"scenario {plan.planner.scenario_s.value:.1f} s ({plan.planner.scenario_s.source}), "
        f"per shard {machine.run_s:.0f} s ({DEFAULT})",
    ]
    fitted = {
        e.scenario.model.name: plan.planner.factor(e.scenario.model.name)
        for e in estimates
        if e.throughput.source == FITTED
    }
    for model, (factor, count, own) in sorted(fitted.items()):
        lines.append(
            f"fitted: {model} at {factor:.2f}x the default model's throughput (median of {count} results "
            f"{'of it' if own else 'of other models, none of its own'} in the history)"
        )
    if any(e.tokens.source == OUTPUT_LEN for e in estimates):
        lines.append(
            f"upper bound: {sum(e.tokens.source == OUTPUT_LEN for e in estimates)} scenarios have no "
            "trace of their workload's output length and are assumed to run to output_len"
        )
    keys: dict[str, set[str]] = {}
    for line in (line for s in plan.shards for line in s.engines):
        keys.setdefault(line.label, set()).add(line.engine_key)

    def label(line) -> str:  # engines of one model and method that differ (engine args, vLLM) apart
        shared = len(keys[line.label]) > 1
        return line.label + (f" [{hashlib.sha256(line.engine_key.encode()).hexdigest()[:6]}]" if shared else "")

    width = max((len(label(line)) for s in plan.shards for line in s.engines), default=10) + 2
    run = f"pytest tests_perf --profile {profile_option(plan.profile)}"
    for shard in plan.shards:
        where = f", {shard.gpus} GPU{'s' if shard.gpus > 1 else ''}" if plan.profile.tier == "gpu" else ""
        when = f", starts at {shard.start_at:.1f} min" if plan.gpus is not None and shard.engines else ""
        command = f" ({run} {shard.command})" if shard.command else ""
        lines += [
            "",
            f"shard {shard.index}/{len(plan.shards)}{command}: {shard.scenarios} scenarios, "
            f"{shard.engine_starts} engine starts{where}: {_minutes(shard.seconds)}{when}",
        ]
        if not shard.engines:
            continue
        lines.append(
            f"  {'engine (model / method)':<{width}}{'scenarios':>9}{'start s':>9}{'minutes':>9}  throughput from"
        )
        for line in shard.engines:
            lines.append(
                f"  {label(line):<{width}}{len(line.scenarios):>9}{line.start.value * line.starts:>9.0f}"
                f"{line.seconds / 60:>9.1f}  {_counts(e.throughput for e in line.scenarios)}"
                f" (start: {line.start.source})"
            )
            for e in line.scenarios if detail else ():
                lines.append(
                    f"      {e.scenario.id}: {e.tokens.value:.0f} tokens/sequence ({e.tokens.source}), "
                    f"{e.throughput.value:.1f} tok/s ({e.throughput.source}), warm-up "
                    f"{e.warmup_s.value:.1f} s, rounds {e.measure_s:.1f} s"
                )
    lines += [
        "",
        f"total: {len(scenarios)} scenarios, {sum(s.engine_starts for s in plan.shards)} engine starts, "
        f"{_minutes(plan.total_s)} of shard time in {len(plan.shards)} shard(s)",
    ]
    if plan.gpus is None:
        lines.append(f"wall time: {_minutes(plan.wall_s)} with each shard on a machine of its own")
    else:
        busy = [s for s in plan.shards if s.engines]
        at_once = (
            max(sum(1 for o in busy if o.start_at <= s.start_at < o.start_at + o.seconds / 60) for s in busy)
            if busy
            else 0
        )
        lines.append(
            f"on {plan.gpus} GPU(s): {len(busy)} shards, up to {at_once} at once (a shard holds as many "
            f"GPUs as its largest TP); wall time {_minutes(plan.wall_s)}, {plan.gpu_hours:.1f} GPU-hours "
            f"busy, {plan.gpus * plan.wall_s / 3600:.1f} held ({plan.gpus} x the wall time)"
        )
    if plan.max_shard_s is not None:
        lines += ["", *array_lines(plan)]
    if plan.skipped:
        tps = sorted({s.model.tp for s in plan.skipped})
        lines.append(
            f"not run on {plan.gpus} GPU(s): {len(plan.skipped)} scenarios need "
            f"{'/'.join(map(str, tps))} GPUs (TP), as a run there skips them"
        )
    return lines


def profile_option(profile: Profile) -> str:
    """How a command names the profile: by name where fixtures/scenarios/ holds it, else by its path."""
    from ..profiles.scenarios import available_profiles

    return profile.name if profile.name in available_profiles() else shlex.quote(str(profile.path))


def array_lines(plan: Plan) -> list[str]:
    """The arrays a cluster scheduler runs (--max-shard-hours): per array its tasks and the command
    each runs, then a line a shard: its GPUs (TP), expected hours and command."""
    hours = plan.max_shard_s / 3600 if plan.max_shard_s is not None else 0.0
    run = f"pytest tests_perf --profile {profile_option(plan.profile)}"
    lines = [f"arrays, shards of at most {hours:g} h (examples/slurm, examples/kubernetes):"]
    for gpus, count, options, hours_longest in plan.arrays():
        held = f"{gpus} GPU{'s' if gpus != 1 else ''} a task" if gpus else "no GPU"
        command = " ".join(filter(None, [run, options, f"--shard $I/{count}"]))
        lines.append(f"  {count} tasks, {held}, the longest {hours_longest:.2f} h: {command}")
    over = [s for s in plan.shards if s.seconds > plan.max_shard_s] if plan.max_shard_s is not None else []
    if over:
        lines.append(
            f"  {len(over)} shards run longer than {hours:g} h: each holds scenarios that alone do "
            f"(the longest {max(s.seconds for s in over) / 3600:.1f} h)"
        )
    lines.append(f"  {'shard':>7} {'GPUs':>5} {'hours':>7}  command")
    for shard in plan.shards:
        lines.append(f"  {shard.index:>7} {shard.gpus:>5} {shard.seconds / 3600:>7.2f}  {run} {shard.command}")
    return lines
