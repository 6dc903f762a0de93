"""The upgrade gate and paired speedup, driven through the run session by fake engines.

Two builds (or an SD engine and its no-SD reference) run in alternating rounds; the fakes stand in
for engines of two environments so every rule is reached without vLLM (tests/cpu_tier runs real ones).
"""

from __future__ import annotations

import pytest
from records import make_scenario, reference_scenario
from sessions import run_session
from test_session import FakeEngine, Starter, canned_calls, fake_config

from specperf.run.engines.engine import EngineError
from specperf.run.pool import EnginePool
from specperf.run.session import RunSession
from specperf.status import OK, UNSUPPORTED

CANDIDATE = "/envs/candidate/bin/python"
REF, SD = reference_scenario(rounds=8), make_scenario(rounds=8)
DEVICE = {"kind": "cpu", "name": "Test CPU", "count": 2, "hardware_key": "cpu-test-2c"}
BOTH_SUPPORT = {"current": {"vllm": "0.29.0", "methods": {}}, "candidate": {"vllm": "0.32.0", "methods": {}}}


def gate(tmp_path, starter: Starter, environments=BOTH_SUPPORT, parallel_starts: int = 1, **kwargs) -> RunSession:
    pool = EnginePool(start=starter, configure=fake_config, log=lambda line: None, parallel_starts=parallel_starts)
    return run_session(
        tmp_path,
        pool=pool,
        prepare=canned_calls,
        device=DEVICE,
        candidate_python=CANDIDATE,
        environments=environments,
        **kwargs,
    )


def statuses(result) -> dict[str, str]:
    return {m.metric: m.status for m in result.verdict.metrics}


def test_two_equal_builds_pass_with_intervals(tmp_path):
    order = []
    starter = Starter(**{label: {"log": order} for label in ("nosd", SD.method.label)})
    run = gate(tmp_path, starter)
    run.run(REF)
    result = run.run(SD)
    assert result.status == OK and result.verdict.status == "pass", result.verdict
    throughput = next(m for m in result.verdict.metrics if m.metric == "throughput_tok_s")
    assert throughput.judged_by == "paired" and throughput.ci_low == throughput.ci_high == 0
    assert result.gate.current.vllm == "0.0-fake" and result.gate.pairing == "interleaved"
    assert result.gate.output_drift == 0 and result.gate.config_diff == {}
    assert result.baseline.vllm == "0.0-fake" and len(result.gate.current.rounds) == len(result.rounds) == 8
    assert {e.python for e in starter.started} == {None, CANDIDATE}
    sd = order[2 * (1 + 8) :]  # after the reference scenario's calls
    b = f"{SD.method.label}@{CANDIDATE}"
    a = SD.method.label
    assert sd == [a, b] + [a, b, b, a] * 4  # warm-up of both, then rounds A B B A ...


def test_a_slower_candidate_is_a_paired_regression(tmp_path):
    starter = Starter(**{f"{SD.method.label}@{CANDIDATE}": {"wall_s": 0.22}})
    run = gate(tmp_path, starter)
    run.run(REF)
    result = run.run(SD)
    assert statuses(result)["throughput_tok_s"] == "regression" and result.verdict.failed
    throughput = next(m for m in result.verdict.metrics if m.metric == "throughput_tok_s")
    assert throughput.change == pytest.approx(0.2 / 0.22 - 1) and throughput.p_value < 0.01
    assert statuses(result)["mean_acceptance_length"] == "pass"


def test_output_drift_and_config_differences_are_reported(tmp_path):
    class Drifting(FakeEngine):
        def __init__(self, config, **options):
            super().__init__(config, tokens=[7, 8, 9, 11], **options)
            self.effective_config = {"max_num_seqs": 4, "async_scheduling": True}

    class DriftStarter(Starter):
        def __call__(self, config, start_timeout_s, python=None):
            engine = (Drifting if python else FakeEngine)(config)
            engine.python = python
            self.started.append(engine)
            return engine

    run = gate(tmp_path, DriftStarter())
    run.run(REF)
    result = run.run(SD)
    assert result.gate.output_drift == SD.batch_size
    assert result.gate.config_diff == {"async_scheduling": [None, True]}
    assert "output drift" in result.verdict.note
    assert result.metrics["lossless_fraction"].value == 1.0  # against the candidate's own reference
    run.finish()
    from specperf.report import write_report

    page = write_report([run.run_dir]).read_text()
    assert "Upgrade gate" in page and "SD methods each build supports" not in page  # no methods listed here
    assert "async_scheduling" in page and "differs between the builds" in page and "judged by" in page
    summary = (run.run_dir / "summary.md").read_text()
    assert "**Upgrade gate**: current vLLM 0.29.0 → candidate vLLM 0.32.0" in summary
    assert "- setting async\\_scheduling: None → True (2 scenarios)" in summary


