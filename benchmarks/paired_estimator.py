"""Which estimate of the per-pair change gives the paired gate more power: resampled measured A/A pairs.

Reads measured A/A rounds (two engines of one build, alternating; benchmarks/data/), centres their
per-pair log ratios (no offset), draws N pairs with replacement, slows the candidate by a known
fraction, and judges each draw as the gate does (beyond the tolerance, one-sided Wilcoxon p < 0.05
and a bootstrap interval excluding no change) with the change estimated as the plain median of the
ratios or as the Hodges-Lehmann estimate (judge/paired.py).  Prints how often each flags, per N.

    python benchmarks/paired_estimator.py [--draws 200]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specperf.judge import paired  # noqa: E402

DATA = Path(__file__).with_name("data") / "aa_pairs_smollm2_ngram.json"


def median_estimate(log_ratios, axis=-1):
    import numpy as np

    return np.median(log_ratios, axis=axis)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--pairs", type=int, nargs="+", default=[10, 15, 20, 30])
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.0, 0.05])
    args = parser.parse_args()
    data = json.loads(args.data.read_text())
    logs = [math.log(b / a) for a, b in zip(data["current"], data["candidate"])]
    centre = statistics.median(logs)
    logs = [x - centre for x in logs]
    print(
        f"{data['what']} ({data['machine']}): {len(logs)} pairs, per-pair log-ratio SD "
        f"{statistics.stdev(logs):.2%}, median offset {centre:+.2%} (removed)"
    )
    print(f"{'pairs':>5} {'slowdown':>8} {'median':>8} {'Hodges-Lehmann':>15}")
    for n in args.pairs:
        for slowdown in args.slowdowns:
            flagged = {}
            for name, estimate in (("median", median_estimate), ("hl", paired.hodges_lehmann)):
                rng, hits = random.Random(1), 0
                with mock.patch.object(paired, "hodges_lehmann", estimate):
                    for _ in range(args.draws):
                        candidate = [math.exp(rng.choice(logs)) * (1 - slowdown) for _ in range(n)]
                        hits += paired.compare_paired("throughput_tok_s", [1.0] * n, candidate).status == "regression"
                flagged[name] = hits / args.draws
            print(f"{n:>5} {slowdown:>8.0%} {flagged['median']:>8.0%} {flagged['hl']:>15.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
