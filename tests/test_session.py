"""The run session and its measuring loop, driven by a fake engine with canned replies.

The fake stands in for run.engines.engine.Engine only here, to reach every rule of the session (validity,
resume, failed engine keys, timeouts, baselines) without a model; tests/cpu_tier runs real engines.
"""

from __future__ import annotations

import json
import time

import pytest
from records import make_record, make_scenario, reference_scenario
from sessions import run_session

from specperf.judge.verdicts import MIN_ROUNDS
from specperf.profiles.workloads import Request
from specperf.records import RunFile, WorkloadFacts
from specperf.run.calls import Calls
from specperf.run.engines.engine import (
    DEFAULT_START_TIMEOUT_S,
    GENERATE,
    START,
    EngineConfig,
    EngineError,
    EngineTimeout,
)
from specperf.run.engines.protocol import Reply
from specperf.run.loop import measure, warm_up
from specperf.run.pool import EnginePool
from specperf.run.session import RunSession
from specperf.run.tally import merge_run_files, summary_lines
from specperf.status import ERROR, ERROR_ENGINE, ERROR_TIMEOUT, NO_BASELINE, OK, PASS, REGRESSION, SKIPPED
from specperf.storage import atomic_write_text, read_record, result_path, write_result

DEVICE = {"kind": "cpu", "name": "Test CPU", "count": 2, "memory_gib": 8, "driver": None, "hardware_key": "cpu-test-2c"}
OUTPUT = [7, 8, 9, 10]


class FakeEngine:
    """Replies like Engine.generate: every request yields OUTPUT, with 2 drafts of 3 tokens, 3 accepted."""

    def __init__(self, config, *, wall_s=0.2, tokens=OUTPUT, fail_on_call=None, changing_from=None, log=None):
        self.config = config
        self.provenance = {"vllm": "0.0-fake"}
        self.effective_config = {"max_num_seqs": 4}
        self.wall_s, self.tokens = wall_s, list(tokens)
        self.fail_on_call, self.changing_from = fail_on_call, changing_from
        self.calls = 0
        self.timeouts: list[float] = []  # the time each call was given
        self.closed = False
        self.log = log if log is not None else []
        self.counters = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": [0, 0, 0]}

    def generate(self, prompts, max_tokens, timeout_s):
        self.calls += 1
        self.timeouts.append(timeout_s)
        python = getattr(self, "python", None)
        self.log.append(f"{self.config.model}@{python}" if python else self.config.model)
        if self.fail_on_call is not None and self.calls >= self.fail_on_call[0]:
            raise self.fail_on_call[1]
        before = json.loads(json.dumps(self.counters))
        for _ in prompts:
            self.counters["drafts"] += 2
            self.counters["draft_tokens"] += 6
            self.counters["accepted"] += 3
            self.counters["accepted_per_pos"] = [a + d for a, d in zip(self.counters["accepted_per_pos"], (2, 1, 0))]
        tokens = self.tokens + ([self.calls] if self.changing_from and self.calls >= self.changing_from else [])
        return Reply(
            wall_s=self.wall_s(self.calls) if callable(self.wall_s) else self.wall_s,  # by call, where a function
            output_tokens=len(tokens) * len(prompts),
            token_ids=[list(tokens) for _ in prompts],
            texts=["out <b>"] * len(prompts),
            counters_before=before,
            counters_after=json.loads(json.dumps(self.counters)),
            memory={"peak_mib": 100.0, "source": "fake"},
        )

    def close(self):
        self.closed = True


def canned_calls(scenario) -> Calls:
    request = Request(id="req-1", text="def f(): pass", chat=True)
    return Calls(
        calls=[[[1, 2, 3]] * scenario.batch_size],
        requests=[request] * scenario.batch_size,
        facts=WorkloadFacts(source="canned", request_ids=["req-1"], prompt_tokens=[3]),
    )


