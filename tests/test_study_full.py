"""study-full is the study's matrix as its scripts ran it (SpecDecode-Bench/vllm: scripts/bench_latency.py,
scripts/common.py, the run-*.sh and profile-*.sh scripts): its cells expand into the study's and no
others, and each cell's vLLM, loader, prompts and throughput are the study's own reading of them."""

from __future__ import annotations

import pytest

from specperf.judge import metrics
from specperf.profiles.registry import NO_SD_LABEL
from specperf.profiles.scenarios import load_profile
from specperf.profiles.workloads import WORKLOADS
from specperf.profiles.workloads.catalog import LOADER_0_10, LOADER_0_11
from specperf.profiles.workloads.sampling import PAD_CHOICE_LOOP, PAD_CHOICES, study_loader, study_padding
from specperf.run.calls import prompting

NON_REASONING = ("cnn_dailymail", "sharegpt", "instructcoder", "gsm8k")
LARGE_BATCHES = (1, 16, 64, 128)
FORK = "SpecDecode-Bench/vllm perf/e2e-dm"


def cells(model, methods, datasets, batches):
    return {(model, m, d, b) for m in (NO_SD_LABEL, *methods) for d in datasets for b in batches}


# (model, method label, dataset, batch size) of every cell the scripts run, and nothing else.
STUDY_CELLS = (
    cells("llama3.1-8b", ("ngram-k3", "eagle-k3", "eagle3-k3"), NON_REASONING, LARGE_BATCHES)
    | cells("llama3.1-8b", ("ngram-k5",), ("instructcoder",), LARGE_BATCHES)
    | cells("llama3-70b", ("ngram-k3", "eagle-k3", "draft-k3"), NON_REASONING, LARGE_BATCHES)
    | cells("llama3-70b", ("ngram-k5",), ("instructcoder",), LARGE_BATCHES)
    | cells("qwen3-8b", ("ngram-k3", "eagle3-k3", "draft-k3"), NON_REASONING, LARGE_BATCHES)
    | cells("qwen3-8b", ("ngram-k5",), ("instructcoder",), LARGE_BATCHES)
    | cells("qwen3-8b-thinking", ("ngram-k3", "eagle3-k3"), NON_REASONING, LARGE_BATCHES)
    | cells("qwen3-8b-thinking", ("ngram-k5",), ("instructcoder",), LARGE_BATCHES)  # run-q3-8b.sh, 800458af
    | cells("qwen3-8b-thinking", ("ngram-k3", "eagle3-k3"), ("aime", "gpqa"), (1, 8, 16))
    | cells("glm4.5-air", ("ngram-k3", "mtp-k3"), ("aime", "gpqa"), (1, 2, 4))
    # the 100-request scripts (e40377b1): profile-q3-8b-eagle-tree.sh, -tree-sd14.sh, -suffix.sh, with
    # the chain at each tree's k for the chain-vs-tree comparison
    | cells("qwen3-8b-100", ("eagle3-tree-k6", "eagle3-k6"), ("sharegpt",), (128,))
    | cells("qwen3-8b-100", ("eagle3-tree-k14", "eagle3-k14"), ("sharegpt",), (64, 128))
    | cells("qwen3-8b-100", ("suffix-k32",), ("instructcoder", "gsm8k"), (1, 16, 64, 128))
)
E40377B1 = "SpecDecode-Bench/vllm e40377b1"


@pytest.fixture(scope="module")
def study():
    return {s.id: s for s in load_profile("study-full").scenarios}


def test_the_cells_are_the_studys_and_no_others(study):
    assert {(s.model.name, s.method.label, s.dataset, s.batch_size) for s in study.values()} == STUDY_CELLS


def test_a_cells_attention_backend_wins_over_the_tree_methods(study):
    """The tree methods set vLLM's tree attention backend unless the scenario's env names one: the
    study's tree cells name none in its scripts, so study-full's pin FlashAttention (what vLLM chose
    there, under which the tree is not drafted) and study-extra's get the tree backend."""
    from specperf.run.pool import engine_config

    trees = [s for s in study.values() if s.method.name == "eagle3_tree"]
    assert trees and all(
        engine_config(s).env["VLLM_ATTENTION_BACKEND"] == s.env["VLLM_ATTENTION_BACKEND"] for s in trees
    )
    verified = [s for s in load_profile("study-extra").scenarios if s.method.name == "eagle3_tree"]
    assert verified and all("VLLM_ATTENTION_BACKEND" not in s.env for s in verified)
    assert {engine_config(s).env["VLLM_ATTENTION_BACKEND"] for s in verified} == {"TREE_ATTN"}


