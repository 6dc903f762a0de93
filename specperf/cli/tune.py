"""`specperf tune RUN_DIR...`: the measured best k per batch size, as vLLM's dynamic SD schedule
(analysis/tune.py), printed as a speculative config and a profile method table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..storage import atomic_write_text, load_results


def parse_mix(text: str) -> dict[str, float]:
    """ "instructcoder=3,gsm8k=1" -> weights by dataset; ValueError naming what is wrong."""
    mix = {}
    for part in text.split(","):
        name, _, weight = part.partition("=")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if not name.strip() or not value > 0 or value == float("inf"):
            raise ValueError(f"--mix: {part!r} is not DATASET=WEIGHT with a positive weight")
        mix[name.strip()] = value
    return mix


def _interval(speedup) -> str:
    return f"{speedup.speedup:.2f}x [{speedup.low:.2f}, {speedup.high:.2f}]" + ("" if speedup.paired else " unpaired")


def print_tuned(tuned) -> None:
    first = tuned.rows[0]
    served = (
        ""
        if not first.served
        else " (served: concurrency as the batch size"
        + (f", Poisson arrivals at {first.request_rate:g} req/s, TPOT speedup)" if first.request_rate else ")")
    )
    print(f"\n{tuned.model} / {tuned.method} / {tuned.dataset}{served}")
    for row in tuned.rows:
        measured = ", ".join(f"k{s.k} {_interval(s)}" for s in row.ks if s.k > 0)
        print(f"  {row.load}: best k{row.best}, run k{row.chosen}   ({measured})")
    if not tuned.pays:
        print("  schedule: none; no k is shown to beat no SD at any measured batch size")
        return
    config = tuned.speculative_config()
    print(f"  schedule: {json.dumps(config['num_speculative_tokens_per_batch_size'])}")
    print(f"  vllm serve ... --speculative-config '{json.dumps(config)}'")
    from ..profiles.tuned import toml_table

    header, *fields = toml_table(f"methods.{tuned.method}-tuned", config)[1:]
    print(f"  profile:  {header}")
    for line in fields:
        print(f"            {line}")


def run(args) -> int:
    from ..analysis.tune import tune

    try:
        mix = parse_mix(args.mix) if args.mix else None
    except ValueError as err:
        print(f"specperf: error: {err}", file=sys.stderr)
        return 2
    run_dirs = [Path(d) for d in args.run_dirs]
    results = [r for d in run_dirs for r in load_results(d)]
    tuned = tune(results, mix)
    if not tuned:
        wanted = f" on every dataset of the mix ({', '.join(mix)})" if mix else ""
        print(
            f"specperf: error: no k sweep in {', '.join(map(str, run_dirs))}: a schedule needs two or more k "
            f"measured with their speedup at one batch size{wanted}",
            file=sys.stderr,
        )
        return 2
    print("k per batch size: each k's speedup over no SD with its 95% interval; 'best' is the k best shown")
    print("(the highest lower bound), 'run' the smallest k shown within 3% of it (docs/tuning.md);")
    print("between measured sizes, the k of the nearer measured size on a log2 scale")
    for t in tuned:
        print_tuned(t)
    if args.json:
        atomic_write_text(Path(args.json), json.dumps([t.to_json() for t in tuned], indent=2) + "\n")
        print(f"\nwritten: {args.json}")
    if args.profile_out:
        return write_profile(Path(args.profile_out), tuned, results)
    return 0


def write_profile(path: Path, tuned, results) -> int:
    """The profile that runs the schedules back beside the sweep's fixed k (profiles/tuned.py)."""
    from ..profiles.scenarios import ProfileError, load_profile
    from ..profiles.tuned import tuned_profile

    source = results[0].scenario.profile
    tier = "cpu" if all(r.device is None or r.device.kind == "cpu" for r in results) else "gpu"
    try:
        text = tuned_profile(f"tuned-{source}", tier, tuned, results)
    except ValueError as err:
        print(f"specperf: error: --profile-out: {err}", file=sys.stderr)
        return 2
    atomic_write_text(path, text)
    try:
        scenarios = load_profile(str(path)).scenarios  # what it runs, and a check that it reads
    except ProfileError as err:
        print(f"specperf: error: {err}", file=sys.stderr)
        return 2
    print(f"\nprofile written: {path} ({len(scenarios)} scenarios): pytest tests_perf --profile {path}")
    return 0


def add_parser(sub) -> None:
    tune = sub.add_parser("tune", help="the k to run at each batch size, as vLLM's dynamic SD schedule")
    tune.add_argument("run_dirs", nargs="+", help="run directories holding k sweeps (reports/<run-id>); several merge")
    tune.add_argument("--json", metavar="FILE", help="also write the schedules and what they rest on as JSON")
    tune.add_argument(
        "--mix",
        metavar="DATASET=WEIGHT,...",
        help="one schedule per model and method for this mix of workloads, weighted by output tokens",
    )
    tune.add_argument(
        "--profile-out",
        metavar="FILE.toml",
        help="write a profile that runs each schedule as a dynamic method beside the sweep's fixed k, "
        "at the measured batch sizes and each switch point and its neighbours",
    )
    tune.set_defaults(func=run)
