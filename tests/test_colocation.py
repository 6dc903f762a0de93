"""Engines alive together on one GPU set (run/gate/colocation.py): how many, whether vLLM starts them all,
and that the count is the one the measuring loop keeps alive."""

from __future__ import annotations

import pytest
from records import make_scenario, reference_scenario
from test_gate import CANDIDATE, gate
from test_session import Starter

from specperf.run.gate.colocation import COLOCATION_LIMIT, colocation_problem, engines_together

SD, REF = make_scenario(), reference_scenario()


def with_share(scenario, share):
    return scenario.replace(engine_args={**scenario.engine_args, "gpu_memory_utilization": share})


@pytest.mark.parametrize(
    "scenario, candidate, blocks, engines",
    [
        (SD, False, None, 1),  # a plain run: one engine at a time
        (SD, True, None, 2),  # a gate: both builds
        (SD.replace(paired_reference=True), False, None, 2),  # SD beside its no-SD reference
        (SD.replace(paired_reference=True), True, None, 4),  # both, in a gate
        (REF.replace(paired_reference=True), True, None, 2),  # a reference has no reference beside it
        (SD.replace(gate_instances=3), True, None, 6),  # three engines per side
        (SD.replace(gate_instances=3), False, None, 1),  # instances only in paired runs
        (SD.replace(paired_reference=True, gate_instances=2), True, 2, 1),  # blocks: one engine alive
        (SD.replace(gate_blocks=5), True, None, 1),  # the profile's blocks
    ],
)
def test_engines_alive_together(scenario, candidate, blocks, engines):
    assert engines_together(scenario, candidate, blocks) == engines


class CountingStarter(Starter):
    """Counts the fake engines alive at once, as the pool starts and closes them."""

    def __init__(self):
        super().__init__()
        self.alive = self.most = 0

    def __call__(self, config, start_timeout_s, python=None):
        engine = super().__call__(config, start_timeout_s, python)
        self.alive += 1
        self.most = max(self.most, self.alive)
        close = engine.close

        def counted_close():
            self.alive -= 1
            close()

        engine.close = counted_close
        return engine


@pytest.mark.parametrize(
    "scenario, blocks",
    [
        (SD.replace(rounds=8), None),
        (SD.replace(rounds=8, paired_reference=True), None),
        (SD.replace(rounds=8, paired_reference=True, gate_instances=2), None),
        (SD.replace(rounds=8, paired_reference=True, gate_instances=2), 3),
        (SD.replace(rounds=8, gate_instances=2, gate_blocks=4), None),
    ],
)
def test_the_count_is_what_a_gate_keeps_alive(tmp_path, scenario, blocks):
    """The function and the measuring loop agree: a gate of fake engines never has more alive at once."""
    starter = CountingStarter()
    result = gate(tmp_path, starter, gate_blocks=blocks).run(scenario)
    assert result.status == "ok", result.error
    assert starter.most == engines_together(scenario, True, blocks)
    assert {e.python for e in starter.started} == {None, CANDIDATE}


def test_a_gate_at_nine_tenths_of_the_gpu_is_refused_with_the_fixes():
    problem = colocation_problem([with_share(REF, 0.9), with_share(SD, 0.9)], "p/h100.toml", True, None)
    assert problem.startswith(f"p/h100.toml: {REF.id}: a gate (--candidate) keeps 2 engines alive together")
    assert "each asking gpu_memory_utilization 0.9, 1.80 of the memory in all" in problem
    assert "--gate-blocks N, or gate_blocks in the profile" in problem
    assert problem.endswith("or lower gpu_memory_utilization to 0.47") and "\n" not in problem
    assert 2 * 0.47 <= COLOCATION_LIMIT < 2 * 0.48
    assert colocation_problem([with_share(SD, 0.9)], "p/h100.toml", True, 2) is None  # blocks: one engine
    assert colocation_problem([with_share(SD, 0.9)], "p/h100.toml", False, None) is None  # not a gate
    assert colocation_problem([with_share(SD, 0.47)], "p/h100.toml", True, None) is None
    assert colocation_problem([with_share(SD, 0.48)], "p/h100.toml", True, None) is not None


def test_an_unset_share_is_vllms_default_and_kv_cache_bytes_do_not_lower_what_vllm_asks():
    """kv_cache_memory_bytes sizes the KV cache, but vLLM's start check still asks the engine's share."""
    sized = SD.replace(engine_args={"kv_cache_memory_bytes": 256 * 2**20})
    problem = colocation_problem([sized], "cpu.toml", True, None)
    assert "each asking gpu_memory_utilization 0.92 (vLLM default)" in problem
    paired = with_share(SD, 0.3).replace(paired_reference=True, gate_instances=2)
    problem = colocation_problem([paired], "x.toml", True, None)
    assert "a gate (--candidate), paired_reference and gate_instances = 2 keeps 8 engines" in problem
    assert problem.endswith("lower gpu_memory_utilization to 0.11")