def test_a_method_the_candidate_lacks_is_unsupported_not_an_error(tmp_path):
    lacking = {**BOTH_SUPPORT, "candidate": {"vllm": "0.12.0", "methods": {"eagle3": "needs vLLM >= 0.13"}}}
    run = gate(tmp_path, Starter(), environments=lacking)
    result = run.run(SD)
    assert result.status == UNSUPPORTED and result.verdict.status == UNSUPPORTED
    assert not result.verdict.failed and "candidate build (vLLM 0.12.0): needs vLLM >= 0.13" in result.error
    assert run.run(REF).status == OK


def test_blocks_keep_one_engine_alive_and_give_each_block_fresh_engines(tmp_path):
    starter = Starter()
    run = gate(tmp_path, starter, gate_blocks=2)
    result = run.run(REF)
    assert result.gate.pairing == "blocks of 2 rounds"
    assert len(result.rounds) == len(result.gate.current.rounds) == 8
    # blocks A B, B A, A B, B A: every block starts both its engines, so no two blocks share one
    assert [e.python for e in starter.started] == [None, CANDIDATE, CANDIDATE, None] * 2
    assert all(e.closed for e in starter.started[:-1])
    assert [r.engine_instance for r in result.rounds] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert result.verdict.status == "pass"


def test_instances_run_side_by_side_and_pairs_take_them_in_turn(tmp_path):
    order = []
    starter = Starter(**{label: {"log": order} for label in ("nosd", SD.method.label)})
    run = gate(tmp_path, starter)
    run.run(REF)
    order.clear()
    result = run.run(SD.replace(gate_instances=2))
    assert result.status == OK and result.gate.pairing == "interleaved, 2 engine pairs (2 per side alive, 1 set(s))"
    engines = starter.started[2:]  # after the reference scenario's two
    assert len(engines) == 4 and not any(e.closed for e in engines)
    assert [e.python for e in engines] == [None, CANDIDATE, CANDIDATE, None]  # who starts first alternates
    assert len(result.rounds) == len(result.gate.current.rounds) == 8
    a, b = SD.method.label, f"{SD.method.label}@{CANDIDATE}"
    # warm-up in start order, then pairs on engine pair 0, 1, 0, 1, ...; within each engine pair the
    # side that runs first flips every pair, starting with the side that started first
    assert order == [a, b, b, a] + [a, b, b, a, b, a, a, b] * 2
    assert [e.calls for e in engines] == [5, 5, 5, 5]  # each: warm-up and four rounds
    assert [r.engine_instance for r in result.rounds] == [0, 1] * 4
    assert [r.engine_instance for r in result.gate.current.rounds] == [0, 1] * 4
    assert result.verdict.status == "pass"


def test_engine_sets_start_fresh_engines_for_each_set_of_pairs(tmp_path):
    starter = Starter()
    run = gate(tmp_path, starter)
    result = run.run(REF.replace(gate_instances=2, gate_engine_sets=2))
    assert result.status == OK and result.gate.pairing == "interleaved, 4 engine pairs (2 per side alive, 2 set(s))"
    assert len(starter.started) == 8  # two sets of two engines per side
    assert all(e.closed for e in starter.started[:4]) and not any(e.closed for e in starter.started[4:])
    # who starts first alternates from engine pair to engine pair, and from set to set
    assert [e.python for e in starter.started] == [None, CANDIDATE, CANDIDATE, None, CANDIDATE, None, None, CANDIDATE]
    assert [r.engine_instance for r in result.rounds] == [0, 1, 0, 1, 2, 3, 2, 3]
    throughput = next(m for m in result.verdict.metrics if m.metric == "throughput_tok_s")
    assert throughput.note.startswith("8 pairs on 4 engine pair(s)")
    assert (throughput.between_engines, throughput.between_pairs) == (0.0, 0.0)  # fakes: no noise at all
    run.finish()
    from specperf.report import write_report

    page = write_report([run.run_dir]).read_text()
    assert "SD between engines 0.0%, between pairs 0.0%" in page
    assert "(SD between engines 0.0%, between pairs 0.0%)" in throughput.line()


