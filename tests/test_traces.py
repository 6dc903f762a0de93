"""Traces: the step-timer plugin's wrappers, a result's Trace built from raw engine traces, what the
analyses read from it, traced scenarios in profiles, and the report's views (no vLLM)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import types

import pytest
from records import make_record, make_scenario
from test_report import html_of, make_run, section, view_of

from specperf import report
from specperf.analysis import traces
from specperf.profiles.scenarios import traced
from specperf.profiles.workloads import Request
from specperf.records import STEP_PARTS, BaselineRef, RequestTrace, Trace, Verdict, WorkloadFacts
from specperf.report.traces import scatter
from specperf.run.tracing import trace as tracing
from specperf.storage import atomic_write_json

# ---------------------------------------------------------------- the plugin


@pytest.fixture
def step_timer(monkeypatch):
    monkeypatch.syspath_prepend(str(tracing.PLUGIN_DIR))
    module = importlib.import_module("specperf_step_timer")
    for name, empty in (("STEPS", []), ("MISSING", {}), ("ACCEPTANCE", {}), ("TIMED", set()), ("_said", [False])):
        monkeypatch.setattr(module, name, empty)
    monkeypatch.setattr(module, "_scheduled", [None])
    return module


def runner_named(step_timer, name: str):
    return next(r for r in step_timer.RUNNERS if r.name == name)


def fake_vllm(step_timer):
    """An EngineCore whose step runs a drafting, a forward (which calls a sampler inside it) and a
    sampling on a V1 runner, patched the way the plugin patches vLLM's."""
    clock = {"t": 0.0}

    class GPUModelRunner:
        def propose_draft_token_ids(self):
            clock["t"] += 1.0

        def _model_forward(self):
            clock["t"] += 4.0
            self._sample()  # nested: counts in the forward only

        def _sample(self):
            clock["t"] += 0.5

    class EngineCore:
        def __init__(self, runner, idle=False):
            self.runner, self.idle = runner, idle

        def step(self):
            if self.idle:
                return {}, False
            clock["t"] += 0.25  # scheduling
            self.runner._model_forward()
            self.runner._sample()
            self.runner.propose_draft_token_ids()
            return {0: "out"}, True

    step_timer._patch_engine_core(types.SimpleNamespace(EngineCore=EngineCore))
    step_timer._patch_runner(
        runner_named(step_timer, "Model Runner V1"), types.SimpleNamespace(GPUModelRunner=GPUModelRunner)
    )
    return EngineCore, GPUModelRunner, clock


def test_step_timer_times_each_part_once_and_skips_idle_steps(step_timer, monkeypatch):
    EngineCore, GPUModelRunner, clock = fake_vllm(step_timer)
    monkeypatch.setattr(step_timer, "_clock", lambda: clock["t"])
    core = EngineCore(GPUModelRunner())
    core.step()
    core.step()
    EngineCore(GPUModelRunner(), idle=True).step()
    steps = step_timer.drain()
    # total, draft, forward (with its nested sample), sample; no scheduler here, so no batch counts
    assert steps == [[6.25, 1.0, 4.5, 0.5, 0, 0, 0]] * 2
    assert step_timer.drain() == []
    assert step_timer.MISSING == {"EngineCore": ["EngineCore.step_with_batch_queue"]}
    assert step_timer.TIMED == {"Model Runner V1"}


def fake_v2_module(clock: dict):
    """Model Runner V2 as vLLM 0.32 lays it out: execute_model prepares the inputs and runs the
    model; sample_tokens samples, then drafts with the speculator init_speculator built."""
    module = types.SimpleNamespace()

    class Speculator:
        def propose(self, batch):
            clock["t"] += 2.0
            return [batch]

    class GPUModelRunner:
        def __init__(self):
            self.speculator = module.init_speculator()  # looked up in the module, as vLLM's runner does

        def execute_model(self, scheduler_output):
            clock["t"] += 0.5 + 3.0  # input preparation, then the model

        def sample(self):
            clock["t"] += 0.75

        def sample_tokens(self, grammar_output):
            clock["t"] += 0.125  # output bookkeeping
            self.sample()
            return self.speculator.propose(1)

    def init_speculator():
        return Speculator()

    module.GPUModelRunner, module.init_speculator = GPUModelRunner, init_speculator
    return module