def fake_config(scenario) -> EngineConfig:
    return EngineConfig(
        model=scenario.method.label,
        tokenizer=None,
        tensor_parallel_size=1,
        seed=42,
        speculative_config=scenario.method.speculative_config(),
        env=dict(scenario.env),
    )


class Starter:
    """Starts FakeEngines (per method label: options) and counts the starts."""

    def __init__(self, **options_by_label):
        self.options = options_by_label
        self.started: list[FakeEngine] = []

    def __call__(self, config, start_timeout_s, python=None):
        """Options by method label, or by "LABEL@PYTHON" for an engine of another environment."""
        options = (
            self.options.get(f"{config.model}@{python}", self.options.get(config.model, {}))
            if python
            else self.options.get(config.model, {})
        )
        if "start_error" in options:
            raise options["start_error"]
        options = dict(options)
        time.sleep(options.pop("start_s", 0.0))
        engine = FakeEngine(config, **options)
        engine.python = python
        self.started.append(engine)
        return engine


def session(tmp_path, starter=None, **kwargs) -> RunSession:
    starter = starter or Starter()
    pool = EnginePool(
        start=starter,
        configure=fake_config,
        log=lambda line: None,
        parallel_starts=1,
        start_timeout_s=kwargs.get("start_timeout_s", DEFAULT_START_TIMEOUT_S),
    )
    return run_session(tmp_path, pool=pool, prepare=canned_calls, device=DEVICE, **kwargs)


REF, SD = reference_scenario(), make_scenario()


def test_a_reference_and_an_sd_scenario_measure_valid_results(tmp_path):
    run = session(tmp_path)
    ref, sd = run.run(REF), run.run(SD)
    assert ref.status == sd.status == OK and ref.valid and sd.valid, (ref.validity, sd.validity)
    assert sd.metrics["mean_acceptance_length"].value == pytest.approx(2.5)  # 1 + 3 / 2
    assert sd.metrics["per_position_acceptance"].value == pytest.approx([1.0, 0.5, 0.0])
    assert sd.metrics["speedup"].value == pytest.approx(1.0)
    assert sd.metrics["lossless_fraction"].value == 1.0 and sd.lossless.total == SD.batch_size
    assert len(sd.rounds) == SD.rounds and sd.timings.warmup_s >= 0
    assert sd.verdict.status == NO_BASELINE
    stored = read_record(result_path(run.run_dir, SD.id), type(sd), "result")
    assert stored.verdict.status == NO_BASELINE and stored.metrics == sd.metrics


@pytest.mark.parametrize(
    "options, reason",
    [
        ({"changing_from": 4}, "greedy outputs differ between rounds"),
        ({"wall_s": 0.01}, "too short to time"),
        ({"tokens": []}, "no output tokens"),
    ],
)
def test_each_validity_rule_makes_the_result_invalid(tmp_path, options, reason):
    run = session(tmp_path, Starter(**{SD.method.label: options}))
    run.run(REF)
    result = run.run(SD)
    assert result.status == OK and not result.valid
    assert any(reason in r for r in result.validity.reasons), result.validity.reasons
    assert result.verdict.status == "invalid"


def test_an_sd_scenario_without_its_reference_is_invalid(tmp_path):
    result = session(tmp_path).run(SD)
    assert not result.valid and "speedup" not in result.metrics
    assert any(f"no reference result {SD.reference_id}" in r for r in result.validity.reasons)


def test_too_few_rounds_are_invalid(tmp_path):
    run = session(tmp_path, rounds=MIN_ROUNDS - 1)
    run.run(REF)
    result = run.run(SD)
    assert len(result.rounds) == MIN_ROUNDS - 1
    assert any("too few for the significance test" in r for r in result.validity.reasons)


