"""Where a paired gate's error comes from: round-to-round noise, or the offset between fresh engines.

Starts `--instances` engines of each side (side A, a second A, and A slowed by `--slowdown` of every
engine step through the CPU-tier fault plugin), all alive together, and runs rounds with pair j on
instance j % instances, as a gate with that many engines per side does.  From the per-pair log
ratios against the first side it splits the variance as the gate's judge does (judge/paired.py):

    ratio_j = change + (offset of B's instance - offset of A's instance) + noise_j

and prints, per compared side, the change, the SD of the instance offset difference, the SD of one
pair's noise, and the SD a gate's change estimate would have with k engines per side and n pairs:
sqrt(offset_var / k + noise_var / n).  Prints figures, asserts nothing.  Needs the CPU tier's
environment, and the CPU otherwise idle:

    .tox/cpu/bin/python benchmarks/engine_offsets.py --instances 4 --pairs 24
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cpu_tier"))
from suite import slowed_python  # noqa: E402


def main() -> int:
    from specperf.judge.paired import paired_change
    from specperf.paths import dataset_dir
    from specperf.profiles.scenarios import load_profile
    from specperf.run.calls import CallPreparer
    from specperf.run.measurement import measure_rounds
    from specperf.run.pool import EnginePool

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-gate")
    parser.add_argument("-k", dest="scenario", default="smollm2-135m-ngram-k3-bs1-instructcoder")
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=24, help="a multiple of --instances")
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--json", help="also write every round's throughput per side to this file")
    args = parser.parse_args()

    scenario = next(s for s in load_profile(args.profile).scenarios if s.id == args.scenario)
    calls = CallPreparer(dataset_dir())(scenario)
    folder = Path(tempfile.mkdtemp(prefix="engine-offsets-"))
    sides = {}
    for name, fraction in (("A", 0.0), ("A2", 0.0), (f"A-{args.slowdown:.0%}", args.slowdown)):
        (folder / name).mkdir()
        sides[name] = (scenario, slowed_python(folder / name, fraction))
    pool = EnginePool(log=lambda line: None)
    try:
        measured = measure_rounds(
            pool, sides, calls.calls, scenario.output_len, scenario.warmup, args.pairs, instances=args.instances
        )
    finally:
        pool.close()

    base = [r.throughput for r in measured.rounds["A"]]
    if args.json:
        Path(args.json).write_text(
            json.dumps({name: [r.throughput for r in rounds] for name, rounds in measured.rounds.items()}) + "\n"
        )
    print(
        f"{scenario.id}: {args.instances} engines per side, {args.pairs} pairs, "
        f"round {measured.measure_s / (3 * args.pairs):.2f} s"
    )
    for name in list(sides)[1:]:
        log_ratios = [math.log(b / a) for a, b in zip(base, (r.throughput for r in measured.rounds[name]))]
        change = paired_change(log_ratios, [j % args.instances for j in range(len(log_ratios))])
        offset_var, noise_var = (change.between_engines or 0.0) ** 2, (change.between_pairs or 0.0) ** 2
        print(
            f"{name} / A: change {math.exp(change.log_change) - 1:+.2%}, offset-difference SD "
            f"{offset_var**0.5:.2%}, per-pair noise SD {noise_var**0.5:.2%}; per instance "
            + " ".join(
                f"{math.exp(statistics.fmean(log_ratios[i :: args.instances])) - 1:+.1%}" for i in range(args.instances)
            )
        )
        for k, n in ((1, 16), (2, 16), (4, 16), (4, 24), (8, 32)) if args.instances > 1 else ():
            print(f"    gate SD with {k} engine pairs, {n} pairs: {math.sqrt(offset_var / k + noise_var / n):.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