def test_step_timer_times_model_runner_v2s_forward_sampling_and_speculator(step_timer, monkeypatch):
    clock = {"t": 0.0}
    monkeypatch.setattr(step_timer, "_clock", lambda: clock["t"])
    module = fake_v2_module(clock)
    step_timer._patch_runner(runner_named(step_timer, "Model Runner V2"), module)

    class EngineCore:
        def step(self):
            runner.execute_model("batch")
            assert runner.sample_tokens(None) == [1]
            return {0: "out"}, True

    step_timer._patch_engine_core(types.SimpleNamespace(EngineCore=EngineCore))
    runner = module.GPUModelRunner()
    EngineCore().step()
    assert step_timer.drain() == [[6.375, 2.0, 3.5, 0.75, 0, 0, 0]]
    assert step_timer.TIMED == {"Model Runner V2"} and "Model Runner V2" not in step_timer.MISSING


def test_step_timer_names_the_hooks_a_vllm_lacks(step_timer):
    for runner in step_timer.RUNNERS:
        step_timer._patch_runner(runner, types.SimpleNamespace(GPUModelRunner=type("GPUModelRunner", (), {})))
    assert step_timer.MISSING == {runner.name: list(runner.parts.values()) for runner in step_timer.RUNNERS}


def fake_scheduler(step_timer, computed: dict[str, int]):
    """A scheduler whose schedule() returns the next of its batches and, as vLLM's does, counts each
    scheduled token as computed; update_from_output rolls rejected drafts back."""
    ns = types.SimpleNamespace

    class Scheduler:
        num_sampled_tokens_per_step = 1
        requests = {rid: ns(num_computed_tokens=n) for rid, n in computed.items()}

        def __init__(self, batches=()):
            self.batches = list(batches)

        def schedule(self):
            batch = self.batches.pop(0)
            for rid, n in batch.num_scheduled_tokens.items():
                self.requests[rid].num_computed_tokens += n
            return batch

        def update_from_output(self, scheduler_output, model_runner_output):
            for rid, draft in scheduler_output.scheduled_spec_decode_tokens.items():
                sampled = model_runner_output.sampled_token_ids[model_runner_output.req_id_to_index[rid]]
                self.requests[rid].num_computed_tokens -= len(draft) - (len(sampled) - 1)
            return "updated"

    step_timer._patch_scheduler(types.SimpleNamespace(Scheduler=Scheduler))
    return Scheduler


def test_scheduler_hook_counts_drafted_and_accepted_per_request_and_step(step_timer):
    ns = types.SimpleNamespace
    Scheduler = fake_scheduler(step_timer, {"0-ab": 16, "1-cd": 26, "2-ef": 4})
    step = ns(
        scheduled_spec_decode_tokens={"0-ab": [5, 6, 7], "1-cd": [8, 9, 10], "2-ef": []},
        num_scheduled_tokens={"0-ab": 4, "1-cd": 4, "2-ef": 1},
        total_num_scheduled_tokens=9,
    )
    scheduler = Scheduler([step])
    assert scheduler.schedule() is step
    assert step_timer._step[4:] == [9, 55, 3]  # the step's batch: tokens, KV-cache tokens, requests
    # request 0 accepted 2 drafts (+ the bonus token), request 1 none, request 2 drafted nothing
    runner = ns(sampled_token_ids=[[1, 2, 3], [4], [5]], req_id_to_index={"0-ab": 0, "1-cd": 1, "2-ef": 2})
    assert scheduler.update_from_output(step, runner) == "updated"
    assert step_timer._step[4:] == [9, 55, 3]  # its own batch's output: counted as a synchronous step counts
    scheduler.update_from_output(
        ns(scheduled_spec_decode_tokens={"0-ab": [1, 2, 3]}),
        ns(sampled_token_ids=[[1, 2, 3, 4]], req_id_to_index={"0-ab": 0}),
    )
    assert step_timer.drain_acceptance() == {"0-ab": ([3, 3], [2, 3]), "1-cd": ([3], [0])}
    assert step_timer.drain_acceptance() == {}


