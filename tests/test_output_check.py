"""Greedy output checks on a GPU (run/output_check.py): lossless and stability come from rounds of
their own in vLLM's batch-invariant mode, not from timing rounds whose numerics depend on the batch.

The fake engines behave as a GPU's do: a timing engine's greedy tokens depend on the method and the
batch (so SD's never equal no-SD's, and a round of one shape differs from another), while an
engine started with VLLM_BATCH_INVARIANT=1 gives every prompt the same tokens however it is batched.
"""

from __future__ import annotations

import pytest
from records import make_scenario, reference_scenario
from sessions import run_session
from test_session import DEVICE, FakeEngine, canned_calls, fake_config

from specperf.records import OutputCheck
from specperf.run.engines.engine import EngineError
from specperf.run.output_check import BATCH_INVARIANT_ENV, CHECK_ENV, check_scenario, chosen_way
from specperf.run.pool import EnginePool
from specperf.run.session import RunSession

GPU = {**DEVICE, "kind": "gpu", "name": "NVIDIA H100 80GB HBM3", "hardware_key": "gpu-test"}
REF, SD = reference_scenario(), make_scenario()
SAME = [7, 8, 9, 10]  # every prompt's output in batch-invariant mode, SD or not


class GpuEngine(FakeEngine):
    """Timing engines: tokens that depend on the method and the batch; check engines: `SAME`, unless
    `alone_differs` (a prompt alone gets other tokens), or no batch-invariant mode (`has_mode` False)."""

    def __init__(self, config, *, has_mode=True, alone_differs=False, fail_check=False, lossy=False):
        super().__init__(config)
        self.lossy = lossy and config.speculative_config is not None  # SD that changes what the target says
        self.invariant = config.env.get("VLLM_BATCH_INVARIANT") == "1" and has_mode
        self.checking = "SPECPERF_OUTPUT_CHECK" in config.env
        self.effective_config = {"batch_invariant": self.invariant if has_mode else None}
        self.alone_differs, self.fail_check = alone_differs, fail_check

    def generate(self, prompts, max_tokens, timeout_s=3600.0):
        if self.checking and self.fail_check:
            raise EngineError("CUDA error: an illegal memory access was encountered")
        if self.invariant or (self.checking and not self.config.env.get("VLLM_BATCH_INVARIANT")):
            self.tokens = SAME + ([0] if self.alone_differs and len(prompts) == 1 else []) + ([5] if self.lossy else [])
        else:  # bf16 numerics: what the batch and the method make of the logits
            self.tokens = SAME[:2] + [len(prompts) + self.calls, 1 if self.config.speculative_config else 2]
        return super().generate(prompts, max_tokens, timeout_s)


class Starter:
    def __init__(self, **options):
        self.options, self.started = options, []

    def __call__(self, config, start_timeout_s, python=None):
        engine = GpuEngine(config, **self.options)
        engine.python = python
        self.started.append(engine)
        return engine


def session(tmp_path, device=GPU, starter=None, **kwargs) -> RunSession:
    pool = EnginePool(start=starter or Starter(), configure=fake_config, log=lambda line: None, parallel_starts=1)
    return run_session(tmp_path, pool=pool, prepare=canned_calls, device=device, **kwargs)


def test_on_a_cpu_the_timing_rounds_check_the_outputs_and_on_a_gpu_they_cannot(tmp_path):
    cpu = session(tmp_path / "cpu", device=DEVICE)
    cpu.run(REF)
    sd = cpu.run(SD)
    assert sd.output_check.way == OutputCheck.TIMING
    assert sd.metrics["lossless_fraction"].value == 0.0  # the GPU's numerics, taken for SD's fault
    assert "greedy outputs differ between rounds" in sd.validity.reasons


def test_on_a_gpu_lossless_and_stability_come_from_batch_invariant_rounds(tmp_path):
    starter = Starter()
    ref8, sd8 = REF.replace(batch_size=8), SD.replace(batch_size=8)
    run = session(tmp_path, starter=starter, selection=(REF, ref8, SD, sd8))
    run.run(REF), run.run(ref8)
    sd, sd8 = run.run(SD), run.run(sd8)
    for result in (sd, sd8):
        assert result.valid, result.validity
        assert result.output_check == OutputCheck(
            way=OutputCheck.OWN_ROUNDS, stable=True, prompts=1, note="batch-invariant mode"
        )
        assert result.metrics["lossless_fraction"].value == 1.0 and result.lossless.total == result.scenario.batch_size
    checks = [e for e in starter.started if "SPECPERF_OUTPUT_CHECK" in e.config.env]
    # one check engine per engine key, started before its key's timing engine, with the switch on
    assert [(e.config.model, e in checks) for e in starter.started] == [
        (REF.method.label, True),
        (REF.method.label, False),
        (SD.method.label, True),
        (SD.method.label, False),
    ]
    assert all(e.config.env["VLLM_BATCH_INVARIANT"] == "1" for e in checks)
    assert not any("VLLM_BATCH_INVARIANT" in e.config.env for e in starter.started if e not in checks)
    assert all(e.closed for e in checks)  # never alive beside the timing engine


def test_sd_that_changes_the_outputs_is_caught_on_the_check_rounds(tmp_path):
    run = session(tmp_path, starter=Starter(lossy=True))
    run.run(REF)
    sd = run.run(SD)
    assert sd.output_check.way == OutputCheck.OWN_ROUNDS and sd.valid
    assert sd.metrics["lossless_fraction"].value == 0.0 and sd.lossless.identical == 0