def test_too_few_rounds_do_not_invalidate_a_sampled_scenario_whose_speed_is_informational(tmp_path):
    """The rounds rule is the speed test's: a sampled scenario whose profile keeps every speed metric
    informational (cpu-gate's sampled cell) has its information in its requests, so fewer rounds
    are valid there; a greedy one's speed still feeds the tuning and dynamic-SD analyses, so not there."""
    from specperf.records import Sampling

    speed, sampled = ["throughput_tok_s", "speedup"], Sampling(temperature=0.8)
    run = session(tmp_path, rounds=MIN_ROUNDS - 1)
    run.run(REF.replace(informational=speed, sampling=sampled))
    result = run.run(SD.replace(informational=speed, sampling=sampled))
    assert len(result.rounds) == MIN_ROUNDS - 1
    assert not any("too few" in r for r in result.validity.reasons), result.validity.reasons
    run = session(tmp_path / "gating", rounds=MIN_ROUNDS - 1)
    run.run(REF.replace(informational=speed, sampling=sampled))
    gating = run.run(SD.replace(informational=["speedup"], sampling=sampled))  # its throughput still gates
    assert any("too few" in r for r in gating.validity.reasons)
    run = session(tmp_path / "greedy", rounds=MIN_ROUNDS - 1)
    run.run(REF.replace(informational=speed))
    assert any("too few" in r for r in run.run(SD.replace(informational=speed)).validity.reasons)


def test_a_failed_engine_key_fails_its_other_scenarios_at_once(tmp_path):
    starter = Starter(**{SD.method.label: {"start_error": EngineError("RuntimeError: no head")}})
    run = session(tmp_path, starter)
    first, second = run.run(SD), run.run(make_scenario(batch_size=8))
    assert first.status == second.status == ERROR
    assert first.error == second.error == "RuntimeError: no head"
    assert first.error_kind == second.error_kind == ERROR_ENGINE
    assert run.pool.stats.starts == 1 and run.stats.errors == 2
    assert run.run(REF).status == OK  # another key starts afresh


def test_a_crash_mid_scenario_closes_the_engine_and_fails_the_key(tmp_path):
    starter = Starter(**{SD.method.label: {"fail_on_call": (3, EngineError("engine process died"))}})
    run = session(tmp_path, starter)
    result = run.run(SD)
    assert result.status == ERROR and result.error == "engine process died"
    assert starter.started[0].closed
    assert run.run(make_scenario(batch_size=8)).error == "engine process died"
    assert len(starter.started) == 1


def test_the_scenario_limit_leaves_the_engine_start_out(tmp_path):
    """--scenario-timeout bounds the warm-up and rounds: a slow start (its own limit) spends none of it."""
    starter = Starter(**{label: {"start_s": 0.5} for label in (SD.method.label, REF.method.label)})
    run = session(tmp_path, starter, scenario_timeout_s=1.0)
    for result in (run.run(REF), run.run(SD)):
        assert result.status == OK, result.error
    assert all(t > 0.5 for engine in starter.started for t in engine.timeouts), [e.timeouts for e in starter.started]


def test_a_start_timeout_is_not_reported_as_a_scenario_timeout(tmp_path):
    starter = Starter(**{SD.method.label: {"start_error": EngineTimeout("engine start did not finish", START)}})
    result = session(tmp_path, starter, start_timeout_s=90, scenario_timeout_s=None).run(SD)
    assert result.error_kind == ERROR_TIMEOUT
    assert result.error == "engine start did not finish within 90 s; engine killed"


@pytest.mark.parametrize(
    "limit, message",
    [
        (30.0, "timed out: the scenario did not finish within its 30 s limit; engine killed"),
        (None, "generate did not finish within 5 s; engine killed"),
    ],
)
def test_a_scenario_timeout_names_its_limit(tmp_path, limit, message):
    hang = EngineTimeout("generate did not finish within 5 s; engine killed", GENERATE)
    starter = Starter(**{SD.method.label: {"fail_on_call": (2, hang)}})
    result = session(tmp_path, starter, scenario_timeout_s=limit).run(SD)
    assert (result.status, result.error_kind, result.error) == (ERROR, ERROR_TIMEOUT, message)