def test_under_async_scheduling_each_step_records_the_batch_it_ran(step_timer):
    """vLLM's step_with_batch_queue schedules and runs a batch, then takes the output of the batch
    before it: each step's batch is the one it scheduled, its KV-cache tokens counted as a
    synchronous step would count them (the previous batch's rejected drafts rolled back)."""
    ns = types.SimpleNamespace
    batches = [
        ns(num_scheduled_tokens={"a": 6}, total_num_scheduled_tokens=6, scheduled_spec_decode_tokens={}),
        ns(num_scheduled_tokens={"a": 4}, total_num_scheduled_tokens=4, scheduled_spec_decode_tokens={"a": [-1] * 3}),
        ns(
            num_scheduled_tokens={"a": 4, "b": 2},
            total_num_scheduled_tokens=6,
            scheduled_spec_decode_tokens={"a": [-1] * 3},
        ),
    ]
    outputs = [  # batch 2 accepted 1 of its 3 drafts
        ns(sampled_token_ids=[[7]], req_id_to_index={"a": 0}),
        ns(sampled_token_ids=[[7, 8]], req_id_to_index={"a": 0}),
    ]
    scheduler = fake_scheduler(step_timer, {"a": 0, "b": 0})(batches)

    class EngineCore:
        queue: list = []

        def step_with_batch_queue(self):
            scheduled = scheduler.schedule()
            self.queue.append((scheduled, outputs[len(self.queue)] if len(self.queue) < len(outputs) else None))
            if len(self.queue) > 1:
                scheduler.update_from_output(*self.queue[-2])
            return None, True

    step_timer._patch_engine_core(types.SimpleNamespace(EngineCore=EngineCore))
    core = EngineCore()
    for _ in batches:
        core.step_with_batch_queue()
    batch = [step[4:] for step in step_timer.drain()]
    # KV-cache tokens: 6 after the prompt; 6 + 4; then 6 + 1 accepted + 1 bonus, + 4, and b's 2
    assert batch == [[6, 6, 1], [4, 10, 1], [6, 14, 2]]
    assert step_timer.drain_acceptance() == {"a": ([3], [1])}


def fake_outputs(public: dict[str, tuple[list[int], list[int]] | None]):
    ns = types.SimpleNamespace
    return [
        ns(
            request_id=rid,
            outputs=[
                ns(
                    spec_decode_metrics=None
                    if counts is None
                    else ns(per_step_drafted=counts[0], per_step_accepted=counts[1])
                )
            ],
        )
        for rid, counts in public.items()
    ]


def fake_timer(hooked: dict, timed=("Model Runner V1",), missing=None, steps=([1.0, 0.1, 0.7, 0.1, 4, 40, 1],)):
    """The plugin's state after a call: `timed` the runners whose parts ran, `missing` the hooks it lacked."""
    import specperf_step_timer as plugin  # on the path: the step_timer fixture

    return types.SimpleNamespace(
        RUNNERS=plugin.RUNNERS,
        NOT_TIMED=plugin.NOT_TIMED,
        TIMED=set(timed),
        MISSING=missing or {},
        drain=lambda: [list(s) for s in steps],
        drain_acceptance=lambda: hooked,
    )