def test_a_scenario_outside_the_selection_is_checked_when_it_comes(tmp_path):
    starter = Starter()
    run = session(tmp_path, starter=starter, selection=(REF, SD))
    ref8, sd8 = REF.replace(batch_size=8, output_len=16), SD.replace(batch_size=8, output_len=16)
    for scenario in (REF, ref8, SD, sd8):
        result = run.run(scenario)
        assert result.output_check.way == OutputCheck.OWN_ROUNDS, result.output_check
    assert run.results[-1].metrics["lossless_fraction"].value == 1.0
    assert sum("SPECPERF_OUTPUT_CHECK" in e.config.env for e in starter.started) == 4  # each key twice


def test_a_vllm_without_batch_invariant_mode_checks_nothing_on_a_gpu_and_says_why(tmp_path):
    starter = Starter(has_mode=False)
    run = session(tmp_path, starter=starter)
    run.run(REF)
    sd = run.run(SD)
    assert sd.valid, sd.validity  # the timing rounds' numerics no longer invalidate it
    assert sd.output_check.way == OutputCheck.NOT_CHECKED
    assert sd.output_check.note == "vLLM 0.0-fake has no batch-invariant mode (VLLM_BATCH_INVARIANT)"
    assert "lossless_fraction" not in sd.metrics and sd.lossless is None
    assert sum("SPECPERF_OUTPUT_CHECK" in e.config.env for e in starter.started) == 1  # asked once per build


def test_outputs_that_change_with_the_batch_in_batch_invariant_mode_make_the_result_invalid(tmp_path):
    run = session(tmp_path, starter=Starter(alone_differs=True))
    run.run(REF)
    sd = run.run(SD)
    assert sd.output_check.stable is False
    assert any(r.startswith("greedy outputs depend on the batch") for r in sd.validity.reasons), sd.validity


def test_a_failing_check_engine_leaves_the_outputs_unchecked_and_the_timing_measured(tmp_path):
    run = session(tmp_path, starter=Starter(fail_check=True))
    ref = run.run(REF)
    assert ref.status == "ok" and ref.metrics["throughput_tok_s"].value > 0
    assert ref.output_check.way == OutputCheck.NOT_CHECKED
    assert ref.output_check.note.startswith("its check engine failed: CUDA error")


def test_a_gate_checks_each_build_on_its_own_engines(tmp_path):
    starter = Starter()
    environments = {side: {"vllm": "0.0-fake", "methods": {}} for side in ("current", "candidate")}
    run = session(tmp_path, starter=starter, candidate_python="/candidate/python", environments=environments)
    run.run(REF)
    sd = run.run(SD)
    assert sd.valid and sd.metrics["lossless_fraction"].value == 1.0
    assert sd.gate.output_drift == 0
    checks = [(e.config.model, e.python) for e in starter.started if "SPECPERF_OUTPUT_CHECK" in e.config.env]
    assert sorted(checks, key=str) == sorted(
        [(label, python) for label in (REF.method.label, SD.method.label) for python in (None, "/candidate/python")],
        key=str,
    )


def test_the_way_follows_the_device_unless_asked():
    assert chosen_way("auto", GPU) == "own rounds" and chosen_way("auto", DEVICE) == "timing rounds"
    assert chosen_way("rounds", DEVICE) == "own rounds" and chosen_way("timing", GPU) == "timing rounds"
    with pytest.raises(ValueError, match="--output-check must be one of auto, timing, rounds"):
        chosen_way("sometimes", GPU)


def test_a_check_engine_is_offline_untraced_and_keyed_apart_from_the_timing_engine():
    served = SD.replace(mode="serve", concurrency=4, trace=False)
    checker = check_scenario(served, batch_invariant=True)
    assert not checker.serves and not checker.trace
    assert checker.env == {**CHECK_ENV, **BATCH_INVARIANT_ENV} and checker.engine_key != served.engine_key
    assert check_scenario(SD.replace(trace=True), True).engine_key == check_scenario(SD, True).engine_key
    assert "VLLM_BATCH_INVARIANT" not in check_scenario(SD, batch_invariant=False).env


def outcome_report(n: int, verdict: str | None = None, skipped: bool = False):
    """A test report as the suite's cases make them: the scenario property, and the verdict once measured."""
    from types import SimpleNamespace

    from specperf.suite.selection import SCENARIO_PROPERTY, VERDICT_PROPERTY

    properties = [(SCENARIO_PROPERTY, "id")] + ([(VERDICT_PROPERTY, verdict)] if verdict else [])
    return SimpleNamespace(nodeid=f"case-{n}", user_properties=properties, skipped=skipped, when="call")


@pytest.mark.parametrize(
    "outcomes, why",
    [
        ([("invalid", False)] * 3, "no scenario was judged: all 3 measurements were invalid, so this run fails"),
        ([(None, True), (None, True)], "every scenario was skipped: this run measured nothing, so it fails"),
        ([("invalid", False), ("pass", False), (None, True)], None),
        ([("no-baseline", False)], None),
    ],
)
def test_a_run_that_judged_nothing_fails_like_one_that_measured_nothing(outcomes, why):
    """Every measurement invalid (a GPU shared with a process the suite did not start, in every
    scenario) fails no case by itself: the run must not end green having judged nothing."""
    from specperf.suite.outcomes import ScenarioOutcomes

    seen = ScenarioOutcomes()
    for n, (verdict, skipped) in enumerate(outcomes):
        seen.pytest_runtest_logreport(outcome_report(n, verdict, skipped))
    assert seen.why_nothing_counts() == why


def test_the_option_offers_every_way_the_checks_know(pytester):
    result = pytester.runpytest("-p", "no:cacheprovider", "--output-check", "sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in result.stderr.lines if "--output-check" in line and "invalid choice" in line]
    from specperf.run.output_check import OPTIONS

    offered = line.split("choose from", 1)[1]
    assert [o for o in ("auto", "timing", "rounds", "sometimes") if o in offered] == list(OPTIONS)
