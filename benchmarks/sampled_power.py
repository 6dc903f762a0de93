"""How a sampled scenario's acceptance is judged on this machine: false alarms and power, measured.

Each repeat starts three fresh engines of one sampled SD scenario and runs its requests once on each,
each with a seed of its own: the baseline; an A/A engine of the same build; and a "drop" engine
whose n-gram drafts are wrong in a known share of steps (the CPU-tier fault plugin's draft_wrong: a
lower acceptance by a known amount).  Each arm is judged against the baseline as the suite judges it
(judge/verdicts.sampled_scenario_verdicts with the profile's rules: the two acceptance lengths gate,
every figure is shown): request by request, as against a baseline that kept its requests' counts,
and as independent samples, as against one that did not (the history's).  Whether the errors are
honest: the baseline's spread between runs of the same build against its bootstrap error.  Then the
requests a cell needs for the measured drop, and a 5% drop, to be flagged 9 times in 10 while an
unchanged build passes 19 times in 20 follow from the measured errors.  Prints figures,
asserts nothing; `--out` keeps each run's per-request counts (a JSON line a repeat; run again with
the same file and settings, it goes on from the repeats it holds, on new seeds, up to --repeats in
all), `--replay` judges them again.
Needs the CPU tier's environment:

    .tox/cpu/bin/python benchmarks/sampled_power.py --repeats 20 --requests 16 --wrong 0.1 --out power.jsonl
    .tox/cpu/bin/python benchmarks/sampled_power.py --replay power.jsonl --wrong 0.1
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cpu_tier"))
from suite import PROFILES, faulty_python  # noqa: E402

PROFILE = str(PROFILES / "sampled.toml")
SCENARIO = "smollm2-135m-ngram-k3-bs4-instructcoder-t0.8-p0.95"
SEED_STRIDE = 10_000  # apart between runs: more than a run's requests
SETTINGS = "settings"  # an --out line's scenario, requests and draft_wrong, beside its runs' counts
GATING = ("mean_acceptance_length", "request_mean_acceptance_length")  # a sampled scenario's, by default
ARMS = ("A/A by request", "A/A independent", "drop by request", "drop independent")


def draw(scenario, python: str | None, seeds: list[int], prepare) -> dict[int, list]:
    """One fresh engine of `scenario` (in `python`'s environment), warmed up, one round per seed:
    each round's per-request SD counts."""
    from specperf.run import loop
    from specperf.run.pool import EnginePool

    pool = EnginePool(log=lambda line: None)
    try:
        engines, _ = pool.engines_for({"sd": (scenario, python)})
        drawn = {}
        for seed in seeds:
            seeded = scenario.replace(sampling=scenario.sampling.model_copy(update={"seed": seed}))
            calls = prepare(seeded).calls
            if not drawn:
                loop.warm_up(engines, calls, scenario.output_len, scenario.warmup)
            (round_,) = loop.measure(engines, calls, scenario.output_len, schedule=["sd"])["sd"]
            drawn[seed] = round_.request_acceptance
        return drawn
    finally:
        pool.close()


def judged(scenario, current: list, baseline: list, by_request: bool) -> tuple[str, dict[str, str], float, dict]:
    """The scenario's verdict as its profile judges it (the worst of its gating acceptance figures'),
    each figure's verdict, mean_acceptance_length's change, and each gating figure's standard error
    of the change (log units)."""
    from specperf.judge.metrics import metric_samples
    from specperf.judge.rules import Rules
    from specperf.judge.sampled import acceptance_metrics
    from specperf.judge.verdicts import changes_by_request, sampled_scenario_verdicts
    from specperf.status import worst

    rules = Rules.of(scenario)
    now = acceptance_metrics(current, scenario.prompt_replicas)
    then = acceptance_metrics(baseline, scenario.prompt_replicas)
    names = list(metric_samples(now))
    pairs = changes_by_request(scenario, current, baseline) if by_request else None
    verdicts = sampled_scenario_verdicts(scenario, names, (now, current), (then, baseline if by_request else []), rules)
    length = next(v for v in verdicts if v.metric == "mean_acceptance_length")
    if pairs is not None:
        errors = {name: pairs[name][1] for name in GATING}
    else:
        errors = {name: math.hypot(now[name].se / now[name].value, then[name].se / then[name].value) for name in GATING}
    status = worst(v.status for v in verdicts if not rules.is_informational(v.metric))
    return status, {v.metric: v.status for v in verdicts}, length.change or 0.0, errors


def requests_needed(errors: dict[str, float], requests: int, change: float, figures: int, tolerance: float) -> dict:
    """Requests a cell needs, with `figures` figures judged together (their intervals widened
    together), so that a true change of `change` in a figure is flagged a regression 9 times in 10
    (all of its interval worse than no change) and an unchanged build passes 19 times in 20 with
    every figure (none of its interval worse than `tolerance`; Bonferroni over the figures): the
    measured error of the change at `requests` requests, scaled as 1 / sqrt(n), the larger of the two."""
    from scipy.stats import norm

    z = norm.ppf(1 - 0.05 / 2 / figures)
    bounds = [-math.log1p(-tolerance) / (z + norm.ppf(1 - 0.05 / figures))]
    if change < 0:  # a drop to flag (a rise or none: the A/A bound alone)
        bounds.append(abs(math.log1p(change)) / (z + norm.ppf(0.9)))
    most_error = min(bounds)
    return {how: math.ceil(requests * (error / most_error) ** 2) for how, error in errors.items()}


def main() -> int:
    from specperf.profiles.scenarios import load_profile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--requests", type=int, help="prompts per round (each the batch size's replicas)")
    parser.add_argument("--wrong", type=float, default=0.25, help="share of n-gram drafts made wrong in the drop arm")
    parser.add_argument("--drop-repeats", type=int, help="run the drop arm in the first N repeats only (default: all)")
    parser.add_argument("--out", type=Path, help="a JSON line a repeat: each run's per-request counts")
    parser.add_argument("--replay", type=Path, help="judge the repeats an earlier --out kept, running no engine")
    args = parser.parse_args()
    (scenario,) = [s for s in load_profile(PROFILE).scenarios if s.id == SCENARIO]
    if args.requests:
        scenario = scenario.replace(num_requests=args.requests)
    if args.replay:
        repeats = read_repeats(args.replay)
    else:
        repeats = run_repeats(scenario, args)
    outcomes: dict[str, list[tuple[str, str, float, float]]] = {arm: [] for arm in ARMS}
    for number, runs in enumerate(repeats, start=1):
        for arm, current in (("A/A", runs["again"]), ("drop", runs.get("dropped"))):
            if current is None:
                continue
            outcomes[f"{arm} by request"].append(judged(scenario, current, runs["base"], by_request=True))
            outcomes[f"{arm} independent"].append(judged(scenario, current, runs["base"], by_request=False))
        shown = (f"{arm} {o[-1][0]} {o[-1][2]:+.1%}" for arm, o in outcomes.items() if len(o) == number)
        print(f"repeat {number}: " + "; ".join(shown), flush=True)
    summarise(scenario, repeats, outcomes, args.wrong)
    return 0


def run_repeats(scenario, args) -> list[dict[str, list]]:
    """Each repeat's three runs (fresh engines): their per-request counts, kept in --out as they come.
    Repeats already in --out are kept and counted: the run goes on from them."""
    from specperf.paths import dataset_dir
    from specperf.run.calls import CallPreparer

    prepare = CallPreparer(dataset_dir())
    wrong = faulty_python(Path(tempfile.mkdtemp(prefix="sampled-power-")) / "python", f"draft_wrong={args.wrong}")
    settings = {"scenario": scenario.id, "requests": scenario.num_requests * scenario.prompt_replicas}
    settings["wrong"] = args.wrong
    repeats = read_repeats(args.out, settings) if args.out and args.out.exists() else []
    for repeat in range(len(repeats), args.repeats):
        # request i draws with seed + i, and a seed repeats its draws: every run on seeds of its own
        a, b = SEED_STRIDE * (2 * repeat + 1), SEED_STRIDE * (2 * repeat + 2)
        runs = {"base": draw(scenario, None, [a], prepare)[a], "again": draw(scenario, None, [b], prepare)[b]}
        if args.drop_repeats is None or repeat < args.drop_repeats:
            runs["dropped"] = draw(scenario, wrong, [b], prepare)[b]
        if args.out:
            with args.out.open("a") as out:
                counts = {k: [r.model_dump() for r in v] for k, v in runs.items()}
                print(json.dumps({SETTINGS: settings, **counts}), file=out)
        repeats.append(runs)
    return repeats


def read_repeats(path: Path, settings: dict | None = None) -> list[dict[str, list]]:
    """The repeats an --out file kept: each run's per-request counts.  Going on from them (`settings`:
    this run's scenario, requests and draft_wrong), a repeat of other settings stops the run (a line
    from before the settings were kept is taken as this run's), and a last line cut short by a kill
    is dropped."""
    from specperf.records import RequestAcceptance

    lines = path.read_text().splitlines()
    repeats = []
    for number, line in enumerate(lines, 1):
        try:
            kept = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) and settings is not None:
                print(f"{path}:{number}: cut short, measured again", file=sys.stderr)
                path.write_text("".join(f"{line}\n" for line in lines[:-1]))
                break
            raise SystemExit(f"{path}:{number}: not a repeat") from None
        theirs = kept.pop(SETTINGS, settings)
        if settings is not None and theirs != settings:
            raise SystemExit(f"{path}:{number}: measured with {theirs}, not this run's {settings}")
        repeats.append({arm: [RequestAcceptance.model_validate(r) for r in counts] for arm, counts in kept.items()})
    return repeats


def summarise(scenario, repeats: list[dict[str, list]], outcomes: dict[str, list], wrong: float) -> None:
    """The arms' verdicts, the errors' honesty (the baseline's spread between runs against its
    bootstrap error) and the requests a cell needs."""
    from specperf.judge.metrics import spec_for
    from specperf.judge.rules import Rules
    from specperf.judge.sampled import acceptance_metrics

    base = repeats[0]["base"]
    requests = len(base)
    print(f"\n{SCENARIO}, {requests} requests a run, {len(repeats)} repeats, draft_wrong={wrong}")
    print(f"{'arm':<18} {'scenario: flagged / inconclusive / pass / improvement':>56} {'length alone':>28} change")
    for arm, rows in outcomes.items():
        scenario_counts = Counter(r[0] for r in rows)
        length_counts = Counter(r[1]["mean_acceptance_length"] for r in rows)

        def shown(counts: Counter) -> str:
            return " / ".join(str(counts[s]) for s in ("regression", "inconclusive", "pass", "improvement"))

        mean_change = statistics.mean(r[2] for r in rows)
        print(f"{arm:<18} {shown(scenario_counts):>56} {shown(length_counts):>28} {mean_change:+.1%}")
    print("each figure alone (of the repeats' verdicts with the scenario's figures judged together):")
    for arm in ("A/A by request", "drop by request"):
        for figure in outcomes[arm][0][1] if outcomes[arm] else []:
            counts = Counter(r[1][figure] for r in outcomes[arm])
            gating = "" if figure in GATING else " (informational)"
            print(f"  {arm:<16} {figure + gating:<48} {shown(counts)}")
    lengths = [
        acceptance_metrics(runs[arm], scenario.prompt_replicas)["mean_acceptance_length"]
        for runs in repeats
        for arm in ("base", "again")
    ]
    spread = statistics.stdev(math.log(m.value) for m in lengths)
    bootstrap = statistics.mean(m.se / m.value for m in lengths)
    print(
        f"mean_acceptance_length {statistics.mean(m.value for m in lengths):.3f} over {len(lengths)} runs of the same "
        f"build: spread between runs {spread:.4f}, bootstrap error {bootstrap:.4f} (log units)"
    )
    drop = statistics.mean(r[2] for r in outcomes["drop independent"])
    for figure in GATING:
        errors = {
            how: statistics.mean(r[3][figure] for r in outcomes[f"A/A {how}"]) for how in ("by request", "independent")
        }
        if figure == "mean_acceptance_length":
            errors["independent, between runs"] = spread * math.sqrt(2)
        shown = ", ".join(f"{how} {error:.4f}" for how, error in errors.items())
        print(f"{figure}: error of the change at {requests} requests (log units): {shown}")
        tolerance = Rules.of(scenario).tolerance(figure) or spec_for(figure).rel_tolerance
        for change in (drop, -0.05):
            needed = requests_needed(errors, requests, change, len(GATING), tolerance)
            print(f"  requests for a change of {change:+.1%} flagged 9 times in 10, an A/A passing 19 in 20: {needed}")


if __name__ == "__main__":
    raise SystemExit(main())
