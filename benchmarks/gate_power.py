"""The paired gate's power on this machine: how often it flags a known slowdown, and how often nothing.

For each scenario, a current engine (this environment) and a candidate engine run in alternating
rounds, exactly as `pytest tests_perf --candidate PYTHON` runs them.  The candidate is this same
environment through a wrapper interpreter that loads the CPU-tier fault plugin and sleeps a fraction
of every engine step (`step_slowdown`); a fraction of 0 is an A/A gate.  Each (scenario, slowdown) is
judged `--repeats` times with `--pairs` pairs (the engines stay up between repeats), and the table
gives how often throughput was flagged as a regression.  Prints figures, asserts nothing.  Needs the
CPU tier's environment:

    .tox/cpu/bin/python benchmarks/gate_power.py \\
        --slowdowns 0 0.02 0.05 0.10 --repeats 10 --pairs 10
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


def main() -> int:
    from specperf.judge.paired import compare_paired
    from specperf.profiles.scenarios import load_profile
    from specperf.profiles.workloads import default_dataset_dir
    from specperf.run.calls import CallPreparer
    from specperf.run.measurement import measure_rounds
    from specperf.run.pool import EnginePool

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-gate")
    parser.add_argument("-k", dest="select", nargs="*", default=["smollm2-135m-ngram-k3-bs1-instructcoder",
                                                                 "tiny-mimo-mtp-k1-bs1-instructcoder"])
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.0, 0.02, 0.05, 0.10])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=10)
    args = parser.parse_args()

    scenarios = [s for s in load_profile(args.profile).scenarios if s.id in args.select]
    prepare = CallPreparer(default_dataset_dir())
    wrappers = Path(tempfile.mkdtemp(prefix="gate-power-"))
    rows = []
    for scenario in scenarios:
        calls = prepare(scenario)
        pool = EnginePool(log=lambda line: None)
        for fraction in args.slowdowns:
            candidate = slowed_python(wrappers, fraction)
            wanted = {"current": (scenario, None), "candidate": (scenario, candidate)}
            changes, flagged, p_values, t0 = [], 0, [], time.monotonic()
            for repeat in range(args.repeats):
                measured = measure_rounds(pool, wanted, calls.calls, scenario.output_len,
                                          scenario.warmup if repeat == 0 else 0, args.pairs)
                throughput = {side: [r.throughput for r in rounds]
                              for side, rounds in measured.rounds.items()}
                verdict = compare_paired("throughput_tok_s", throughput["current"], throughput["candidate"],
                                         scenario.gate_tolerance)
                changes.append(verdict.change)
                flagged += verdict.status == "regression"
                if verdict.p_value is not None:
                    p_values.append(verdict.p_value)
            round_s = measured.measure_s / (2 * args.pairs)
            rows.append((scenario.id, fraction, flagged, args.repeats, statistics.median(changes), min(changes),
                         max(changes), round_s, time.monotonic() - t0))
            print(f"{scenario.id} slowdown {fraction:.0%}: flagged {flagged}/{args.repeats}, "
                  f"median change {statistics.median(changes):+.1%} ({min(changes):+.1%}..{max(changes):+.1%}), "
                  f"round {round_s:.2f} s", flush=True)
        pool.close()

    print(f"\npaired gate, {args.pairs} pairs per judgement, tolerance {scenarios[0].gate_tolerance:.0%}, "
          f"{args.repeats} repeats per row")
    print(f"{'scenario':<42} {'slowdown':>8} {'flagged':>8} {'median change':>14} {'range':>17} {'round':>7}")
    for sid, fraction, flagged, repeats, median, low, high, round_s, _ in rows:
        print(f"{sid:<42} {fraction:>8.0%} {flagged:>4}/{repeats:<3} {median:>+14.1%} "
              f"{f'{low:+.1%}..{high:+.1%}':>17} {round_s:>6.2f}s")
    for sid in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == sid]
        false_alarms = next((r[2] / r[3] for r in mine if r[1] == 0), None)
        detected = [r[1] for r in mine if r[1] > 0 and r[2] / r[3] >= 0.95]
        print(f"{sid}: A/A false alarms {false_alarms if false_alarms is None else f'{false_alarms:.0%}'}; "
              f"smallest slowdown flagged in >= 95% of repeats: "
              f"{f'{min(detected):.0%}' if detected else 'none of those tried'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
