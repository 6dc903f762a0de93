"""The study's selection (workloads/sampling.py, selection = "study"): its order, filters, padding and
prompt settings, on the real `datasets` library."""

from __future__ import annotations

import json
import os
import random
import runpy
from pathlib import Path
from types import SimpleNamespace

import datasets
import pytest

from specperf.profiles.workloads import WORKLOADS, Prompting, Request, load, prompt_ids, render_prompt
from specperf.profiles.workloads.sampling import STUDY_DATASETS_VERSION


class TemplateTokenizer:
    """One token per word; the chat template adds two words and records its keyword arguments."""

    def __init__(self):
        self.template_kwargs = []

    def __call__(self, text):
        return {"input_ids": text.split()}

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False, **kwargs):
        self.template_kwargs.append(kwargs)
        return f"USER: {messages[0]['content']} ASSISTANT:"


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def gsm8k_records(count: int) -> list[dict]:
    return [{"id": f"g{i}", "question": f"question {i} with some words"} for i in range(count)]


def datasets_order(records: list[dict], seed: int) -> list[str]:
    """The order the `datasets` library itself gives a one-shard stream of these records."""
    stream = datasets.Dataset.from_list(records).to_iterable_dataset().shuffle(seed=seed, buffer_size=1000)
    return [row["id"] for row in stream]


def ids(sample) -> list[str]:
    return [r.id for r in sample.requests]


def test_the_order_is_datasets_streaming_shuffle_of_the_file(tmp_path):
    records = gsm8k_records(60)
    write_jsonl(tmp_path / "gsm8k.jsonl", records)
    sample = load("gsm8k", 10, 42, tmp_path, TemplateTokenizer(), selection="study")
    assert ids(sample) == datasets_order(records, 42)[:10]
    assert ids(sample) != [r["id"] for r in records[:10]]  # not the file's order
    assert ids(sample) != ids(load("gsm8k", 10, 42, tmp_path))  # nor the hash ranking
    assert ids(load("gsm8k", 10, 7, tmp_path, selection="study")) == datasets_order(records, 7)[:10]
    assert sample.selection.startswith(f"study: datasets {datasets.__version__} streaming shuffle, seed 42")
    warned = "the study's order came from datasets" in sample.selection
    assert warned == (datasets.__version__ != STUDY_DATASETS_VERSION)


def sharegpt(i: int, prompt_words: int, reply_words: int) -> dict:
    return {
        "id": f"s{i}",
        "prompt": " ".join(["p"] * prompt_words),
        "reference_completion": " ".join(["r"] * reply_words),
    }


def test_sharegpt_is_a_seeded_list_shuffle_then_the_studys_filter(tmp_path):
    # templated prompt = words + 2: 2 words pass (4 tokens), 1 does not; 1022 words pass the 1024 cap, 1023 not
    records = [
        sharegpt(0, 2, 4),
        sharegpt(1, 1, 10),
        sharegpt(2, 1023, 4),
        sharegpt(3, 10, 3),
        sharegpt(4, 1000, 1047),
        sharegpt(5, 1000, 1046),
        sharegpt(6, 1022, 4),
    ]
    records += [sharegpt(i, 5, 5) for i in range(7, 30)]
    write_jsonl(tmp_path / "sharegpt.jsonl", records)
    order = list(range(len(records)))
    random.seed(42)
    random.shuffle(order)  # what the study's ShareGPTDataset.load_data does
    valid = {0, 5, 6, *range(7, 30)}  # 1: prompt 3 tokens; 2: 1025; 3: reply 3; 4: total 2049
    expected = [f"s{i}" for i in order if i in valid]
    sample = load("sharegpt", len(valid), 42, tmp_path, TemplateTokenizer(), selection="study")
    assert ids(sample) == expected
    assert "filter prompt 4..1024 tokens, reference completion >= 4, prompt + completion <= 2048" in sample.selection


def conversation(i: int, *roles: str) -> dict:
    return {"id": f"c{i}", "conversations": [{"from": r, "value": f"{r} turn of {i} in words"} for r in roles]}


def test_sharegpt_conversations_are_read_as_the_study_reads_them(tmp_path):
    """ShareGPTDataset: entries of two turns or more are shuffled (shorter ones are gone before the
    shuffle, so they do not move the others), and turns 0 and 1 are prompt and completion whatever
    their roles; the hash selection keeps the first human turn and its reply."""
    records = [
        conversation(0, "gpt", "human", "gpt"),
        conversation(1, "human"),  # one turn: not in the study's list
        conversation(2, "human", "human"),  # no reply: the study still takes it
        *(conversation(i, "human", "gpt") for i in range(3, 20)),
    ]
    write_jsonl(tmp_path / "sharegpt.jsonl", records)
    kept = [r for r in records if len(r["conversations"]) >= 2]
    random.seed(42)
    random.shuffle(kept)  # what the study's load_data does to its filtered list
    sample = load("sharegpt", len(kept), 42, tmp_path, TemplateTokenizer(), selection="study")
    assert ids(sample) == [r["id"] for r in kept]
    first = {r.id: r for r in sample.requests}["c0"]
    assert (first.text, first.reference_completion) == ("gpt turn of 0 in words", "human turn of 0 in words")
    hashed = {r.id: r for r in load("sharegpt", 20, 42, tmp_path, TemplateTokenizer()).requests}
    assert hashed["c0"].text == "human turn of 0 in words" and "c2" not in hashed