def test_a_set_of_fewer_pairs_than_engines_per_side_starts_only_the_engines_its_pairs_use(tmp_path):
    # cpu-gate's sampled cell: one pair (its requests, not its rounds, carry its information) with 2
    # engines per side the profile's
    from specperf.records import Sampling

    speed = ["throughput_tok_s", "speedup"]
    sampled = REF.replace(rounds=1, gate_instances=2, informational=speed, sampling=Sampling(temperature=0.8))
    starter = Starter()
    result = gate(tmp_path, starter).run(sampled)
    assert result.status == OK and result.valid and len(starter.started) == 2, result.validity
    assert len(result.rounds) == len(result.gate.current.rounds) == 1 and result.gate.pairing == "interleaved"


def test_a_gate_speedup_carries_the_reference_change_and_its_error(tmp_path):
    # The candidate's SD engine is as fast as the current one, but its no-SD reference is 20% faster:
    # speedup falls by 1/1.2, and the interval is the SD change's and the reference's together.
    starter = Starter(**{"nosd": {"wall_s": 1.0}, f"nosd@{CANDIDATE}": {"wall_s": 1 / 1.2}})
    run = gate(tmp_path, starter)
    reference = run.run(REF)
    result = run.run(SD)
    assert result.gate.reference.candidate == reference.metrics["throughput_tok_s"].samples
    speedup = next(m for m in result.verdict.metrics if m.metric == "speedup")
    assert speedup.change == pytest.approx(1 / 1.2 - 1) and speedup.status == "regression"
    assert "relative to the no-SD reference's change" in speedup.note


def test_a_gate_tpot_speedup_is_the_sd_servers_tpot_change_relative_to_the_no_sd_servers(tmp_path):
    # Serve figures on a gated result: the candidate's SD server is 10% slower per token, its no-SD
    # server 10% faster, so TPOT speedup falls by 1.1 * 1.1.
    from specperf.judge.gate import judge_gate
    from specperf.records import Metric, PairedSamples

    run = gate(tmp_path, Starter())
    run.run(REF)
    result = run.run(SD)
    clusters = [r.engine_instance for r in result.rounds]
    result.gate.current.metrics["tpot_p50_ms"] = Metric(value=10.0, samples=[10.0] * 8)
    result.gate.current.metrics["tpot_speedup"] = Metric(value=2.0, samples=[2.0] * 8)
    result.metrics["tpot_p50_ms"] = Metric(value=11.0, samples=[11.0] * 8)
    result.metrics["tpot_speedup"] = Metric(value=20 / 11 / 1.1, samples=[20 / 11 / 1.1] * 8)
    result.gate.reference_tpot = PairedSamples(current=[20.0] * 8, candidate=[20 / 1.1] * 8, clusters=clusters)
    verdict = next(m for m in judge_gate(result).metrics if m.metric == "tpot_speedup")
    assert verdict.change == pytest.approx(1 / 1.21 - 1) and verdict.status == "regression"
    assert verdict.baseline == 2.0 and "relative to the no-SD reference's change" in verdict.note
    result.gate.reference_tpot = None  # no reference measured in the gate: judged as any paired metric
    verdict = next(m for m in judge_gate(result).metrics if m.metric == "tpot_speedup")
    assert verdict.judged_by == "paired" and "relative to" not in verdict.note


def test_paired_reference_measures_speedup_per_pair(tmp_path):
    paired = SD.replace(paired_reference=True)
    starter = Starter(nosd={"wall_s": 0.4})
    pool = EnginePool(start=starter, configure=fake_config, log=lambda line: None, parallel_starts=1)
    run = run_session(tmp_path, pool=pool, prepare=canned_calls, device=DEVICE)
    result = run.run(paired)  # no reference scenario measured before it
    assert result.valid, result.validity
    assert result.metrics["speedup"].samples == pytest.approx([2.0] * 8)
    assert result.metrics["lossless_fraction"].value == 1.0
    assert len(starter.started) == 2 and not any(e.closed for e in starter.started)