def test_call_trace_takes_public_metrics_and_checks_them_against_the_hook(step_timer):
    hooked = {"0-1a2b3c4d": ([3, 3], [1, 2]), "1-5e6f7a8b": ([3], [3])}
    trace = tracing.call_trace(fake_timer(hooked), fake_outputs({"0": ([3, 3], [1, 2]), "1": ([3], [3])}), True)
    assert trace["requests"] == [{"drafted": [3, 3], "accepted": [1, 2]}, {"drafted": [3], "accepted": [3]}]
    assert trace["notes"] == [] and trace["steps"] == [[1.0, 0.1, 0.7, 0.1, 4, 40, 1]]
    off = tracing.call_trace(fake_timer(hooked), fake_outputs({"0": ([3, 3], [1, 1]), "1": ([3], [3])}), True)
    assert off["notes"] == [
        "the scheduler hook's per-step counts differ from vLLM's per-request metrics for 1 of 2 requests"
    ]
    never_drafted = tracing.call_trace(fake_timer(hooked), fake_outputs({"0": ([3, 3], [1, 2]), "2": ([], [])}), True)
    assert never_drafted["notes"] == []  # no step drafted for request 2: the hook saw nothing, rightly
    unseen = tracing.call_trace(fake_timer({}), fake_outputs({"0": ([3], [1])}), True)  # the hook saw nothing
    assert unseen["requests"] == [{"drafted": [3], "accepted": [1]}] and len(unseen["notes"]) == 1


def test_call_trace_falls_back_to_the_hook_where_vllm_has_no_per_request_metrics(step_timer):
    hooked = {"1": ([3], [0]), "10": ([3, 3], [3, 1])}  # unsuffixed ids: an older vLLM
    trace = tracing.call_trace(fake_timer(hooked), fake_outputs({"1": None, "10": None, "2": None}), False)
    assert trace["requests"] == [{"drafted": [3], "accepted": [0]}, {"drafted": [3, 3], "accepted": [3, 1]}, None]
    assert trace["notes"] == []


def test_call_trace_says_in_one_line_when_no_runner_part_was_timed(step_timer):
    untimed = fake_timer({}, timed=(), missing={"Model Runner V2": ["GPUModelRunner.sample"]})
    assert tracing.call_trace(untimed, [], True)["notes"] == [step_timer.NOT_TIMED]
    assert step_timer.NOT_TIMED.startswith("step parts not timed: ") and "\n" not in step_timer.NOT_TIMED


def test_call_trace_names_what_the_runner_that_ran_lacks_and_what_its_parts_hold(step_timer):
    missing = {"Model Runner V1": ["GPUModelRunner._sample"], "Model Runner V2": ["GPUModelRunner.sample"]}
    notes = tracing.call_trace(fake_timer({}, timed=("Model Runner V2",), missing=missing), [], True)["notes"]
    assert notes == [
        "the installed vLLM lacks Model Runner V2's GPUModelRunner.sample: its part is not timed",
        "step parts of Model Runner V2: its forward includes the step's input preparation, its sampling the logits",
    ]
    assert tracing.call_trace(fake_timer({}, steps=()), [], True)["notes"] == []  # V1: nothing to say


def test_step_timer_is_a_vllm_general_plugin_only_on_its_own_path():
    entry_points = (tracing.PLUGIN_DIR / "specperf_step_timer-1.0.dist-info" / "entry_points.txt").read_text()
    assert "[vllm.general_plugins]" in entry_points and "specperf_step_timer:register" in entry_points
    from importlib.metadata import entry_points as installed

    assert "specperf_step_timer" not in {e.name for e in installed(group="vllm.general_plugins")}


# ---------------------------------------------------------------- a result's trace

REQUESTS = [Request(id="r0", text="a", chat=False), Request(id="r1", text="b", chat=False)]


def raw_round(scale: float = 1.0) -> dict:
    steps = [[0.010 * scale, 0.002, 0.006, 0.001, 8, 100, 2], [0.020 * scale, 0.004, 0.012, 0.002, 6, 108, 2]]
    return {
        "steps": steps,
        "notes": [],
        "requests": [{"drafted": [3, 3, 3], "accepted": [3, 1, 0]}, {"drafted": [3, 3], "accepted": [2, 2]}],
    }


