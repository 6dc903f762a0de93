"""Predicting a profile's wall time before it runs (`specperf plan`).

`planner` (where each figure of a scenario's cost comes from), `shards` (the plan per shard and
on N GPUs), `study` (the study's figures a plan leans on for GPU-tier profiles), `view` (what the
command shows).  The default cost model, shared with the sharder, is analysis/cost.py.
"""

from .planner import DEFAULT, FITTED, HISTORY, OUTPUT_LEN, STUDY, TRACES, Estimate, Figure, Planner
from .shards import Plan, make_plan, split

__all__ = [
    "DEFAULT",
    "Estimate",
    "FITTED",
    "Figure",
    "HISTORY",
    "OUTPUT_LEN",
    "Plan",
    "Planner",
    "STUDY",
    "TRACES",
    "make_plan",
    "split",
]
