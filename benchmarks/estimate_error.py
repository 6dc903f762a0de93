"""How right the run's time-left estimate (plan/progress.py) was: replayed on a finished run
directory, after each scenario, against the time the run really had left.  Prints figures,
asserts nothing:

    python benchmarks/estimate_error.py reports/<run-id>

The estimate is the one the run printed before its next scenario: the results finished so far
(in the order they finished), the seconds since the run started, and this machine's baselines
(`--no-baselines`: as on a machine that has none).  `--workers N` replays a run on N pytest-xdist
workers (`tox -e perf`): the estimate the controller prints after each scenario, with a worker
counted as reporting once its group (suite/selection.worker_group) has finished a scenario.
`--fresh-machine` replays a run whose checkpoint cache started empty (a fresh clone's `tox -e
perf`): a builtin checkpoint counts as built when the first scenario that loads it started its
engine (its end less its engine start, warm-up and rounds), its build as having taken the recipe's
`build_s` up to then, as the live estimate reads both from the cache.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from pathlib import Path


def seconds(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def main() -> int:
    from specperf.checkpoints import builtin_recipe
    from specperf.paths import baseline_dir
    from specperf.plan.progress import baseline_rows, parallel_time_left_s, time_left_s
    from specperf.profiles.scenarios import load_profile
    from specperf.records import RunFile
    from specperf.storage import load_results, read_record
    from specperf.suite.selection import worker_group

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--baseline-dir", type=Path, default=baseline_dir())
    parser.add_argument("--no-baselines", action="store_true", help="as on a machine without baselines")
    parser.add_argument("--workers", type=int, default=1, help="the run's pytest-xdist workers (-n)")
    parser.add_argument("--fresh-machine", action="store_true", help="the run built every checkpoint it loaded")
    args = parser.parse_args()

    run = read_record(args.run_dir / "run.json", RunFile, "run file")
    results = sorted(load_results(args.run_dir), key=lambda r: (r.finished_at or "", r.started_at or ""))
    if not run.started_at or not run.finished_at or len(results) < 2:
        print(f"{args.run_dir}: needs a finished run of two scenarios or more", file=sys.stderr)
        return 2
    start, end = seconds(run.started_at), seconds(run.finished_at)
    profile = load_profile(results[0].scenario.profile)
    planned = [r.scenario for r in results]
    key = results[0].device.hardware_key
    known = [] if args.no_baselines else baseline_rows(args.baseline_dir, key, planned)
    built_at: dict[str, float] = {}  # each builtin checkpoint: when the first engine that loads it started
    for r in results:
        phases = r.timings.engine_start_s + r.timings.warmup_s + r.timings.measure_s
        for ref in r.scenario.checkpoints:
            built_at[ref] = min(built_at.get(ref, math.inf), seconds(r.finished_at) - phases)
    print(f"{'after':>5} {'elapsed s':>9} {'left s':>8} {'estimate s':>10} {'error':>7}")
    for k in range(1, len(results)):
        finished = results[:k]
        now = seconds(finished[-1].finished_at)
        elapsed, left = now - start, end - now
        builds = {
            ref: min(recipe.build_s, at - now)
            for ref, at in built_at.items()
            if args.fresh_machine and at > now and (recipe := builtin_recipe(ref))
        }
        if args.workers > 1:
            reporting = min(args.workers, len({worker_group(r.scenario) for r in finished}))
            estimate = parallel_time_left_s(
                profile, planned, known, finished, elapsed, args.workers, worker_group, reporting, builds
            )
        else:
            estimate = time_left_s(profile, planned, known, finished, finished, elapsed, builds)
        error = f"{estimate / left - 1:+7.0%}" if estimate is not None and left > 0 else "     -"
        print(f"{k:>5} {elapsed:>9.0f} {left:>8.0f} {estimate or 0:>10.0f} {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