def test_resume_keeps_finished_results_and_their_references(tmp_path):
    run_dir = tmp_path / "reports" / "20260101-000000-unit"
    first = session(tmp_path, run_id=run_dir.name)
    kept_ref = first.run(REF)
    failed = make_record(make_scenario(batch_size=8), status="error", error="boom")
    write_result(run_dir, failed)
    atomic_write_text(result_path(run_dir, "broken"), "{")
    first.finish()

    starter = Starter()
    lines = []
    resumed = session(tmp_path, starter, resume_dir=run_dir, log=lines.append)
    assert resumed._finished.keys() == {REF.id}  # ok, with output hashes
    assert any("broken.json" in line and "measuring again" in line for line in lines)
    again = resumed.run(REF)
    assert again.started_at == kept_ref.started_at and not starter.started
    sd = resumed.run(SD)  # judged against the kept reference
    assert sd.valid and sd.metrics["speedup"].value == pytest.approx(1.0)
    assert sd.metrics["lossless_fraction"].value == 1.0
    assert resumed.run(make_scenario(batch_size=8)).status == OK  # the failed one is measured again
    assert resumed.stats.resumed == 1


def test_a_kept_result_is_judged_by_the_profile_never_by_its_own_rules(tmp_path):
    recorder = session(tmp_path, update_baselines=True)
    recorder.run(REF), recorder.run(SD)
    recorder.finish()
    run_dir = tmp_path / "reports" / "20260101-000000-unit"
    first = session(tmp_path, run_id=run_dir.name)
    first.run(REF)
    lossy = first.run(SD)
    lossy.metrics["lossless_fraction"] = lossy.metrics["lossless_fraction"].model_copy(
        update={"value": 0.0, "samples": [0.0]}
    )
    lossy.scenario = lossy.scenario.replace(tolerances={"lossless_fraction": 9.0}, informational=["lossless_fraction"])
    write_result(run_dir, lossy)
    first.finish()

    resumed = session(tmp_path, resume_dir=run_dir)
    kept = resumed.run(SD)
    assert resumed.stats.resumed == 1
    by_metric = {m.metric: m for m in kept.verdict.metrics}
    assert kept.verdict.status == REGRESSION and by_metric["lossless_fraction"].tolerance == 0.0


def test_finish_writes_baselines_of_valid_results_only(tmp_path):
    run = session(tmp_path, update_baselines=True)
    run.run(REF)
    invalid = run.run(make_scenario(batch_size=8))  # fine, but see below
    run.results[-1] = invalid.model_copy(
        update={
            "validity": invalid.validity.model_copy(
                update={"valid": False, "reasons": ["greedy outputs differ between rounds"]}
            )
        }
    )
    lines = run.finish()
    assert any(line.startswith("baseline written:") and REF.id in line for line in lines)
    assert any(line.startswith("baseline kept:") and "invalid" in line for line in lines)
    assert sorted(p.name for p in (tmp_path / "baselines" / "cpu-test-2c").iterdir()) == [f"{REF.id}.json"]
    run_file = read_record(run.run_dir / "run.json", RunFile, "run file")
    assert run_file.finished_at and run_file.stats.scenarios == 2 and run_file.stats.engine_starts == 2


def test_an_interrupted_run_updates_no_baseline(tmp_path):
    run = session(tmp_path, update_baselines=True)
    run.run(REF)
    assert run.finish(interrupted=True) == ["baselines not updated: the run was interrupted"]
    assert not (tmp_path / "baselines").exists()
    assert read_record(run.run_dir / "run.json", RunFile, "run file").interrupted


def test_a_skipped_workload_is_written_but_not_judged(tmp_path):
    from specperf.profiles.workloads import WorkloadUnavailable

    def unavailable(scenario):
        raise WorkloadUnavailable("gsm8k: no local file and no hub access")

    run = session(tmp_path)
    run.prepare = unavailable
    result = run.run(REF)
    assert result.status == SKIPPED and result.verdict is None and not run.results
    assert result_path(run.run_dir, REF.id).exists()


