"""The cost model of a scenario where nothing was measured: a model's size from its name, a tier's
stated constants, and from them a call's throughput, a scenario's measuring time and an engine's
start.  The planner falls back on it (plan/planner.py) and the sharder splits by it
(run/sharding.py), so both see the same costs; the dtype sizes are the memory estimate's too
(profiles/model_memory.py)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..methods import method_of
from ..records.scenario import Scenario


@dataclass(frozen=True)
class Machine:
    """Cost constants of a tier when nothing measured says better (rough, stated, replaceable by history)."""

    name: str
    step_overhead_s: float  # per decode step whatever the model: scheduling, sampling, launches
    bandwidth: float  # weight bytes a device reads per second (decode is memory-bound)
    flops: float  # effective FLOP/s of a device (prefill, and the growth of a step with batch)
    start_s: float  # engine start: process, imports, memory profiling, KV cache (GPU: compile, graphs)
    start_s_per_gb: float  # engine start: per GB of weights a device loads
    server_start_s: float  # what a server's start adds: its API server and worker processes import vLLM too
    scenario_s: float  # per scenario: workload sample, tokenising, judging, writing the result
    run_s: float  # per run (shard): pytest start, vLLM import, report


# A 2-core x86 VM: ~10 GB/s of memory bandwidth, ~20 GFLOP/s per core in float32 matmuls.
CPU = Machine(
    "CPU",
    step_overhead_s=0.010,
    bandwidth=10e9,
    flops=40e9,
    start_s=10.0,
    start_s_per_gb=10.0,
    server_start_s=30.0,  # servers 55-64 s against 20-36 s offline for the same models (cpu-smoke, AMD EPYC)
    scenario_s=1.0,
    run_s=30.0,
)
# One H100 80GB: 3.35 TB/s HBM3 (80% reached), ~400 TFLOP/s dense bf16 in practice; compile and
# CUDA-graph capture dominate a start.
H100 = Machine(
    "H100 80GB",
    step_overhead_s=0.0025,
    bandwidth=2.7e12,
    flops=400e12,
    start_s=60.0,
    start_s_per_gb=1.0,
    server_start_s=20.0,  # the CPU tier's two extra imports on a faster host; not measured on a GPU
    scenario_s=2.0,
    run_s=90.0,
)
DEFAULT_PROMPT_TOKENS = 200  # a workload without a released trace
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8, "double": 8}
UNSTATED_DTYPE_BYTES = 2  # "auto": the checkpoint's own dtype, bfloat16 for the models a plan meets
# Models whose name does not say their size: (total, active) parameters in billions.
KNOWN_SIZES = {"glm-4.5-air": (106.0, 12.0), "tiny-": (0.0064, 0.0064)}  # the suite's tiny checkpoints: ~6.4M


def model_size_b(path: str | None) -> tuple[float, float] | None:
    """(total, active) parameters in billions from a model id ("Qwen/Qwen3-0.6B" -> 0.6), None if unknown."""
    if not path:
        return None
    name = path.rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower()
    for key, size in KNOWN_SIZES.items():
        if key in name:
            return size
    match = re.search(r"(\d+(?:\.\d+)?)([bm])(?![a-z])", name)
    if match is None:
        return None
    size = float(match.group(1)) / (1000 if match.group(2) == "m" else 1)
    return size, size


def target_size_b(scenario: Scenario) -> tuple[float, float]:
    """The target's size; unknown: 8B per TP rank (the study's 8B targets run at TP 1, 70B at TP 4)."""
    return model_size_b(scenario.model.path) or (8.0 * scenario.model.tp,) * 2


def weight_bytes(scenario: Scenario) -> float:
    """Bytes of weights the engine loads: target and draft model, in the profile's dtype."""
    total = target_size_b(scenario)[0]
    draft = scenario.method.params.get("model")
    if isinstance(draft, str) and method_of(scenario.method.name).drafts_with_a_model:  # not a small head
        total += (model_size_b(draft) or (0.0, 0.0))[0]
    dtype = str(scenario.engine_args.get("dtype", "auto")).lower()
    return total * 1e9 * DTYPE_BYTES.get(dtype, UNSTATED_DTYPE_BYTES)


def default_throughput(
    scenario: Scenario, machine: Machine, tokens: float, prompt_tokens: float, speedup: float
) -> float:
    """Output tokens/s of one call of B sequences: prefill, then `tokens` decode steps each reading the
    weights once and computing B tokens; SD divides the decode time by its speedup."""
    total, active = target_size_b(scenario)
    tp, batch = scenario.model.tp, scenario.batch_size
    per_device = weight_bytes(scenario) * active / total / tp
    step = machine.step_overhead_s + per_device / machine.bandwidth + batch * 2 * active * 1e9 / (tp * machine.flops)
    prefill = batch * prompt_tokens * 2 * active * 1e9 / (tp * machine.flops)
    return batch * tokens / (prefill + tokens * step / speedup)


def engine_start_default(scenario: Scenario, machine: Machine) -> float:
    offline = machine.start_s + machine.start_s_per_gb * weight_bytes(scenario) / scenario.model.tp / 1e9
    return offline + (machine.server_start_s if scenario.serves else 0.0)


def calls_per_round(scenario: Scenario) -> int:
    """generate() calls a round makes: one per request replicated B times, or ceil(n/B) of B distinct;
    a serve scenario's round is one load of every request."""
    if scenario.serves:
        return 1
    if scenario.batching == "replicate":
        return scenario.num_requests
    return math.ceil(scenario.num_requests / scenario.batch_size)


def sequences_per_call(scenario: Scenario) -> int:
    """Sequences of one generate() call: B; a serve round's one load: every request."""
    return scenario.num_requests if scenario.serves else scenario.batch_size


def sequences_per_round(scenario: Scenario) -> int:
    """Sequences a round generates: B in each of its calls (a serve round: every request once)."""
    if scenario.serves:
        return scenario.num_requests
    return calls_per_round(scenario) * scenario.batch_size


def measuring_parts(scenario: Scenario, call_s: float, reference_call_s: float = 0.0) -> tuple[float, float]:
    """(warm-up, rounds) seconds of a scenario whose one generate() call takes `call_s`, and its
    paired reference's (`paired_reference`: a no-SD engine alive beside it) `reference_call_s`: the
    warm-up runs the first call `warmup` times on each engine, a round runs every call once on each.
    The one formula the planner (with measured figures) and the sharder (with the default model) use."""
    per_call = call_s + reference_call_s
    return scenario.warmup * per_call, scenario.rounds * calls_per_round(scenario) * per_call


def measuring_s(scenario: Scenario, machine: Machine, prompt_tokens: float = DEFAULT_PROMPT_TOKENS) -> float:
    """Seconds of a scenario's warm-up and rounds by the default model, SD at no speedup (so a paired
    reference's call costs what the SD engine's does); the engine's start not included."""
    tokens = sequences_per_call(scenario) * scenario.output_len
    call_s = tokens / default_throughput(scenario, machine, scenario.output_len, prompt_tokens, 1.0)
    paired = scenario.paired_reference and not scenario.method.is_reference
    return math.fsum(measuring_parts(scenario, call_s, call_s if paired else 0.0))