def aime_records(count: int) -> list[dict]:
    return [
        {"id": f"a{i}", "problem": f"find x in problem {i}", "solution": "x is one two three"} for i in range(count)
    ]


def test_too_few_records_are_padded_with_seeded_copies_as_the_cells_vllm_pads(tmp_path):
    write_jsonl(tmp_path / "aime.jsonl", aime_records(3))
    sample = load("aime", 7, 42, tmp_path, TemplateTokenizer(), selection="study", vllm="0.10.1.1")
    first = [r for r in sample.requests[:3]]
    copies = random.Random(42).choices(first, k=4)  # benchmark_dataset.py (v0.10.1.1)
    assert ids(sample)[3:] == [f"{c.id}#copy{i + 1}" for i, c in enumerate(copies)]
    assert [r.text for r in sample.requests[3:]] == [c.text for c in copies]
    assert sample.selection.endswith("padded by random.choices")
    later = load("aime", 7, 42, tmp_path, TemplateTokenizer(), selection="study", vllm="0.11.1rc1")
    rng = random.Random(42)
    drawn = [rng.choice(first) for _ in range(4)]  # datasets_bench.py (v0.11.1rc1): one choice per copy
    assert ids(later)[3:] == [f"{c.id}#copy{i + 1}" for i, c in enumerate(drawn)]
    assert ids(later)[3:] != ids(sample)[3:]  # the two draw different copies from the same seed
    assert later.selection.endswith("padded by random.choice per copy")
    fork = load(
        "aime", 7, 42, tmp_path, TemplateTokenizer(), selection="study", vllm="SpecDecode-Bench/vllm perf/e2e-dm"
    )
    assert ids(fork) == ids(later)  # the fork's scripts import vllm.benchmarks.datasets_bench


def test_aime_filter_counts_the_solution_when_there_is_one(tmp_path):
    long_solution = " ".join(["s"] * 32000)
    records = [
        {"id": "short", "problem": "a b c d e", "solution": "s s"},  # solution < 4 tokens
        {"id": "long", "problem": "a b c d e", "solution": long_solution},  # total > 32000
        {"id": "none", "problem": "a b c d e"},  # no solution: prompt only
        {"id": "ok", "problem": "a b c d e", "solution": "s s s s"},
    ]
    write_jsonl(tmp_path / "aime.jsonl", records)
    assert sorted(ids(load("aime", 2, 42, tmp_path, TemplateTokenizer(), selection="study"))) == ["none", "ok"]


def test_chat_and_thinking_settings_reach_the_template(tmp_path):
    write_jsonl(tmp_path / "aime.jsonl", [{"id": "a0", "problem": "find x"}])
    tokenizer = TemplateTokenizer()
    raw = load("aime", 1, 42, tmp_path, tokenizer).requests[0]
    assert raw.chat is False  # AIME's prompt is the raw problem
    prompting = Prompting(chat=True, template_kwargs=(("enable_thinking", False),))
    templated = load("aime", 1, 42, tmp_path, tokenizer, prompting=prompting).requests[0]
    assert templated.chat is True and templated.template_kwargs == (("enable_thinking", False),)
    from specperf.profiles.workloads import render_prompt

    assert render_prompt(templated, tokenizer) == "USER: find x ASSISTANT:"
    assert tokenizer.template_kwargs[-1] == {"enable_thinking": False}


def test_the_hub_is_streamed_and_its_stream_shuffled(tmp_path, monkeypatch):
    rows = [{"question": f"hub question {i}", "answer": "42"} for i in range(50)]
    calls = []

    def load_dataset(path, **kwargs):
        calls.append((path, kwargs))
        return datasets.Dataset.from_list(rows).to_iterable_dataset()

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    sample = load("gsm8k", 5, 42, None, TemplateTokenizer(), selection="study")
    assert calls == [("openai/gsm8k", {"streaming": True, "split": "train", "name": "main"})]
    stream = datasets.Dataset.from_list(rows).to_iterable_dataset().shuffle(seed=42, buffer_size=1000)
    assert [r.text for r in sample.requests] == [row["question"] for row in stream][:5]
    assert sample.source == "hub:openai/gsm8k@unpinned"


class LlamaLikeTokenizer:
    """A Llama-3-like tokenizer: its chat template writes the BOS, and tokenising with special
    tokens (what vLLM does with a prompt string) adds another."""

    def __call__(self, text, add_special_tokens=True):
        return SimpleNamespace(input_ids=(["<bos>"] if add_special_tokens else []) + text.split())

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False, **kwargs):
        off = " <think-off>" if kwargs.get("enable_thinking") is False else ""
        return f"<bos> USER: {messages[0]['content']} ASSISTANT:{off}"