# ------------------------------------------------------------------ the loop


def test_measure_interleaves_two_engines_by_the_schedule():
    order: list[str] = []
    engines = {label: FakeEngine(EngineConfig(label, None, 1, 42, None), log=order) for label in "ab"}
    calls = [[[1]], [[2]]]
    warm_up(engines, calls, 8, warmup=1)
    assert order == ["a", "b"]
    rounds = measure(engines, calls, 8, schedule=["a", "b", "b", "a"])
    assert order[2:] == ["a", "a", "b", "b", "b", "b", "a", "a"]  # two calls per round
    assert [len(rounds[x]) for x in "ab"] == [2, 2]
    assert rounds["a"][0].counters.drafts == 4  # 2 calls x 2 drafts


# ------------------------------------------------------------------ run files


def worker_run(
    started: str, scenarios: int, starts: int, keys: list[str], wall_s: float, interrupted: bool = False
) -> RunFile:
    return RunFile.model_validate(
        {
            "run_id": "20260101-000000-cpu-smoke",
            "profile": "cpu-smoke",
            "started_at": started,
            "finished_at": "2026-01-01T00:10:00+00:00",
            "interrupted": interrupted,
            "engine_keys": keys,
            "device": DEVICE,
            "stats": {
                "engine_starts": starts,
                "engine_start_s": 10.0 * starts,
                "warmup_s": 1.0,
                "measure_s": 5.0,
                "scenarios": scenarios,
                "errors": 0,
                "resumed": 0,
                "wall_s": wall_s,
            },
        }
    )


def test_worker_run_files_merge_into_one():
    merged = merge_run_files(
        [
            worker_run("2026-01-01T00:00:02+00:00", 7, 3, ["a", "b", "c"], 300.0),
            worker_run("2026-01-01T00:00:01+00:00", 12, 5, ["d", "e", "f", "g", "h"], 420.0),
        ]
    )
    assert merged.started_at == "2026-01-01T00:00:01+00:00"
    assert merged.stats.scenarios == 19 and merged.stats.engine_starts == 8
    assert merged.stats.engine_start_s == 80.0
    assert merged.stats.wall_s == 420.0  # workers ran side by side
    assert merged.engine_keys == list("abcdefgh") and merged.workers == 2
    assert merged.interrupted is False


def test_an_interrupted_worker_marks_the_run_interrupted():
    merged = merge_run_files([worker_run("t", 1, 1, ["a"], 1.0), worker_run("t", 1, 1, ["b"], 1.0, True)])
    assert merged.interrupted is True


def test_summary_names_engine_starts_keys_and_improvements():
    from specperf.records import Verdict

    improved = make_record()
    improved.verdict = Verdict(scenario_id=improved.id, status="improvement")
    passed = make_record(make_scenario(batch_size=8))
    passed.verdict = Verdict(scenario_id=passed.id, status="pass")
    lines = summary_lines(worker_run("t", 2, 2, ["a", "b"], 30.0), [improved, passed])
    assert "2 scenarios (0 resumed), 0 errors, 2 engine starts for 2 engine keys" in lines[0]
    assert lines[-1] == ("1 improved: consider refreshing their baselines (--update-baselines): " + improved.id)


