"""study-full is the study's matrix as its scripts ran it (SpecDecode-Bench/vllm: scripts/bench_latency.py,
scripts/common.py, the run-*.sh and profile-*.sh scripts): every value checked here."""

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
TREES = {  # scripts/bench_latency.py (e40377b1) get_speculative_token_tree
    6: "[(0,), (1,), (0, 0), (1, 0), (0, 0, 0), (1, 0, 0)]",
    14: "[(0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1), (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (1, 0, 0), "
    "(1, 0, 1), (1, 1, 0), (1, 1, 1)]",
}
E40377B1 = "SpecDecode-Bench/vllm e40377b1"


@pytest.fixture(scope="module")
def study():
    return {s.id: s for s in load_profile("study-full").scenarios}


def test_the_cells_are_the_studys_and_no_others(study):
    assert {(s.model.name, s.method.label, s.dataset, s.batch_size) for s in study.values()} == STUDY_CELLS


def test_models_heads_tp_and_k(study):
    models = {s.model.name: (s.model.path, s.model.tp) for s in study.values()}
    assert models == {
        "llama3.1-8b": ("meta-llama/Llama-3.1-8B-Instruct", 1),
        "llama3-70b": ("meta-llama/Meta-Llama-3-70B-Instruct", 4),
        "qwen3-8b": ("Qwen/Qwen3-8B", 1),
        "qwen3-8b-thinking": ("Qwen/Qwen3-8B", 1),
        "qwen3-8b-100": ("Qwen/Qwen3-8B", 1),
        "glm4.5-air": ("zai-org/GLM-4.5-Air", 4),
    }
    configs = {(s.model.name, s.method.label): s.method.speculative_config() for s in study.values()}
    draft = {"disable_padded_drafter_batch": True, "max_model_len": 8192, "num_speculative_tokens": 3}
    assert configs[("llama3.1-8b", "eagle-k3")] == {
        "method": "eagle",
        "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
    }
    assert configs[("llama3.1-8b", "eagle3-k3")] == {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
    }
    assert configs[("llama3-70b", "eagle-k3")] == {
        "method": "eagle",
        "model": "yuhuili/EAGLE-LLaMA3-Instruct-70B",
        "num_speculative_tokens": 3,
    }
    # Fig. 1's cells: the repository root's profile-llama3-70b-draft-model.sh (44dc542c), the base model
    assert configs[("llama3-70b", "draft-k3")] == {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B", **draft}
    assert configs[("qwen3-8b", "draft-k3")] == {"method": "draft_model", "model": "Qwen/Qwen3-0.6B", **draft}
    for model in ("qwen3-8b", "qwen3-8b-thinking"):
        assert configs[(model, "eagle3-k3")] == {
            "method": "eagle3",
            "model": "AngelSlim/Qwen3-8B_eagle3",
            "num_speculative_tokens": 3,
        }
    assert configs[("glm4.5-air", "mtp-k3")] == {
        "method": "mtp",
        "model": "zai-org/GLM-4.5-Air",
        "num_speculative_tokens": 3,
    }  # deepseek_mtp, model = target
    for (_, label), config in configs.items():
        if label.startswith("ngram"):
            assert config == {
                "method": "ngram",
                "num_speculative_tokens": int(label[-1]),
                "prompt_lookup_min": 3,
                "prompt_lookup_max": 7,
            }


def test_the_tree_and_suffix_cells_are_the_scripts(study):
    """profile-q3-8b-eagle-tree*.sh and profile-q3-8b-suffix.sh: 100 requests, --max_tokens 8, bench_latency.py's
    trees; no attention backend set, so vLLM's default (FlashAttention), under which the tree is not drafted."""
    from specperf.run.pool import engine_config

    late = [s for s in study.values() if s.model.name == "qwen3-8b-100"]
    assert {(s.num_requests, s.output_len, s.vllm) for s in late} == {(100, 8192, E40377B1)}
    for s in late:
        config = s.method.speculative_config()
        if s.method.name == "eagle3_tree":
            k = config["num_speculative_tokens"]
            assert config == {
                "method": "eagle3_tree",
                "model": "AngelSlim/Qwen3-8B_eagle3",
                "num_speculative_tokens": k,
                "speculative_token_tree": TREES[k],
            }, s.id
        if s.method.name == "suffix":
            assert config == {"method": "suffix", "num_speculative_tokens": 32}, s.id
        backend = "FLASH_ATTN" if s.dataset == "sharegpt" else None
        assert s.env.get("VLLM_ATTENTION_BACKEND") == backend, s.id
        assert engine_config(s).env.get("VLLM_ATTENTION_BACKEND") == backend, s.id  # the cell's wins over the method's
    verified = [s for s in load_profile("study-extra").scenarios if s.method.name == "eagle3_tree"]
    assert verified and all("VLLM_ATTENTION_BACKEND" not in s.env for s in verified)
    assert {engine_config(s).env["VLLM_ATTENTION_BACKEND"] for s in verified} == {"TREE_ATTN"}


def test_prompts_selection_and_outputs(study):
    for s in study.values():
        reasoning_length = s.model.name in ("qwen3-8b-thinking", "glm4.5-air")
        assert s.output_len == (32768 if reasoning_length else 8192), s.id
        late = s.model.name == "qwen3-8b-100"
        assert s.num_requests == (100 if late else {"aime": 90, "gpqa": 448}.get(s.dataset, 500)), s.id
        assert (s.selection, s.seed, s.batching, s.rounds, s.warmup) == ("study", 42, "replicate", 1, 0), s.id
        # AIME: the raw problem on the v0.11.1rc1 branch (GLM), the chat template on v0.10.1.1 (Qwen3 thinking)
        assert s.chat == (True if s.id.startswith("qwen3-8b-thinking") and s.dataset == "aime" else None), s.id
        thinking = {"qwen3-8b": False, "qwen3-8b-100": False, "qwen3-8b-thinking": True}
        assert s.model.thinking == thinking.get(s.model.name), s.id
    assert WORKLOADS["aime"].chat is False
    sharegpt, aime = WORKLOADS["sharegpt"].study_filter, WORKLOADS["aime"].study_filter
    assert (sharegpt.min_prompt, sharegpt.max_prompt, sharegpt.min_completion, sharegpt.max_total) == (4, 1024, 4, 2048)
    assert (aime.min_prompt, aime.max_prompt, aime.min_completion, aime.max_total) == (4, 2048, 4, 32000)
    assert WORKLOADS["sharegpt"].study_shuffle == "list"
    assert {w.study_shuffle for name, w in WORKLOADS.items() if name != "sharegpt"} == {"stream"}


def test_engine_and_environment(study):
    for s in study.values():
        assert s.engine_args == {
            "dtype": "bfloat16",
            "trust_remote_code": True,
            "enforce_eager": False,
            "async_scheduling": False,
        }, s.id
        tree_cell = s.model.name == "qwen3-8b-100" and s.dataset == "sharegpt"
        backend = {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"} if tree_cell else {}
        assert s.env == {"VLLM_DISABLE_COMPILE_CACHE": "1", **backend}, s.id
        assert "max_model_len" not in s.engine_args and "gpu_memory_utilization" not in s.engine_args


def test_the_vllm_each_cell_was_measured_with(study):
    for s in study.values():
        if s.method.name == "draft_model":
            expected = FORK
        elif s.model.name == "qwen3-8b-100":
            expected = E40377B1
        elif s.model.name in ("qwen3-8b", "glm4.5-air"):
            expected = "0.11.1rc1"
        else:
            expected = "0.10.1.1"
        assert s.vllm == expected, s.id
        # maybe_oversample_requests: random.choices on 0.10.1.1, random.choice per copy on 0.11.1rc1
        # (the draft-model fork's scripts import vllm.benchmarks.datasets_bench: 0.11.1rc1's loader)
        assert study_padding(s.vllm) == (PAD_CHOICES if expected == "0.10.1.1" else PAD_CHOICE_LOOP), s.id
        assert study_loader(s.vllm) == (LOADER_0_10 if expected == "0.10.1.1" else LOADER_0_11), s.id


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
    assert ("llama3.1-8b", "eagle3-k3", "aime") in extra
    assert ("qwen3-8b-thinking", "draft-k3", "gpqa") in extra
    assert ("glm4.5-air", "mtp-k3", "sharegpt") in extra
    assert not {(m, label, d) for m, label, d, _ in STUDY_CELLS if label != NO_SD_LABEL} & extra


def test_each_round_keeps_its_calls_and_the_result_the_studys_throughput():
    from specperf.records import CallTiming, Counters
    from specperf.run.loop import RoundResult, call_timing
    from specperf.run.protocol import Reply
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


def test_llama3_70b_drafted_by_the_instruct_model_is_fig_4s_cell_in_study_extra():
    """scripts/profile-llama3-70b-draft-model.sh (440b48d9): Llama-3.2-1B-Instruct, CNN/DailyMail
    only, batch 1, 64, 128, 512, the time breakdown's batch sizes."""
    extra = [s for s in load_profile("study-extra").scenarios if s.model.name == "llama3-70b"]
    drafted = [s for s in extra if not s.method.is_reference]
    assert {s.method.params["model"] for s in drafted} == {"meta-llama/Llama-3.2-1B-Instruct"}
    assert {(s.dataset, s.batch_size) for s in drafted} == {("cnn_dailymail", b) for b in (1, 64, 128, 512)}
    assert {s.model.tp for s in extra} == {4} and {s.output_len for s in extra} == {8192}
