"""The CPU tier's fault-injection plugin (tests/cpu_tier/vllm_faults): the step slowdown's fraction,
fixed or read from a file at every step (benchmarks/gate_power.py --shared-engines switches it
between rounds)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

PLUGIN = Path(__file__).resolve().parent / "cpu_tier" / "vllm_faults" / "specperf_faults.py"


def plugin():
    spec = importlib.util.spec_from_file_location("specperf_faults", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_fixed_fraction_is_that_number():
    assert plugin()._fraction("0.05")() == 0.05


def test_a_fraction_from_a_file_follows_the_file_from_step_to_step(tmp_path):
    control = tmp_path / "slowdown"
    control.write_text("0.000000")
    fraction = plugin()._fraction(f"@{control}")
    assert fraction() == 0.0
    control.write_text("0.050000")
    assert fraction() == 0.05
    control.write_text("0.5")  # shorter than before: the file is rewritten, not patched
    assert fraction() == 0.5
    control.write_text("")
    assert fraction() == 0.0