def test_summary_counts_the_verdicts_and_names_the_worst_first_with_their_reason():
    from specperf.records import Verdict

    def judged(batch_size, status, note=""):
        record = make_record(make_scenario(batch_size=batch_size))
        record.verdict = Verdict(scenario_id=record.id, status=status, note=note)
        return record

    results = [
        judged(1, "pass"),
        judged(2, "no-baseline"),
        judged(3, "regression", "throughput -9%"),
        judged(5, "pass"),
    ]
    results += [judged(b, "no-baseline") for b in (6, 7, 8, 9, 10)]
    lines = summary_lines(worker_run("t", 9, 2, ["a"], 30.0), results)
    assert "verdicts: 1 regression, 6 no-baseline, 2 pass" in lines
    first = lines.index("verdicts: 1 regression, 6 no-baseline, 2 pass") + 1
    assert lines[first] == f"  regression: {results[2].id}: throughput -9%"
    assert (
        lines[first + 1 : first + 5]
        == [f"  no-baseline: {r.id}" for r in sorted(results, key=lambda r: r.id) if r.verdict.status == "no-baseline"][
            :4
        ]
    )
    assert lines[first + 5] == "  ... and 2 more (the report lists them all)"


def test_resume_measures_again_what_other_hardware_measured(tmp_path):
    run_dir = tmp_path / "reports" / "20260101-000000-unit"
    write_result(
        run_dir,
        make_record(reference_scenario(), hardware_key="cpu-elsewhere-4c").model_copy(
            update={"output_hashes": ["abc"]}
        ),
    )
    lines = []
    resumed = session(tmp_path, resume_dir=run_dir, log=lines.append)
    assert resumed._finished == {}
    assert any("was measured on cpu-elsewhere-4c, not cpu-test-2c" in line for line in lines)


def test_a_fault_of_the_suite_in_one_scenario_keeps_the_run_going(tmp_path):
    run = session(tmp_path)

    def broken(scenario):
        raise KeyError("request_ids")

    run.prepare = broken
    result = run.run(REF)
    assert (result.status, result.error_kind, result.error) == (ERROR, "internal", "KeyError: 'request_ids'")
    assert result_path(run.run_dir, REF.id).exists()
    run.prepare = canned_calls
    assert run.run(SD).status == OK


def test_a_result_that_cannot_be_judged_gets_an_error_verdict(tmp_path, monkeypatch):
    from specperf.judge import stored

    original = stored.judge

    def explode(result, baseline, noise=None, rules=stored.DEFAULT_RULES):
        """Fails where noise is given, as a bug in judging would."""
        if noise is not None:
            raise ZeroDivisionError("division by zero")
        return original(result, baseline, noise, rules)

    monkeypatch.setattr(stored, "judge", explode)
    run = session(tmp_path)
    run.judge._noise = {REF.id: {"throughput_tok_s": 0.1}}
    result = run.run(REF)
    assert result.verdict.status == ERROR and result.verdict.failed
    assert "cannot be judged against " in result.verdict.note
    assert result.verdict.note.endswith(": ZeroDivisionError: division by zero")


def test_rolling_baselines_judge_against_the_runs_the_history_recorded(tmp_path):
    from specperf.suite.closing import record_history

    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    for n in range(4):
        run = session(tmp_path, history_url=url, rolling_runs=3, run_id=f"night-{n}")
        sd = (run.run(REF), run.run(SD))[1]
        run.finish()
        assert record_history(url, run.run_dir) == [f"history: night-{n}: 2 results recorded"]
    assert sd.verdict.status == PASS, sd.verdict
    judged = {m.metric: m.judged_by for m in sd.verdict.metrics}
    assert judged["throughput_tok_s"] == judged["mean_acceptance_length"] == "history"
    assert sd.baseline is None  # no committed baseline took part


@pytest.mark.parametrize("rolling", [False, True], ids=["baselines", "rolling history"])
def test_constructing_a_session_writes_nothing_and_its_first_scenario_writes_the_run_file(tmp_path, rolling):
    history = {"history_url": f"sqlite:///{tmp_path / 'history.sqlite'}", "rolling_runs": 3} if rolling else {}
    run = session(tmp_path, **history)
    assert not any(tmp_path.rglob("*"))
    run.run(make_scenario())
    written = RunFile.model_validate_json((run.run_dir / "run.json").read_text())
    assert written.finished_at is None and written.run_id == run.run_id
