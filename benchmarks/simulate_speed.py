"""How long the speedup simulator takes over study-sized traces: every request of the study's four
released trace files, every mode (k = 1, 3, 5, oracle) of EAGLE and n-gram and the combined
oracle, at batch sizes 1 to 128.  Prints figures, asserts nothing:

    python benchmarks/simulate_speed.py DIR     # DIR: SpecDecode-Bench/simulator's data/llama3.1-8B/
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from specperf.analysis import simulate, study_traces

DATASETS = ("gsm8k", "instructcoder", "sharegpt", "cnn")


def main() -> int:
    folder = Path(sys.argv[1])
    started = time.perf_counter()
    traces = {d: study_traces.read_study_traces(folder / f"combined_{d}.jsonl") for d in DATASETS}
    read_s = time.perf_counter() - started
    runs, steps, started = 0, 0, time.perf_counter()
    for dataset, requests in traces.items():
        for proposer in ("eagle", "ngram", "combined"):
            for mode in ("oracle",) if proposer == "combined" else simulate.MODES:
                simulate.speedups(requests, proposer, mode, dataset=dataset)
                runs += 1
        steps += sum(len(r.acc_len["eagle"]) for r in requests)
    simulate_s = time.perf_counter() - started
    requests = sum(len(r) for r in traces.values())
    print(
        f"{requests} requests ({steps:,} output tokens) in {len(DATASETS)} trace files: read in {read_s:.2f} s; "
        f"{runs} simulations x {len(simulate.BATCH_SIZES)} batch sizes in {simulate_s:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
