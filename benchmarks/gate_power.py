"""The paired gate's power on this machine: how often it flags a known slowdown, and how often nothing.

Each repeat is one gate run of one scenario, as `pytest tests_perf --candidate PYTHON` runs it:
current and candidate engines start fresh (`--instances` of each, side by side), warm up, and run
rounds alternately (A B B A ...).  Both sides are this environment through a wrapper interpreter
that loads the CPU-tier fault plugin; the candidate's sleeps a fraction of every engine step
(`step_slowdown`), the current's a fraction of 0, so the two differ by nothing else; a candidate
fraction of 0 is an A/A gate.  Every repeat is judged on its first N pairs for each N of
`--judge-pairs` (the first 5 pairs of a 10-pair run are a 5-pair run), so one study shows what
each number of rounds buys.  Repeats are the outer loop and slowdowns the inner one, so the A/A row
and the slowdown rows are measured in the same hours of the machine's life.  Prints figures, asserts nothing.  Needs the CPU tier's environment:

    .tox/cpu/bin/python benchmarks/gate_power.py --slowdowns 0 0.02 0.05 0.10 --repeats 10 --instances 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cpu_tier"))
from suite import slowed_python  # noqa: E402

DEFAULT_SCENARIOS = ["smollm2-135m-ngram-k3-bs1-instructcoder", "tiny-mimo-mtp-k1-bs1-instructcoder"]
POWER = 0.95


def one_gate(scenario, calls, current: str, candidate: str, pairs: int,
             instances: int) -> tuple[dict[str, list[float]], float]:
    """Fresh current and candidate engines, warm-up, `pairs` pairs: the throughput of every round
    per side, and the mean round time."""
    from specperf.run.measurement import measure_rounds
    from specperf.run.pool import EnginePool

    pool = EnginePool(log=lambda line: None)
    try:
        measured = measure_rounds(pool, {"current": (scenario, current), "candidate": (scenario, candidate)},
                                  calls.calls, scenario.output_len, scenario.warmup, pairs, instances=instances)
    finally:
        pool.close()
    return ({side: [r.throughput for r in rounds] for side, rounds in measured.rounds.items()},
            measured.measure_s / (2 * pairs))


def main() -> int:
    from specperf.judge.paired import compare_paired
    from specperf.profiles.scenarios import load_profile
    from specperf.profiles.workloads import default_dataset_dir
    from specperf.run.calls import CallPreparer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-gate")
    parser.add_argument("-k", dest="select", nargs="*", default=DEFAULT_SCENARIOS)
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.0, 0.02, 0.05, 0.10])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--instances", type=int, default=None,
                        help="engines per side (default: the profile's gate_instances)")
    parser.add_argument("--judge-pairs", type=int, nargs="+", default=[5, 10],
                        help="judge each repeat on its first N pairs, for each N; the largest is measured")
    args = parser.parse_args()

    scenarios = [s for s in load_profile(args.profile).scenarios if s.id in args.select]
    prepare = CallPreparer(default_dataset_dir())
    wrappers = Path(tempfile.mkdtemp(prefix="gate-power-"))
    pair_counts = sorted(args.judge_pairs)
    rows = []       # (scenario, slowdown, pairs, flagged, changes, round_s)
    (wrappers / "current").mkdir()
    current = slowed_python(wrappers / "current", 0.0)          # a path of its own: another engine slot
    for scenario in scenarios:
        calls = prepare(scenario)
        instances = args.instances or scenario.gate_instances
        candidates = {fraction: slowed_python(wrappers, fraction) for fraction in args.slowdowns}
        found = {(fraction, n): ([], 0, 0) for fraction in args.slowdowns for n in pair_counts}
        round_times = {fraction: [] for fraction in args.slowdowns}
        t0 = time.monotonic()
        for repeat in range(args.repeats):      # slowdowns interleaved: every row sees the same hours
            for fraction, candidate in candidates.items():
                throughput, round_s = one_gate(scenario, calls, current, candidate, pair_counts[-1], instances)
                round_times[fraction].append(round_s)
                for n in pair_counts:
                    verdict = compare_paired("throughput_tok_s", throughput["current"][:n],
                                             throughput["candidate"][:n], scenario.gate_tolerance)
                    changes, flagged, improved = found[fraction, n]
                    found[fraction, n] = (changes + [verdict.change], flagged + (verdict.status == "regression"),
                                          improved + (verdict.status == "improvement"))
                print(f"  repeat {repeat + 1}, slowdown {fraction:.0%}: change over {pair_counts[-1]} pairs "
                      f"{found[fraction, pair_counts[-1]][0][-1]:+.1%}", flush=True)
        for (fraction, n), (changes, flagged, improved) in found.items():
            rows.append((scenario.id, fraction, n, flagged, changes, statistics.median(round_times[fraction])))
            print(f"{scenario.id} slowdown {fraction:.0%}, {n} pairs: flagged {flagged}/{args.repeats}, "
                  f"called an improvement {improved}/{args.repeats}, median change "
                  f"{statistics.median(changes):+.1%} ({min(changes):+.1%}..{max(changes):+.1%})", flush=True)
        print(f"  ({time.monotonic() - t0:.0f} s for {args.repeats * len(candidates)} gate runs)", flush=True)

    print(f"\npaired gate, tolerance {scenarios[0].gate_tolerance:.0%}, {args.repeats} gate runs (fresh engines, "
          f"{args.instances or scenarios[0].gate_instances} per side) per row, throughput judged")
    print(f"{'scenario':<42} {'pairs':>5} {'slowdown':>8} {'flagged':>8} {'median change':>14} {'range':>17} "
          f"{'round':>7}")
    for sid, fraction, n, flagged, changes, round_s in sorted(rows, key=lambda r: (r[0], r[2], r[1])):
        print(f"{sid:<42} {n:>5} {fraction:>8.0%} {flagged:>4}/{args.repeats:<3} {statistics.median(changes):>+14.1%} "
              f"{f'{min(changes):+.1%}..{max(changes):+.1%}':>17} {round_s:>6.2f}s")
    for sid in dict.fromkeys(r[0] for r in rows):
        for n in pair_counts:
            mine = [r for r in rows if r[0] == sid and r[2] == n]
            false_alarms = next((f"{r[3]}/{args.repeats}" for r in mine if r[1] == 0), "not run")
            detected = [r[1] for r in mine if r[1] > 0 and r[3] / args.repeats >= POWER]
            print(f"{sid}, {n} pairs: A/A false alarms {false_alarms}; smallest slowdown flagged in "
                  f">= {POWER:.0%} of runs: {f'{min(detected):.0%}' if detected else 'none of those tried'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
