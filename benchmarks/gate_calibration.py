"""Are the gate's intervals calibrated?  Repeats of one gate, each judged on its own, compared.

Give it the run directories of the same gate run several times with fresh engines (for example
`tox -e gate -- --reports-dir reports/calibration` three times).  For every speed metric of every
scenario it prints each repeat's change and 95% interval, how often one repeat's estimate falls
inside another's interval (for a calibrated interval about 83% of the time: the difference of two
independent estimates has sqrt(2) times the error of one; 95% would need intervals that are too
wide), and how often the repeats' verdicts agree; "after" rows give each repeat's SD between engine
pairs and between pairs (log units).  "before" judges the pairs as independent (the
Hodges-Lehmann estimate with a bootstrap interval over all pairs, as the gate did before engine
pairs entered its error), "after" as the gate judges now (judge/gate.py).  Prints figures, asserts
nothing; needs no engine:

    .tox/cpu/bin/python benchmarks/gate_calibration.py reports/calibration/*/
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

SPEED = ("throughput_tok_s", "speedup")


def independent_pairs(current: list[float], candidate: list[float]) -> tuple[float, float, float]:
    """(change, low, high) with every pair taken as independent: a bootstrap percentile interval."""
    import numpy as np
    from scipy.stats import bootstrap

    from specperf.judge.paired import hodges_lehmann

    logs = np.log(np.asarray(candidate) / np.asarray(current))
    result = bootstrap(
        (logs,),
        hodges_lehmann,
        confidence_level=0.95,
        n_resamples=2000,
        method="percentile",
        vectorized=True,
        random_state=0,
    )
    low, high = result.confidence_interval
    return math.expm1(float(hodges_lehmann(logs))), math.expm1(low), math.expm1(high)


def status(change: float, low: float, high: float, tolerance: float) -> str:
    if abs(change) <= tolerance or low <= 0 <= high:
        return "pass"
    return "regression" if change < 0 else "improvement"


def main() -> int:
    from specperf.judge.gate import judge_gate
    from specperf.judge.metrics import metric_samples
    from specperf.judge.rules import Rules
    from specperf.records import ScenarioResult
    from specperf.storage import read_record

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories of repeats of one gate")
    args = parser.parse_args()

    table: dict[tuple[str, str, str], list[tuple[float, float, float, str, str]]] = {}
    for run in args.runs:
        for path in sorted((run / "results").glob("*.json")):
            result = read_record(path, ScenarioResult, "result")
            if result.gate is None or not result.ok:
                continue
            rules = Rules.of(result.scenario)
            after = {m.metric: m for m in judge_gate(result, rules).metrics}
            current, candidate = metric_samples(result.gate.current.metrics), metric_samples(result.metrics)
            for metric in SPEED:
                if metric not in after or after[metric].ci_low is None:
                    continue
                v = after[metric]
                parts = f" (SD {v.between_engines or 0:.1%} engines / {v.between_pairs or 0:.1%} pairs)"
                table.setdefault((result.id, metric, "after"), []).append(
                    (v.change, v.ci_low, v.ci_high, v.status, parts)
                )
                before = independent_pairs(current[metric], candidate[metric])
                table.setdefault((result.id, metric, "before"), []).append(
                    (*before, status(*before, rules.speed_tolerance(metric)), "")
                )
    print(
        f"{'scenario':<42} {'metric':<16} {'judged':<6} {'repeats: change [interval] verdict':<90} "
        f"{'inside':>7} {'agree':>6}"
    )
    for (sid, metric, judged), repeats in sorted(table.items()):
        ordered = list(itertools.permutations(repeats, 2))
        inside = sum(b[1] <= a[0] <= b[2] for a, b in ordered)
        agree = sum(a[3] == b[3] for a, b in itertools.combinations(repeats, 2))
        shown = "; ".join(f"{c:+.1%} [{lo:+.1%}, {hi:+.1%}] {s}{parts}" for c, lo, hi, s, parts in repeats)
        print(
            f"{sid:<42} {metric:<16} {judged:<6} {shown:<90} {inside:>3}/{len(ordered):<3} "
            f"{agree:>2}/{math.comb(len(repeats), 2)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
