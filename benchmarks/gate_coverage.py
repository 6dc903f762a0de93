"""How often the gate's 95% intervals hold the true change, simulated gate by gate with the measured
variance components and judged by the judging functions themselves (judge/paired.py, judge/gate.py).

Each gate draws every engine pair's offset (SD --offset), every pair's noise (SD --pair-noise, of one
pair's log ratio) and slows the candidate by --change; its interval either holds the change or not.
Designs: the gate's modes as the judge sees them (paired engine pairs; a speedup less its no-SD
reference measured on engines of its own; paired_reference, a ratio per pair over two engine pairs;
blocks, one engine pair per block) and unequal engine pairs.  "narrowed" counts gates whose interval
at the floor is narrower than at half the floor (a floor must only widen).  Prints figures; the
unit test tests/test_paired_coverage.py asserts them.  With --sequential: gates that add a set of two
engine pairs (6 pairs each) at a time from 2 sets to 6 while inconclusive, each look judged as the
session judges it, against judging every look at 95%:

    python benchmarks/gate_coverage.py --gates 4000
    python benchmarks/gate_coverage.py --gates 2000 --sequential
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specperf.judge.gate import offset_floor  # noqa: E402
from specperf.judge.paired import compare_paired, usable_change  # noqa: E402
from specperf.judge.rules import Rules  # noqa: E402
from specperf.judge.sequential import look_confidence  # noqa: E402

PAIR_NOISE = 0.075  # SmolLM2 n-gram, one 16-token request a round (docs/methodology/gate.md)
OFFSET = 0.02  # between two fresh engines, cpu-gate's floor (benchmarks/engine_offsets.py: 1.5-2.4%)
TOLERANCE = 0.03


@dataclass(frozen=True)
class Design:
    name: str
    mode: str  # paired | reference | paired_reference | blocks
    sizes: tuple[int, ...]  # pairs on each engine pair


DESIGNS = (
    Design("cpu-gate, 8 engine pairs x 6", "paired", (6,) * 8),
    Design("tiny models, 4 x 12", "paired", (12,) * 4),
    Design("speedup less its reference, 8 x 6 each", "reference", (6,) * 8),
    Design("paired_reference, 8 x 6", "paired_reference", (6,) * 8),
    Design("blocks, 4 of 3 rounds", "blocks", (3,) * 4),
    Design("blocks, 6 of 1 round", "blocks", (1,) * 6),
    Design("unequal engine pairs, 2 to 10", "paired", (2, 3, 4, 5, 6, 8, 10, 10)),
)


@dataclass(frozen=True)
class Coverage:
    design: Design
    gates: int
    held: int  # intervals that hold the true change
    mean_width: float  # of the interval, in percent points of the ratio
    narrowed: int  # gates whose interval at the floor is narrower than at half of it

    @property
    def share(self) -> float:
        return self.held / self.gates


def _pairs(rng: random.Random, sizes: tuple[int, ...], log_change: float, offset: float, noise: float):
    """Current and candidate values of one gate's pairs (current at 100), and each pair's engine pair."""
    candidate, clusters = [], []
    for cluster, size in enumerate(sizes):
        shift = rng.gauss(0, offset)
        candidate += [100 * math.exp(log_change + shift + rng.gauss(0, noise)) for _ in range(size)]
        clusters += [cluster] * size
    return [100.0] * len(candidate), candidate, clusters


def judge_one(rng: random.Random, design: Design, change: float, floor: float, noise: float, offset: float):
    """One simulated gate's verdict on its speed metric, judged at the floor and at half of it."""
    log_change, floors = math.log1p(change), (floor, floor / 2)
    if design.mode == "paired_reference":  # a speedup per pair: two engine pairs' offsets and noises
        two = math.sqrt(2)
        current, candidate, clusters = _pairs(rng, design.sizes, log_change, offset * two, noise * two)
        floors = tuple(offset_floor("speedup", Rules(gate_engine_offset=f)) for f in floors)
        return [compare_paired("speedup", current, candidate, TOLERANCE, clusters, f) for f in floors]
    current, candidate, clusters = _pairs(rng, design.sizes, log_change, offset, noise)
    if design.mode != "reference":
        return [compare_paired("throughput_tok_s", current, candidate, TOLERANCE, clusters, f) for f in floors]
    reference = _pairs(rng, design.sizes, 0.0, offset, noise)  # the no-SD reference, unchanged
    return [
        compare_paired("speedup", current, candidate, TOLERANCE, clusters, f, relative_to=usable_change(*reference, f))
        for f in floors
    ]


