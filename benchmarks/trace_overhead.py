"""What tracing costs, and what it shows: a traced and an untraced engine of each scenario run in
alternating rounds (A B B A ..., as the upgrade gate pairs builds), so the throughput ratio per pair
(traced over untraced; negative is a cost) is tracing's overhead, free of the machine's drift.
Also prints the traced side's step time shares and bytes of trace per 1,000 steps.  Prints figures,
asserts nothing.  Needs the CPU tier's environment:

    .tox/cpu/bin/python benchmarks/trace_overhead.py --pairs 10
"""

from __future__ import annotations

import argparse
import json
import sys

DEFAULT_SCENARIOS = [
    "smollm2-135m-nosd-bs1-instructcoder",
    "smollm2-135m-ngram-k3-bs1-instructcoder",
    "smollm2-135m-draft-k3-bs1-instructcoder",
    "tiny-llama-eagle-k3-bs1-instructcoder",
    "tiny-llama-eagle3-k3-bs4-instructcoder",
    "tiny-mimo-mtp-k1-bs1-instructcoder",
]


def main() -> int:
    from specperf.analysis.traces import time_shares
    from specperf.judge.paired import compare_paired
    from specperf.paths import dataset_dir
    from specperf.profiles.scenarios import load_profile
    from specperf.run.calls import CallPreparer
    from specperf.run.measurement import measure_rounds
    from specperf.run.pool import EnginePool
    from specperf.run.tracing.trace import build_trace

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-smoke")
    parser.add_argument("-k", dest="select", nargs="*", default=DEFAULT_SCENARIOS)
    parser.add_argument("--pairs", type=int, default=10)
    args = parser.parse_args()

    # Each scenario untraced and traced, whichever way its profile has it (cpu-smoke traces them all).
    untraced = (s.replace(trace=False) for s in load_profile(args.profile).scenarios)
    scenarios = [s for s in untraced if s.id in args.select]
    prepare = CallPreparer(dataset_dir())
    print(
        f"{'scenario':<42} {'traced':>9} {'95% interval':>17} {'draft':>6} {'verify':>7} {'sample':>7} "
        f"{'rest':>6} {'bytes/1k steps':>14}"
    )
    for scenario in scenarios:
        calls = prepare(scenario)
        pool = EnginePool(log=lambda line: None)
        try:
            measured = measure_rounds(
                pool,
                {"plain": (scenario, None), "traced": (scenario.replace(trace=True), None)},
                calls.calls,
                scenario.output_len,
                scenario.warmup,
                args.pairs,
            )
        finally:
            pool.close()
        rounds = measured.rounds
        verdict = compare_paired(
            "throughput_tok_s", [r.throughput for r in rounds["plain"]], [r.throughput for r in rounds["traced"]], 0.0
        )
        trace = build_trace(
            [r.trace for r in rounds["traced"]], calls.requests, sum(r.output_tokens for r in rounds["traced"])
        )
        shares = time_shares(trace)
        per_round_steps = len(trace.step_us["total"])
        kept = trace.model_copy(update={"seconds": {}, "notes": []}).to_json()
        size = len(json.dumps(kept, separators=(",", ":"))) * 1000 / max(per_round_steps, 1)
        print(
            f"{scenario.id:<42} {verdict.change:>+9.1%} {f'[{verdict.ci_low:+.1%}, {verdict.ci_high:+.1%}]':>17} "
            f"{shares['draft']:>6.1%} {shares['forward']:>7.1%} {shares['sample']:>7.1%} {shares['rest']:>6.1%} "
            f"{size:>14,.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
