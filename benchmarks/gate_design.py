"""The paired gate's power by design, simulated: how often gates of E engine pairs x P pairs each
flag a known slowdown (a regression) and how often they cannot tell (inconclusive), under a stated
noise model, judged by judge/paired.py as the gate judges.

Each gate draws every engine pair's offset (SD --offset) and every pair's noise (SD --pair-noise,
of one pair's log ratio), slows the candidate by the row's fraction, and is judged with the
profile-style floor (--floor) and tolerance.  The measured noise to put in: docs/methodology/gate.md.
With --start-s and --round-s each design also says what it costs a scenario: every engine pair
starts its two engines fresh (a set side by side, or a block pair with one engine alive) and runs
its pairs' two rounds each, so E x (2 x start + 2 x P x round) seconds, the starts serial (as on
one GPU).  Prints figures, asserts nothing; needs only the package (no engine):

    python benchmarks/gate_design.py --pair-noise 0.075 --offset 0.015 --designs 4x4 8x4 8x6 8x8 12x4
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specperf.judge.paired import compare_paired  # noqa: E402


def one_gate(rng, engine_pairs, pairs, pair_noise, offset, change, floor, tolerance) -> str:
    current, candidate, clusters = [], [], []
    for cluster in range(engine_pairs):
        shift = rng.gauss(0, offset)
        for _ in range(pairs):
            current.append(100.0 * math.exp(rng.gauss(0, pair_noise / math.sqrt(2))))
            candidate.append(100.0 * math.exp(math.log1p(change) + shift + rng.gauss(0, pair_noise / math.sqrt(2))))
            clusters.append(cluster)
    return compare_paired("throughput_tok_s", current, candidate, tolerance, clusters, floor).status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair-noise", type=float, default=0.075, help="SD of one pair's log ratio")
    parser.add_argument("--offset", type=float, default=0.015, help="SD of an engine pair's offset")
    parser.add_argument("--floor", type=float, default=0.02, help="the profile's gate_engine_offset")
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.0, 0.03, 0.05, 0.10])
    parser.add_argument("--designs", nargs="+", default=["4x4", "8x4", "8x6", "8x8", "12x4"], help="ExP")
    parser.add_argument("--gates", type=int, default=400, help="simulated gates per cell")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start-s", type=float, help="seconds one engine takes to start (with --round-s: cost)")
    parser.add_argument("--round-s", type=float, help="seconds one round takes")
    args = parser.parse_args()
    costed = args.start_s is not None and args.round_s is not None
    rng = random.Random(args.seed)
    print(
        f"share of gates flagged / inconclusive (pair noise {args.pair_noise:.1%}, offset {args.offset:.1%}, "
        f"floor {args.floor:.1%})"
    )
    print(
        f"{'engine pairs x pairs':>20} "
        + " ".join(f"{s:>11.0%}" for s in args.slowdowns)
        + (f" {'min/scenario':>12}" if costed else "")
    )
    for design in args.designs:
        engine_pairs, pairs = (int(n) for n in design.split("x"))
        cells = []
        for slowdown in args.slowdowns:
            verdicts = [
                one_gate(rng, engine_pairs, pairs, args.pair_noise, args.offset, -slowdown, args.floor, args.tolerance)
                for _ in range(args.gates)
            ]
            flagged, undecided = verdicts.count("regression"), verdicts.count("inconclusive")
            cells.append(f"{flagged / args.gates:.2f} / {undecided / args.gates:.2f}")
        cost = engine_pairs * (2 * args.start_s + 2 * pairs * args.round_s) / 60 if costed else None
        print(f"{design:>20} " + " ".join(f"{cell:>11}" for cell in cells) + (f" {cost:>12.1f}" if costed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