def test_build_trace_keeps_the_last_round_and_totals_all():
    trace = tracing.build_trace([raw_round(), raw_round(2.0)], REQUESTS, output_tokens=40)
    assert [r.request_id for r in trace.requests] == ["r0", "r1"]
    assert trace.requests[0].accepted == [3, 1, 0]
    assert trace.step_us["total"] == [20000, 40000] and trace.step_us["forward"] == [6000, 12000]
    assert trace.step_batch == {"tokens": [8, 6], "kv_tokens": [100, 108], "requests": [2, 2]}
    assert trace.steps == 4 and trace.output_tokens == 40
    assert trace.seconds["total"] == pytest.approx(0.09)
    assert trace.seconds["rest"] == pytest.approx(0.09 - 0.012 - 0.036 - 0.006)
    assert (trace.drafted, trace.accepted) == (30, 16)  # both rounds: the sums vLLM's counters must match
    assert trace.notes == []


def test_build_trace_says_what_it_could_not_time():
    untimed = {
        "steps": [[0.01, 0.0, 0.0, 0.0, 1, 10, 1]],
        "requests": [None, None],
        "notes": ["no per-step acceptance: the installed vLLM lacks per_request_spec_decode_metrics"],
    }
    trace = tracing.build_trace([untimed], REQUESTS, output_tokens=10)
    assert trace.requests == []
    assert trace.notes == untimed["notes"]  # the calls' notes, as they said it
    assert tracing.build_trace([None, None], REQUESTS, 10) is None


def test_build_trace_bounds_the_per_step_lists(monkeypatch):
    monkeypatch.setattr(tracing, "MAX_STEPS", 3)
    many = {"steps": [[0.01, 0.001, 0.005, 0.001, 1, 10, 1]] * 5, "requests": [], "notes": []}
    trace = tracing.build_trace([many], REQUESTS, output_tokens=5)
    assert len(trace.step_us["total"]) == 3 and trace.steps == 5
    assert any("the first 3 of 5 steps kept" in n for n in trace.notes)


def test_merge_calls_needs_every_call_traced():
    a, b = raw_round(), raw_round()
    merged = tracing.merge_calls([a, b])
    assert len(merged["steps"]) == 4 and len(merged["requests"]) == 4
    assert tracing.merge_calls([a, None]) is None


def test_a_stored_trace_takes_about_40_bytes_a_step(tmp_path):
    steps = 1000
    requests = [RequestTrace(request_id="r0", drafted=[3] * steps, accepted=[2] * steps)]
    trace = Trace(requests=requests, step_us={p: [12345] * steps for p in STEP_PARTS}, steps=steps)
    atomic_write_json(tmp_path / "trace.json", trace.to_json())  # as results are written: numbers inline
    assert (tmp_path / "trace.json").stat().st_size < 40 * steps
    assert json.loads((tmp_path / "trace.json").read_text()) == trace.to_json()


# ---------------------------------------------------------------- analyses


def trace_of(
    accepted: list[list[int]], k: int = 3, seconds: dict | None = None, steps: int = 10, output_tokens: int = 30
) -> Trace:
    return Trace(
        requests=[RequestTrace(request_id=f"r{i}", drafted=[k] * len(a), accepted=a) for i, a in enumerate(accepted)],
        seconds=seconds or {"total": 1.0, "draft": 0.1, "forward": 0.6, "sample": 0.1, "rest": 0.2},
        steps=steps,
        output_tokens=output_tokens,
    )


def test_positions_count_the_prefill_token_and_each_steps_bonus():
    assert traces.request_positions([3, 3, 3], [3, 0, 2]) == [1, 5, 6]
    # n-gram proposed nothing at positions 5 and 6 (0): those steps were not recorded
    assert traces.request_positions([3, 3, 3], [3, 0, 2], ngram_acc=[4, 1, 1, 1, 0, 0, 1, 3, 1, 1, 1]) == [1, 7, 8]


def test_acceptance_by_tenth_follows_the_output():
    # 10 steps of one request: all 3 drafts accepted early, none late
    trace = trace_of([[3] * 5 + [0] * 5])
    rates = traces.acceptance_by_tenth(trace)
    assert len(rates) == traces.TENTHS
    filled = [r for r in rates if r is not None]
    assert filled[0] == 1.0 and filled[-1] == 0.0


