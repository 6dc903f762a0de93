"""The suite's speedup simulator against the study's own, on the study's released traces: the same
speedup per dataset, proposer, mode and batch size.  Needs a checkout of SpecDecode-Bench/simulator
(its main.py needs tqdm); the study's is slow at large batches, so pick a few.  Prints figures:

    python benchmarks/simulate_vs_study.py SIMULATOR_CHECKOUT gsm8k eagle k3,oracle 1,8
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

from specperf.analysis.simulate import read_study_traces, speedups, study_sample


def main() -> int:
    checkout, dataset, proposer, modes, batches = sys.argv[1:6]
    sys.path.insert(0, checkout)
    from predictor import AccLenPredictMethod
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
        ours = speedups(requests, proposer, mode, sizes, dataset=dataset)
        for batch in sizes:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                theirs = study.simulate_like_experiment(batch)
            print(
                f"{dataset} {proposer} {mode} bs{batch}: study {theirs:.4f}, suite {ours[batch]:.4f} "
                f"({ours[batch] / theirs - 1:+.3%})",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