def coverage(
    design: Design,
    gates: int,
    seed: int = 1,
    change: float = -0.03,
    floor: float = OFFSET,
    noise: float = PAIR_NOISE,
    offset: float = OFFSET,
) -> Coverage:
    rng = random.Random(seed)
    held, widths, narrowed = 0, [], 0
    for _ in range(gates):
        at_floor, at_half = judge_one(rng, design, change, floor, noise, offset)
        held += at_floor.ci_low <= change <= at_floor.ci_high
        widths.append(at_floor.ci_high - at_floor.ci_low)
        narrowed += at_floor.ci_high - at_floor.ci_low < at_half.ci_high - at_half.ci_low - 1e-12
    return Coverage(design, gates, held, statistics.fmean(widths), narrowed)


@dataclass(frozen=True)
class Sequential:
    """What simulated sequential gates came to: verdicts by name, and the sets they used."""

    gates: int
    verdicts: dict[str, int]
    mean_sets: float


def sequential(
    gates: int,
    change: float,
    seed: int = 1,
    naive: bool = False,
    sets: int = 2,
    max_sets: int = 6,
    instances: int = 2,
    pairs: int = 6,
    noise: float = PAIR_NOISE,
    offset: float = OFFSET,
) -> Sequential:
    """Gates that add a set of `instances` engine pairs of `pairs` pairs each while the throughput is
    inconclusive, from `sets` to `max_sets`, each look judged as the session judges it (`naive`:
    every look with a 95% interval, which spends no alpha)."""
    rng = random.Random(seed)
    verdicts: dict[str, int] = {}
    used = 0
    for _ in range(gates):
        current: list[float] = []
        candidate: list[float] = []
        clusters: list[int] = []
        looks: list[float] = []
        for done in range(1, max_sets + 1):
            more = _pairs(rng, (pairs,) * instances, math.log1p(change), offset, noise)
            current += more[0]
            candidate += more[1]
            clusters += [c + (done - 1) * instances for c in more[2]]
            if done < sets:
                continue
            looks.append(done / max_sets)
            confidence = 0.95 if naive else look_confidence(looks)
            verdict = compare_paired(
                "throughput_tok_s", current, candidate, TOLERANCE, clusters, OFFSET, confidence=confidence
            )
            if verdict.status != "inconclusive":
                break
        verdicts[verdict.status] = verdicts.get(verdict.status, 0) + 1
        used += done
    return Sequential(gates, verdicts, used / gates)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gates", type=int, default=4000, help="simulated gates per design")
    parser.add_argument("--pair-noise", type=float, default=PAIR_NOISE, help="SD of one pair's log ratio")
    parser.add_argument("--offset", type=float, default=OFFSET, help="true SD of an engine pair's offset")
    parser.add_argument("--floor", type=float, default=OFFSET, help="the profile's gate_engine_offset")
    parser.add_argument("--change", type=float, default=-0.03)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sequential", action="store_true", help="instead: sequential gates' verdicts at changes 0, -2, -3, -5%%"
    )
    args = parser.parse_args()
    if args.sequential:
        print("| change | looks judged | pass | regression | inconclusive | improvement | mean sets |")
        print("|---|---|---|---|---|---|---|")
        for change in (0.0, -0.02, -0.03, -0.05):
            for naive in (False, True):
                found = sequential(args.gates, change, args.seed, naive)
                shares = [
                    found.verdicts.get(v, 0) / found.gates
                    for v in ("pass", "regression", "inconclusive", "improvement")
                ]
                row = " | ".join(f"{s:.1%}" for s in shares)
                print(f"| {change:+.0%} | {'95% each' if naive else 'alpha spent'} | {row} | {found.mean_sets:.2f} |")
        return 0
    print(f"pair noise {args.pair_noise:.1%}, offset {args.offset:.1%}, floor {args.floor:.1%}", end=", ")
    print(f"change {args.change:+.1%}")
    print("| design | mode | gates | coverage | mean width | narrowed by the floor |")
    print("|---|---|---|---|---|---|")
    for design in DESIGNS:
        found = coverage(design, args.gates, args.seed, args.change, args.floor, args.pair_noise, args.offset)
        print(
            f"| {design.name} | {design.mode} | {found.gates} | {found.share:.1%} | "
            f"{found.mean_width:.1%} | {found.narrowed} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