def test_request_spread_and_time_shares():
    trace = trace_of([[3, 3], [0, 0], [1, 1]])
    assert traces.request_acceptance_lengths(trace) == [4.0, 1.0, 2.0]
    p = traces.percentiles([1.0, 2.0, 3.0, 4.0, 5.0])
    assert p["p50"] == 3.0 and p["p5"] == pytest.approx(1.2)
    assert traces.time_shares(trace) == {"draft": 0.1, "forward": 0.6, "sample": 0.1, "rest": 0.2}
    assert traces.time_shares(Trace()) is None


def test_attribution_names_a_slower_verification():
    before = trace_of([[2]])
    after = trace_of([[2]], seconds={"total": 1.3, "draft": 0.1, "forward": 0.9, "sample": 0.1, "rest": 0.2})
    moved = traces.attribute(after, before)
    assert moved.mover == "forward"
    assert moved.change == pytest.approx(0.3)
    assert sum(moved.contributions.values()) == pytest.approx(moved.change)
    assert "target forward (verification) +30.0%" in moved.line()


def test_attribution_names_fewer_tokens_per_step():
    before = trace_of([[2]], output_tokens=30)
    after = trace_of([[1]], output_tokens=20)  # same step times, fewer tokens per step
    moved = traces.attribute(after, before)
    assert moved.mover == "acceptance"
    assert moved.change == pytest.approx(0.5)
    assert moved.tokens_per_step == (3.0, 2.0)


def test_attribution_only_for_a_speed_regression_with_both_traces():
    result = make_record(make_scenario())
    slower = trace_of([[2]], seconds={"total": 2.0, "draft": 0.1, "forward": 1.6, "sample": 0.1, "rest": 0.2})
    result.trace = slower
    result.baseline = BaselineRef(trace=trace_of([[2]]))
    result.verdict = Verdict(
        scenario_id=result.id, status="regression", metrics=[{"metric": "speedup", "status": "regression"}]
    )
    assert traces.attribution_of(result).mover == "forward"
    result.verdict = Verdict(
        scenario_id=result.id,
        status="regression",
        metrics=[{"metric": "mean_acceptance_length", "status": "regression"}],
    )
    assert traces.attribution_of(result) is None
    result.baseline = BaselineRef()
    assert traces.attribution_of(result) is None


# ---------------------------------------------------------------- profiles


def test_a_traced_scenario_has_its_own_id_engine_and_hash():
    plain = make_scenario()
    on = plain.replace(trace=True)
    assert on.id == plain.id + "-traced" and on.reference_id == plain.reference_id + "-traced"
    assert on.engine_key != plain.engine_key and on.hash != plain.hash
    assert "trace" not in json.loads(plain.engine_key)  # untraced keys (and baselines) unchanged


def test_sd_trace_traces_every_scenario_of_a_profile():
    from specperf.profiles.scenarios import load_profile

    plain = load_profile("cpu-gate")
    profile = traced(plain)
    assert all(s.trace and s.id.endswith("-traced") for s in profile.scenarios)
    assert [s.id for s in profile.scenarios] == [s.id + "-traced" for s in plain.scenarios]
    # a scenario traced already and its untraced twin become one
    twins = dataclasses.replace(plain, scenarios=(*plain.scenarios, profile.scenarios[0]))
    assert [s.id for s in traced(twins).scenarios] == [s.id for s in profile.scenarios]


# ---------------------------------------------------------------- the report


def traced_record(method, name, accepted, seconds, request_ids=("r0", "r1")):
    scenario = make_scenario().replace(
        method=make_scenario().method.model_copy(update={"label": method, "name": name}), trace=True
    )
    result = make_record(scenario)
    result.workload = WorkloadFacts(request_ids=list(request_ids), overlap_bleu4=[0.8, 0.05])
    result.trace = Trace(
        requests=[
            RequestTrace(request_id=rid, drafted=[3] * len(a), accepted=a) for rid, a in zip(request_ids, accepted)
        ],
        seconds=seconds,
        steps=10,
        output_tokens=30,
    )
    return result