def test_each_cells_vllm_picks_its_loader_and_padding(study):
    """maybe_oversample_requests: random.choices on 0.10.1.1, random.choice per copy on 0.11.1rc1 and
    the forks built on it (the draft-model fork's scripts import vllm.benchmarks.datasets_bench)."""
    assert {s.vllm for s in study.values()} == {"0.10.1.1", "0.11.1rc1", FORK, E40377B1}
    for s in study.values():
        old = s.vllm == "0.10.1.1"
        assert study_padding(s.vllm) == (PAD_CHOICES if old else PAD_CHOICE_LOOP), s.id
        assert study_loader(s.vllm) == (LOADER_0_10 if old else LOADER_0_11), s.id


def test_the_prompts_are_the_strings_the_cells_loader_built(study):
    """bench_latency.py hands the loader's prompt strings to llm.generate: the study's prompt form
    everywhere, so each cell gets its loader's InstructCoder text and CNN/DailyMail thinking switch."""
    for s in study.values():
        assert s.prompt_form == "study", s.id
        loader = study_loader(s.vllm)
        settings = prompting(s).as_loader_builds(WORKLOADS[s.dataset], loader)
        thinking = dict(settings.template_kwargs).get("enable_thinking")
        if s.dataset == "cnn_dailymail" and loader == LOADER_0_10:
            assert thinking is False, s.id  # CNNDailyMailDataset.sample of 0.10.1.1: enable_thinking=False
        else:
            assert thinking == s.model.thinking, s.id
    thinking_cnn = [s for s in study.values() if s.model.name == "qwen3-8b-thinking" and s.dataset == "cnn_dailymail"]
    assert thinking_cnn and all(study_loader(s.vllm) == LOADER_0_10 for s in thinking_cnn)
    instructcoder = WORKLOADS["instructcoder"].study_prompts
    assert set(instructcoder) == {LOADER_0_10}  # 0.11.1rc1's datasets_bench.py has the suite's single space
    record = {"id": "x", "input": "code", "instruction": "Fix it."}
    assert instructcoder[LOADER_0_10].parse(record).text == (
        "code\n\nFix it. Just output             the code, do not include any explanation."
    )
    assert {s.prompt_form for s in load_profile("study-extra").scenarios} == {"study"}


def test_the_studys_throughput_averages_per_call_rates_over_eos_finished_calls():
    from specperf.records import CallTiming

    calls = [
        CallTiming(wall_s=1.0, output_tokens=100, eos=True),
        CallTiming(wall_s=4.0, output_tokens=100, eos=True),
        CallTiming(wall_s=1.0, output_tokens=999, eos=False),
    ]  # hit max_tokens: left out
    assert metrics.study_throughput(calls) == pytest.approx((100 + 25) / 2)  # not 200 / 5 = 40
    many = [CallTiming(wall_s=1.0, output_tokens=10, eos=True)] * 500 + [
        CallTiming(wall_s=1.0, output_tokens=1000, eos=True)
    ]
    assert metrics.study_throughput(many) == 10  # at most the first 500 EOS-finished calls
    assert metrics.study_throughput(calls[2:]) is None


def test_study_extra_holds_the_cells_the_study_did_not_run(study):
    extra = {(s.model.name, s.method.label, s.dataset) for s in load_profile("study-extra").scenarios}
    assert extra and not {(m, label, d) for m, label, d, _ in STUDY_CELLS if label != NO_SD_LABEL} & extra


def test_each_round_keeps_its_calls_and_the_result_the_studys_throughput():
    from specperf.records import CallTiming, Counters
    from specperf.run.engines.protocol import Reply
    from specperf.run.loop import RoundResult, call_timing
    from specperf.run.summary import study_throughput

    def reply(wall_s, tokens, reasons):
        return Reply(wall_s, tokens, [], [], {}, {}, finish_reasons=reasons)

    assert call_timing(reply(2.0, 50, ["stop", "length"])) == CallTiming(wall_s=2.0, output_tokens=50, eos=True)
    assert call_timing(reply(2.0, 50, ["length", "stop"])).eos is False  # the first copy decides
    assert call_timing(reply(1.0, 5, [])).eos is None  # an engine that did not say

    def round_of(calls):
        return RoundResult(
            engine="a",
            wall_s=sum(c.wall_s for c in calls),
            output_tokens=sum(c.output_tokens for c in calls),
            counters=Counters(),
            token_ids=[],
            texts=[],
            calls=calls,
        )

    rounds = [
        round_of([call_timing(reply(1.0, 100, ["stop"])), call_timing(reply(2.0, 100, ["length"]))]),
        round_of([call_timing(reply(0.5, 100, ["stop"])), call_timing(reply(2.0, 100, ["length"]))]),
    ]
    study = study_throughput(rounds)
    assert study.samples == [100.0, 200.0] and study.value == 150.0
    assert (study.eos_calls, study.calls) == (1, 2)
    assert study_throughput([round_of([CallTiming(wall_s=1.0, output_tokens=5, eos=None)])]) is None