def test_the_study_form_tokenises_the_prompt_as_vllm_tokenises_a_string(tmp_path):
    write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_records(3))
    tok = LlamaLikeTokenizer()
    suite = load("gsm8k", 1, 42, tmp_path, selection="study").requests[0]
    study = load("gsm8k", 1, 42, tmp_path, selection="study", prompting=Prompting(study_form=True)).requests[0]
    assert prompt_ids(suite, tok)[:2] == ["<bos>", "USER:"]  # the template's BOS alone
    assert prompt_ids(study, tok)[:3] == ["<bos>", "<bos>", "USER:"]  # as the study's traces start: 128000, 128000
    raw = Request("r", "a raw problem", chat=False)
    assert prompt_ids(raw, tok) == ["<bos>", "a", "raw", "problem"]  # a raw prompt gets its BOS either way


def instructcoder_records(count: int) -> list[dict]:
    return [{"id": f"i{i}", "input": f"code {i}", "instruction": "Fix it.", "output": "done"} for i in range(count)]


def test_the_study_form_builds_each_prompt_as_the_cells_loader_did(tmp_path):
    write_jsonl(tmp_path / "instructcoder.jsonl", instructcoder_records(3))
    write_jsonl(tmp_path / "cnn_dailymail.jsonl", [{"id": f"c{i}", "article": f"article {i}"} for i in range(3)])
    study = Prompting(study_form=True)
    thinking = Prompting(template_kwargs=(("enable_thinking", True),), study_form=True)

    def text(vllm, prompting=study):
        sample = load("instructcoder", 1, 42, tmp_path, selection="study", prompting=prompting, vllm=vllm)
        return sample.requests[0].text

    continuation = " Just output " + " " * 12 + "the code"  # benchmark_dataset.py's backslash continuation
    assert continuation in text("0.10.1.1") and continuation in text("0.10.2")
    assert " Just output the code" in text("0.11.1rc1")  # datasets_bench.py joins two literals
    assert " Just output the code" in text("SpecDecode-Bench/vllm perf/e2e-dm")  # datasets_bench.py too
    assert " Just output the code" in text("0.10.1.1", Prompting())  # the suite's own form

    def cnn(vllm):
        sample = load("cnn_dailymail", 1, 42, tmp_path, selection="study", prompting=thinking, vllm=vllm)
        return sample, dict(sample.requests[0].template_kwargs)

    sample, kwargs = cnn("0.10.1.1")
    assert kwargs == {"enable_thinking": False}  # CNNDailyMailDataset.sample passes it whatever the model's
    assert "<think-off>" in render_prompt(sample.requests[0], LlamaLikeTokenizer())
    assert sample.selection.endswith("; prompt strings as benchmark_dataset.py of 0.10.1.1 builds them")
    sample, kwargs = cnn("0.11.1rc1")
    assert kwargs == {"enable_thinking": True}  # datasets_bench.py leaves the template's switch alone
    assert sample.selection.endswith("; prompt strings as datasets_bench.py of 0.11.1rc1 builds them")


RECORDED_ORDER = Path(__file__).resolve().parents[1] / "fixtures" / "study-order-datasets-4.0.0.json"
STUDY_ORDER_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "study_order.py"


def test_the_study_order_of_the_offline_samples_is_the_one_datasets_4_0_0_gave():
    """scripts/study_order.py recorded, under the study's pins (constraints/study.txt), the order the
    study's loader reads each offline sample in; specperf's selection takes them in that order, and
    so does the study's own call with the `datasets` installed here."""
    from specperf import paths
    from specperf.profiles.workloads.sampling import study_rows
    from specperf.profiles.workloads.sources import read_jsonl

    folder = paths.dataset_dir()
    if folder is None or not folder.is_dir():
        if os.environ.get("CI"):
            pytest.fail("the offline samples are needed: set SPECPERF_DATASET_DIR")
        pytest.skip("offline dataset folder not found")
    recorded = json.loads(RECORDED_ORDER.read_text())
    assert recorded["datasets"] == STUDY_DATASETS_VERSION
    files = {"cnn_dailymail.jsonl": "cnn_dailymail", "gsm8k.jsonl": "gsm8k"}
    files |= {"instructcoder_editeval.jsonl": "instructcoder", "aime24.jsonl": "aime"}
    for filename, name in files.items():
        workload = WORKLOADS[name]
        table, _ = read_jsonl(workload, folder / filename, workload.parser(True))
        assert [rid for rid, _ in study_rows(workload, table, recorded["seed"])] == recorded["orders"][filename]
        if name != "aime":  # the selection itself (AIME's filter needs the target's tokenizer)
            ids = [r.id for r in load(name, 10, recorded["seed"], folder, selection="study").requests]
            assert ids == recorded["orders"][filename][:10], filename
    study_order = runpy.run_path(str(STUDY_ORDER_SCRIPT))["orders"](folder)
    assert study_order == recorded["orders"], f"datasets {datasets.__version__} reads the samples in another order"