def test_report_shows_trace_views_and_summary_json(tmp_path):
    seconds = {"total": 1.0, "draft": 0.1, "forward": 0.6, "sample": 0.1, "rest": 0.2}
    ngram = traced_record("ngram-k3", "ngram", [[3, 3], [0, 0]], seconds, request_ids=("<b>r0</b>", "r1"))
    eagle = traced_record("eagle3-k3", "eagle3", [[1, 1], [2, 2]], seconds, request_ids=("<b>r0</b>", "r1"))
    run = make_run(tmp_path / "run", [ngram, eagle])
    page = section(html_of(run), "traces")
    assert "Step time by part" in page and "Acceptance by tenth of the output" in page
    assert "Prompt/output overlap against n-gram" in page
    assert "<b>r0</b>" not in page and "&lt;b&gt;r0&lt;/b&gt;" in page
    summary = report.summary_json(view_of(run))["traces"]
    assert {s["id"] for s in summary["time_shares"]} == {ngram.id, eagle.id}
    points = summary["overlap_vs_ngram_advantage"][0]["points"]
    assert {p["request_id"]: p["advantage"] for p in points} == {"<b>r0</b>": 2.0, "r1": -2.0}
    chart = scatter(points)  # BLEU-4 is on 0..1: 0.8 sits at 80% of the plot's width
    dot = float(next(d["cx"] for d in chart["dots"] if "r0" in d["tip"]))
    assert dot == pytest.approx(chart["left"] + 0.8 * (chart["right"] - chart["left"]), abs=0.1)


def test_report_says_what_moved_in_a_traced_speed_regression(tmp_path):
    seconds = {"total": 1.0, "draft": 0.1, "forward": 0.6, "sample": 0.1, "rest": 0.2}
    result = traced_record("ngram-k3", "ngram", [[2], [2]], {**seconds, "total": 1.5, "draft": 0.6})
    result.baseline = BaselineRef(trace=traced_record("ngram-k3", "ngram", [[2], [2]], seconds).trace)
    result.verdict = Verdict(
        scenario_id=result.id, status="regression", metrics=[{"metric": "throughput_tok_s", "status": "regression"}]
    )
    run = make_run(tmp_path / "run", [result])
    (scenario,) = report.summary_json(view_of(run))["scenarios"]
    assert scenario["attribution"]["mover"] == "draft"
    assert scenario["attribution"]["change"] == pytest.approx(0.5)
    assert "what moved, from the traces: time per output token +50.0%, mostly drafting" in html_of(run)


def test_ngram_acceptance_is_computed_once_per_distinct_request_and_bounded(monkeypatch):
    prompts, outputs = [[1, 2, 3, 9, 1, 2]] * 2 + [[5, 6, 5, 6]], [[3, 9, 7]] * 2 + [[5, 6]]
    lengths = tracing.ngram_acceptance(prompts, outputs, (2, 3))
    assert (
        lengths[0] == lengths[1] == [2, 1, 0]
    )  # 9, 1, 2, 3 proposed after [.., 1, 2, 3]: 9 accepted; at the end no match
    monkeypatch.setattr(tracing, "MAX_POSITIONS", 4)
    assert tracing.ngram_acceptance(prompts, outputs, (2, 3))[2] == []  # over the budget: left out
    trace = tracing.build_trace([raw_round()], REQUESTS, 40, ngram_acc=[[2, 1, 1], []])
    assert trace.requests[0].ngram_acc == [2, 1, 1] and trace.requests[1].ngram_acc == []
    assert any("n-gram acceptance: the first" in n for n in trace.notes)


def test_sd_trace_leaves_a_profiles_served_scenarios_untraced():
    """A served scenario cannot be traced (its scenario record refuses it): --sd-trace on cpu-smoke,
    which has serve cells, traces its offline scenarios only."""
    from specperf.profiles.scenarios import load_profile

    plain = load_profile("cpu-smoke")
    profile = traced(plain)
    served = [s for s in profile.scenarios if s.serves]
    assert served and not any(s.trace for s in served)
    assert all(s.trace for s in profile.scenarios if not s.serves)
    assert len(profile.scenarios) == len({s.id for s in plain.scenarios})
