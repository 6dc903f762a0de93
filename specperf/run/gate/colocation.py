"""Engines alive together on one GPU set: how many a scenario keeps for a run's options, and whether
vLLM starts every one of them.

A scenario's engines run on the same GPUs (the first TP of the process's).  They are alive together
when a run pairs them (run/measurement.py): a gate's current and candidate build, an SD engine and
its no-SD reference (`paired_reference`), `gate_instances` engines per side; in blocks
(`--gate-blocks`, or the profile's `gate_blocks`) one engine is alive at a time.

vLLM's GPU worker checks memory once, as it starts (vllm/v1/worker/utils.py `request_memory`): it
asks for gpu_memory_utilization x the GPU's total memory and refuses to start ("Free memory on
device ... is less than desired GPU memory utilization") when less than that is free.  An engine
that is up holds about its share (its KV cache takes what the weights and activations leave of it),
so engines side by side start only when their shares add up to no more than the GPU, less what the
starting process needs outside any share (its CUDA context, NCCL's buffers under TP): at most
COLOCATION_LIMIT together.  kv_cache_memory_bytes sizes the KV cache instead (vLLM then skips its
memory profiling), but the start check still asks the engine's full gpu_memory_utilization share;
what such an engine holds depends on its weights, unknown before it starts, so it is counted at its
share as well.  CPU engines pass no such check (the CPU worker sizes its KV cache by
kv_cache_memory_bytes): callers ask only where the engines run on a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from ...profiles.scenarios import Scenario

# The shares of the engines alive together may add up to this much of a GPU: the rest is for the
# starting process's CUDA context and NCCL's buffers (a few GiB of an 80 GiB H100), which its own
# free-memory check counts as taken.  An assumption, not measured on a GPU.
COLOCATION_LIMIT = 0.95
# vLLM's gpu_memory_utilization where a profile leaves it unset: CacheConfig's default, 0.92 in the
# installed vLLM 0.32 (vllm/config/cache.py), 0.9 in older ones such as 0.10.  Two engines exceed
# the limit with either.
VLLM_DEFAULT_SHARE = 0.92


def blocks_for(scenario: Scenario, gate_blocks: int | None) -> int | None:
    """The blocks a paired scenario runs in: --gate-blocks where given, else its profile's gate_blocks
    (None: engines side by side)."""
    return gate_blocks if gate_blocks is not None else scenario.gate_blocks


def engines_together(scenario: Scenario, candidate: bool, gate_blocks: int | None) -> int:
    """How many engines of `scenario` are alive at once: one per build (two in a gate), each with its
    no-SD reference beside it under paired_reference, gate_instances of each; one in blocks."""
    sides = 2 if candidate else 1
    engines = sides * (2 if scenario.paired_reference and not scenario.is_reference else 1)
    if engines == 1 or blocks_for(scenario, gate_blocks) is not None:
        return 1
    return engines * scenario.gate_instances


def memory_share(scenario: Scenario) -> float:
    """The fraction of each GPU's memory an engine of `scenario` asks for as it starts."""
    return float(scenario.engine_args.get("gpu_memory_utilization", VLLM_DEFAULT_SHARE))


def _why(scenario: Scenario, candidate: bool) -> str:
    reasons = ["a gate (--candidate)"] if candidate else []
    if scenario.paired_reference and not scenario.is_reference:
        reasons.append("paired_reference")
    if scenario.gate_instances > 1:
        reasons.append(f"gate_instances = {scenario.gate_instances}")
    return ", ".join(reasons[:-1]) + (" and " if len(reasons) > 1 else "") + reasons[-1]


def colocation_problem(
    scenarios: Iterable[Scenario], profile_path: Path | str, candidate: bool, gate_blocks: int | None
) -> str | None:
    """One line naming the profile file, the first scenario whose engines alive together ask more of
    a GPU than COLOCATION_LIMIT, and the fixes; None when every scenario's engines fit."""
    for scenario in scenarios:
        engines = engines_together(scenario, candidate, gate_blocks)
        share = memory_share(scenario)
        if engines < 2 or engines * share <= COLOCATION_LIMIT + 1e-9:
            continue
        given = "gpu_memory_utilization" in scenario.engine_args
        fitting = math.floor(COLOCATION_LIMIT / engines * 100) / 100
        return (
            f"{profile_path}: {scenario.id}: {_why(scenario, candidate)} keeps {engines} engines alive together "
            f"on its GPUs, each asking gpu_memory_utilization {share:g}"
            f"{'' if given else ' (vLLM default)'}, {engines * share:.2f} of the memory in all, and vLLM "
            f"starts an engine only when its share is free (at most {COLOCATION_LIMIT:g} together): "
            f"run it in blocks with one engine alive (--gate-blocks N, or gate_blocks in the profile), "
            f"or lower gpu_memory_utilization to {fitting:g}"
        )
    return None
