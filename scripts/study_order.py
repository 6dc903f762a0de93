#!/usr/bin/env python3
"""Prints, as JSON, the order in which the study's loader reads each offline workload sample.

The study's HuggingFaceDataset.load_data (SpecDecode-Bench/vllm, benchmarks/benchmark_dataset.py)
streams a dataset and shuffles the stream: ``load_dataset(..., streaming=True).shuffle(seed=42)``.
This script makes that call on the local JSONL samples, with whatever ``datasets`` is installed,
and imports nothing of specperf.  fixtures/study-order-datasets-4.0.0.json was written with the
study's pins (constraints/study.txt):

    python3 -m venv /tmp/study && /tmp/study/bin/pip install -c constraints/study.txt datasets transformers
    /tmp/study/bin/python scripts/study_order.py ../shared/datasets > fixtures/study-order-datasets-4.0.0.json
"""

import json
import sys
from pathlib import Path

import datasets

SEED = 42  # scripts/common.py SEED
STREAMED = ("cnn_dailymail.jsonl", "gsm8k.jsonl", "instructcoder_editeval.jsonl", "aime24.jsonl")


def orders(folder: Path) -> dict[str, list[str]]:
    found = {}
    for name in STREAMED:
        stream = datasets.load_dataset("json", data_files=str(folder / name), split="train", streaming=True)
        found[name] = [str(record["id"]) for record in stream.shuffle(seed=SEED)]
    return found


if __name__ == "__main__":
    print(json.dumps({"datasets": datasets.__version__, "seed": SEED, "orders": orders(Path(sys.argv[1]))}, indent=1))
