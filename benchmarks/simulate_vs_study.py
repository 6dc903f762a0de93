"""The suite's speedup simulator against the study's own, on the study's released traces: the same
speedup per dataset, proposer, mode and batch size, each of the three ways the study's prints it
(throughput ratio to 4 digits; the mean per-request ratio and the request-latency ratio to the 2
decimals it prints them with).  Needs a checkout of SpecDecode-Bench/simulator
(its main.py needs tqdm); the study's is slow at large batches, so pick a few.  Prints figures:

    python benchmarks/simulate_vs_study.py SIMULATOR_CHECKOUT gsm8k eagle k3,oracle 1,8
    python benchmarks/simulate_vs_study.py SIMULATOR_CHECKOUT gsm8k combined oracle 1,8 0.002

A sixth argument sets the combined mode's switching cost (seconds per request and switch) in both,
where the study's constant is 0.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from dataclasses import replace
from pathlib import Path

from specperf.analysis.simulate import LLAMA_8B_H100, simulate_speedups
from specperf.analysis.study_traces import read_study_traces, study_sample

# what simulate_like_experiment prints beside the throughput ratio it returns
PRINTED = {
    "latency": re.compile(r"speedup by request latency: ([0-9.]+)"),
    "per_request": re.compile(r"Average speedup for batch size \d+: ([0-9.]+)"),
}


def main() -> int:
    checkout, dataset, proposer, modes, batches = sys.argv[1:6]
    switching = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    sys.path.insert(0, checkout)
    from predictor import AccLenPredictMethod, Llama8BH100

    Llama8BH100.combined_switching_overhead = switching
    cost = replace(LLAMA_8B_H100, switching=switching)
    from simulator import AccLenGroundTruth, SpecSimulator

    truth = {
        "eagle": AccLenGroundTruth.EAGLE,
        "ngram": AccLenGroundTruth.NGRAM,
        "combined": AccLenGroundTruth.COMBINE_NGRAM_EAGLE,
    }[proposer]
    path = Path(checkout) / "data" / "llama3.1-8B" / f"combined_{dataset}.jsonl"
    sizes = [int(b) for b in batches.split(",")]
    requests = study_sample(read_study_traces(path))
    for mode in modes.split(","):
        method = {
            "k1": AccLenPredictMethod.FIXED_1,
            "k3": AccLenPredictMethod.FIXED_3,
            "k5": AccLenPredictMethod.FIXED_5,
            "oracle": AccLenPredictMethod.ORACLE,
        }[mode]
        study = SpecSimulator(str(path), method, truth, dataset)
        ours = simulate_speedups(requests, proposer, mode, sizes, cost, dataset=dataset)
        for batch in sizes:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
                theirs = study.simulate_like_experiment(batch)
            suite = ours[batch]
            others = {way: float(pattern.search(printed.getvalue()).group(1)) for way, pattern in PRINTED.items()}
            print(
                f"{dataset} {proposer} {mode} bs{batch}: study {theirs:.4f}, suite {suite.throughput:.4f} "
                f"({suite.throughput / theirs - 1:+.3%}); per request {others['per_request']:.2f} / "
                f"{suite.per_request:.2f}; latency {others['latency']:.2f} / {suite.latency:.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