def test_an_environment_is_described_without_importing_vllm(tmp_path, monkeypatch):
    import sys

    from specperf.run.builds import environments

    dist = tmp_path / "vllm-0.12.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.12.0\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    facts = environments.describe(sys.executable)
    assert (facts["vllm"], facts["distribution"], facts["specperf"]) == ("0.12.0", "vllm", "0.1.0")
    assert facts["modules"] == {"arctic_inference": False}
    assert facts["methods"]["ngram"] is None and facts["methods"]["eagle3"] is None
    assert "needs vLLM >= 0.15.0" in facts["methods"]["draft_model"]
    assert "arctic-inference" in facts["methods"]["suffix"]


def test_an_environment_without_specperf_is_named(tmp_path):
    import stat
    import sys

    from specperf.run.builds import environments

    bare = tmp_path / "python"  # this interpreter without site-packages: no specperf there
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(bare.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(
        environments.EnvironmentProblem,
        match=r"specperf does not run in that environment \(ModuleNotFoundError: No module named",
    ):
        environments.describe(str(bare))


def test_engines_wanted_together_start_together_and_a_failed_start_fails_the_scenario(tmp_path):
    import threading

    together = threading.Barrier(2, timeout=10)  # a start waits here for the other: one at a time would hang

    class TogetherStarter(Starter):
        def __call__(self, config, start_timeout_s, python=None):
            together.wait()
            if python == CANDIDATE and self.options.get("fail"):
                raise EngineError("candidate build broke")
            return super().__call__(config, start_timeout_s, python)

    starter = TogetherStarter()
    run = gate(tmp_path, starter, parallel_starts=2)
    assert run.run(REF).status == OK and len(starter.started) == 2
    starter.options["fail"] = True
    failed = run.run(SD.replace(gate_instances=1))
    assert failed.status == "error" and "candidate build broke" in failed.error


def test_the_calibration_benchmark_judges_a_gate_with_its_scenarios_own_offset_floor(tmp_path, monkeypatch, capsys):
    """benchmarks/gate_calibration.py re-judges recorded gates: with the profile's floor, as the run did."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "gate_calibration.py"
    spec = importlib.util.spec_from_file_location("gate_calibration", path)
    calibration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(calibration)
    run = gate(tmp_path, Starter())
    result = run.run(REF.replace(gate_instances=2, gate_engine_sets=2, gate_engine_offset=0.02))
    run.finish()
    throughput = next(m for m in result.verdict.metrics if m.metric == "throughput_tok_s")
    assert throughput.ci_low < 0 < throughput.ci_high  # the fakes have no noise: the floor alone
    monkeypatch.setattr("sys.argv", ["gate_calibration.py", str(run.run_dir)])
    assert calibration.main() == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "throughput_tok_s after" in line)
    assert f"[{throughput.ci_low:+.1%}, {throughput.ci_high:+.1%}] pass" in row


def test_a_gate_that_can_tell_neither_is_inconclusive_and_fails_unless_told_to_warn(tmp_path):
    import math

    from specperf.judge.gate import GateJudge
    from specperf.records import Metric
    from specperf.report.view import scenario_view

    run = gate(tmp_path, Starter())
    run.run(REF)
    result = run.run(SD)
    current = result.gate.current.metrics["throughput_tok_s"].samples
    # the candidate 3% slower, give or take 8% a pair: the interval holds no change and -6% alike
    noisy = [v * math.exp(-0.03 + 0.08 * (-1) ** j) for j, v in enumerate(current)]
    result.metrics["throughput_tok_s"] = Metric(value=sorted(noisy)[4], samples=noisy)
    failing = GateJudge()(result).verdict
    assert statuses(result.model_copy(update={"verdict": failing}))["throughput_tok_s"] == "inconclusive"
    assert failing.status == "inconclusive" and failing.failed
    assert "throughput_tok_s: inconclusive" in failing.message and "more engine pairs would tell" in failing.message
    warning = GateJudge(inconclusive_fails=False)(result).verdict
    assert warning.status == "inconclusive" and not warning.failed and warning.message == ""
    view = scenario_view(result.model_copy(update={"verdict": warning}))
    assert view.status == "inconclusive" and not view.failed
    assert scenario_view(result.model_copy(update={"verdict": failing})).failed


def test_a_speed_metrics_own_tolerance_replaces_the_gate_tolerance_for_it_alone():
    """cpu-gate gives speedup 5%: a 1.5% drop on 4 engine pairs with a 2% floor reaches about -4.1%
    (a ratio's floor is sqrt(2) times wider), inconclusive at the gate's 3% and shown within 5%;
    throughput's interval reaches about -3.3% and keeps the 3%."""
    import math

    from specperf.judge.gate import speed_verdict
    from specperf.judge.rules import Rules

    current = {"speedup": [2.0] * 16, "throughput_tok_s": [100.0] * 16}
    candidate = {name: [v * math.exp(-0.015) for v in values] for name, values in current.items()}
    clusters = [j % 4 for j in range(16)]
    rules = Rules(gate_engine_offset=0.02, tolerances={"speedup": 0.05})
    at_gate_tolerance = speed_verdict("speedup", current, candidate, clusters, Rules(gate_engine_offset=0.02), 0.95, {})
    assert at_gate_tolerance.status == "inconclusive" and -0.05 < at_gate_tolerance.ci_low < -0.03
    assert speed_verdict("speedup", current, candidate, clusters, rules, 0.95, {}).status == "pass"
    assert speed_verdict("throughput_tok_s", current, candidate, clusters, rules, 0.95, {}).status == "inconclusive"


def test_a_sequential_gate_adds_engine_sets_until_it_can_decide(tmp_path):
    import math

    # 4 pairs a set on one engine pair, 2 sets, up to 4: looks after 2, 3 and 4 sets
    scenario = REF.replace(rounds=8, gate_engine_sets=2, gate_engine_offset=0.02)
    # the candidate 3% slower, give or take 8% a round: no look can decide
    noisy = Starter(**{f"nosd@{CANDIDATE}": {"wall_s": lambda call: 0.2 * math.exp(0.03 + 0.08 * (-1) ** call)}})
    result = gate(tmp_path / "noisy", noisy, max_sets=4).run(scenario)
    assert result.gate.looks == [0.5, 0.75, 1.0]
    assert len(result.rounds) == len(result.gate.current.rounds) == 16 and len(noisy.started) == 8
    assert [r.engine_instance for r in result.rounds] == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    throughput = next(m for m in result.verdict.metrics if m.metric == "throughput_tok_s")
    assert throughput.status == "inconclusive" and "a 95.6% interval" in throughput.note
    assert result.gate.pairing == "interleaved, 4 engine pairs (1 per side alive, 4 set(s))"
    # a third slower: the first look decides, and no set is added
    clear = Starter(**{f"nosd@{CANDIDATE}": {"wall_s": 0.3}})
    result = gate(tmp_path / "clear", clear, max_sets=4).run(scenario)
    assert result.gate.looks == [0.5] and len(result.rounds) == 8 and len(clear.started) == 4
    assert statuses(result)["throughput_tok_s"] == "regression"
    assert "a 99.7% interval" in next(m for m in result.verdict.metrics if m.metric == "throughput_tok_s").note


def test_a_sequential_gate_adds_no_engine_set_for_a_speed_metric_the_profile_keeps_informational(tmp_path):
    import math

    noisy = {f"nosd@{CANDIDATE}": {"wall_s": lambda call: 0.2 * math.exp(0.03 + 0.08 * (-1) ** call)}}
    scenario = REF.replace(rounds=8, gate_engine_sets=2, gate_engine_offset=0.02, informational=["throughput_tok_s"])
    starter = Starter(**noisy)
    result = gate(tmp_path, starter, max_sets=4).run(scenario)
    assert result.gate.looks == [0.5] and len(result.rounds) == 8 and len(starter.started) == 4
    assert statuses(result)["throughput_tok_s"] == "inconclusive" and result.verdict.status != "inconclusive"


def test_a_sequential_gate_looks_at_the_speedup_as_well_as_the_throughput(tmp_path):
    import math

    # 4 pairs a set on one engine pair, 2 sets, up to 4; a 10% tolerance, so that a noiseless
    # throughput passes at the first look
    ref, sd = (s.replace(rounds=8, gate_engine_sets=2, gate_engine_offset=0.02, gate_tolerance=0.1) for s in (REF, SD))
    # the no-SD candidate +-20% a round: its change, and every speedup judged relative to it, is undecided
    noisy_reference = {"wall_s": lambda call: 0.2 * math.exp(0.2 * (-1) ** call)}
    starter = Starter(**{f"nosd@{CANDIDATE}": noisy_reference})
    run = gate(tmp_path, starter, max_sets=4)
    reference = run.run(ref)
    assert reference.gate.looks == [0.5, 0.75, 1.0]
    result = run.run(sd)
    assert statuses(result)["throughput_tok_s"] == "pass" and statuses(result)["speedup"] == "inconclusive"
    assert result.gate.looks == [0.5, 0.75, 1.0] and len(result.rounds) == 16  # not stopped at the first look
    # with a quiet reference the SD scenario's first look decides both
    run = gate(tmp_path / "quiet", Starter(), max_sets=4)
    run.run(ref)
    result = run.run(sd)
    assert statuses(result)["speedup"] == "pass" and result.gate.looks == [0.5] and len(result.rounds) == 8


def test_the_gates_on_record_in_the_history_widen_a_gate_whose_floor_is_below_them(tmp_path):
    import math

    from specperf.history import History

    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    scenario = REF.replace(rounds=12, gate_engine_sets=6, gate_engine_offset=0.01)  # 6 engine pairs of 2 pairs

    class Offsets(Starter):
        """Each candidate engine 6% slower or faster than the one before."""

        def __call__(self, config, start_timeout_s, python=None):
            engine = super().__call__(config, start_timeout_s, python)
            if python:
                engine.wall_s = 0.2 * math.exp(0.06 * (-1) ** len(self.started))
            return engine

    for night in range(2):  # two gates on record: 2 x 5 degrees of freedom, worth the prior
        run = gate(tmp_path / f"night{night}", Offsets(), history_url=url, run_id=f"night-{night}")
        run.run(scenario)
        run.finish()
        with History(url) as history:
            history.record_run_dir(run.run_dir)
    # equal engines now: the interval is the floor's alone, the recorded 6.6% in place of the profile's 1%
    floored = next(m for m in gate(tmp_path / "today", Starter(), history_url=url).run(scenario).verdict.metrics)
    alone = next(m for m in gate(tmp_path / "alone", Starter()).run(scenario).verdict.metrics)
    assert floored.metric == alone.metric == "throughput_tok_s"
    assert "engine-offset floor 6.6% over the 2 gates on record (10 degrees of freedom), above the profile's 1.0%" in (
        floored.note
    )
    assert "engine-offset floor 1.0%, the profile's (no gates on record)" in alone.note
    assert floored.ci_high > 4 * alone.ci_high > 0


def test_a_history_that_cannot_be_read_leaves_the_profiles_floor_and_says_so_in_one_line(tmp_path):
    broken = tmp_path / "history.sqlite"
    broken.write_text("not a database\n")
    lines: list[str] = []
    result = gate(tmp_path, Starter(), history_url=f"sqlite:///{broken}", log=lines.append).run(REF)
    assert result.verdict.status == "pass"
    said = [line for line in lines if "engine-offset floor" in line]
    assert len(said) == 1 and str(broken) in said[0] and "\n" not in said[0]
    assert said[0].endswith("the gate's engine-offset floor is the profile's")


def test_a_gate_judges_a_sampled_scenarios_acceptance_on_its_interval(tmp_path):
    """Sampled acceptance is an estimate: the gate judges it as a sampled baseline is judged, and
    says nothing of greedy output drift between sampled outputs."""
    from specperf.judge.gate import judge_gate
    from specperf.records import Metric, Sampling

    run = gate(tmp_path, Starter())
    run.run(REF)
    result = run.run(SD)
    result.scenario = result.scenario.replace(sampling=Sampling(temperature=0.8))
    result.gate.current.metrics["mean_acceptance_length"] = Metric(value=2.0, samples=[2.0], se=0.02)
    result.metrics["mean_acceptance_length"] = Metric(value=1.96, samples=[1.96], se=0.02)  # -2%, inside 5%
    result.gate.output_drift = 3
    judged = judge_gate(result)
    length = next(m for m in judged.metrics if m.metric == "mean_acceptance_length")
    assert length.note.startswith("sampled") and length.ci_low < length.change < length.ci_high
    assert length.judged_by == "current build" and "output drift" not in judged.note
    result.metrics["mean_acceptance_length"] = Metric(value=1.6, samples=[1.6], se=0.02)
    assert next(m for m in judge_gate(result).metrics if m.metric == "mean_acceptance_length").status == "regression"


def test_a_gate_of_a_sampled_scenario_gates_on_its_lengths_unless_a_position_is_given_a_tolerance(tmp_path):
    """As the stored judge: a position that falls while the acceptance lengths hold is shown, failing
    nothing, until the profile gives positions a tolerance of their own."""
    from specperf.judge.gate import judge_gate
    from specperf.judge.rules import Rules
    from specperf.records import Metric, Sampling

    run = gate(tmp_path, Starter())
    run.run(REF)
    result = run.run(SD)
    result.scenario = result.scenario.replace(sampling=Sampling(temperature=0.8))
    result.gate.current.metrics["mean_acceptance_length"] = Metric(value=2.0, samples=[2.0], se=0.01)
    result.metrics["mean_acceptance_length"] = Metric(value=2.0, samples=[2.0], se=0.01)
    result.gate.current.metrics["per_position_acceptance"] = Metric(
        value=[0.5, 0.3], samples=[[0.5, 0.3]], se=[0.01] * 2
    )
    result.metrics["per_position_acceptance"] = Metric(value=[0.55, 0.2], samples=[[0.55, 0.2]], se=[0.01] * 2)
    judged = judge_gate(result)
    second = next(m for m in judged.metrics if m.metric == "acceptance_pos1")
    assert second.status == "regression" and "informational: explains the acceptance lengths" in second.note
    assert judged.status == "pass"
    assert judge_gate(result, Rules(tolerances={"per_position_acceptance": 0.1})).status == "regression"


def test_a_gate_judges_sampled_acceptance_request_by_request_where_both_builds_kept_their_counts(tmp_path):
    """Both builds ran the same prompts in the same order: the candidate's requests pair with the
    current build's, which takes out how unequally the prompts lend themselves to drafting."""
    from specperf.judge import sampled
    from specperf.judge.gate import judge_gate
    from specperf.records import RequestAcceptance, Sampling

    def requests(accepted: int) -> list[RequestAcceptance]:  # prompts that accept 0 to 39 of 60 drafts
        return [RequestAcceptance(steps=20, drafted=60, accepted=accepted + i, accepted_per_pos=[]) for i in range(40)]

    run = gate(tmp_path, Starter())
    run.run(REF)
    result = run.run(SD)
    result.scenario = result.scenario.replace(sampling=Sampling(temperature=0.8))
    current, candidate = requests(10), requests(9)  # every request one accepted token fewer in 20 steps: -3%
    result.gate.current.metrics |= sampled.acceptance_metrics(current)
    result.metrics |= sampled.acceptance_metrics(candidate)
    apart = next(m for m in judge_gate(result).metrics if m.metric == "mean_acceptance_length")
    assert apart.status == "inconclusive" and "request by request" not in apart.note  # the spread between prompts
    result.gate.current.request_acceptance, result.request_acceptance = current, candidate
    paired = next(m for m in judge_gate(result).metrics if m.metric == "mean_acceptance_length")
    assert "request by request" in paired.note and paired.status == "pass"  # -3%, well inside 5%
    assert paired.ci_high - paired.ci_low < (apart.ci_high - apart.ci_low) / 5


def test_a_gate_fails_a_candidate_whose_sampled_draws_do_not_follow_the_target_whatever_the_current_builds(tmp_path):
    """distribution_match_p is judged on the candidate's own value: SD that changes what users get
    fails a gate even where the current build's draws were as far off, and passes on a value above
    the tolerance however far below the current build's it lies."""
    from specperf.judge.gate import judge_gate
    from specperf.records import Metric, Sampling

    run = gate(tmp_path, Starter())
    run.run(REF)
    result = run.run(SD)
    result.scenario = result.scenario.replace(sampling=Sampling(temperature=0.8))
    for current, candidate, status in ((0.6, 1e-9, "regression"), (1e-9, 1e-9, "regression"), (0.9, 0.01, "pass")):
        result.gate.current.metrics["distribution_match_p"] = Metric(value=current, samples=[current])
        result.metrics["distribution_match_p"] = Metric(value=candidate, samples=[candidate])
        judged = judge_gate(result)
        assert {m.metric: m.status for m in judged.metrics}["distribution_match_p"] == status
        assert judged.status == "regression" if status == "regression" else judged.status != "regression"
