"""Unit tests for specperf.profiles.workloads (no network, no vLLM, no real GPQA items)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import types
from pathlib import Path

import pytest

from specperf import paths
from specperf.profiles import workloads as wl
from specperf.profiles.workloads import (
    WORKLOADS,
    Request,
    WorkloadError,
    WorkloadUnavailable,
    load,
    overlap_bleu4,
    render_prompt,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


class _Encoded:
    def __init__(self, ids):
        self.input_ids = ids


class WordTokenizer:
    """Tokenizer-like stub: one token per whitespace-separated word."""

    def __init__(self):
        self.chat_calls = []

    def __call__(self, text):
        return _Encoded(text.split())

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False):
        self.chat_calls.append((messages, tokenize, add_generation_prompt))
        body = "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in messages)
        return body + ("<|assistant|>" if add_generation_prompt else "")


class EncodeOnlyTokenizer:
    def encode(self, text):
        return text.split()


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def words(k: int) -> str:
    return " ".join(["w"] * k)


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    """Block the hub fallback by default: `import datasets` raises ImportError."""
    monkeypatch.setitem(sys.modules, "datasets", None)


class FakeDataset:
    """Enough of datasets.Dataset for the hub path."""

    def __init__(self, rows, fingerprint="fp123", cache_dir="/cache/x___y/main/0.0.0/" + "a" * 40):
        self._rows = rows
        self.column_names = sorted({k for r in rows for k in r})
        self._fingerprint = fingerprint
        self.cache_files = [{"filename": f"{cache_dir}/y-train.arrow"}]

    def __len__(self):
        return len(self._rows)

    def __getitem__(self, key):
        if isinstance(key, str):
            return [r[key] for r in self._rows]
        return dict(self._rows[key])


@pytest.fixture
def fake_hub(monkeypatch):
    """Install a fake `datasets` module; returns the list of load_dataset calls and the rows to serve."""
    state = {"calls": [], "rows": [], "error": None}

    def load_dataset(path, **kwargs):
        state["calls"].append((path, kwargs))
        if state["error"] is not None:
            raise state["error"]
        return FakeDataset(state["rows"])

    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", module)
    return state


# --------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------


def test_workload_keys():
    assert list(WORKLOADS) == ["cnn_dailymail", "sharegpt", "instructcoder", "gsm8k", "aime", "gpqa"]
    assert all(WORKLOADS[k].name == k for k in WORKLOADS)
    assert [k for k, w in WORKLOADS.items() if not w.chat] == ["aime"]


def test_unknown_workload_and_bad_n(tmp_path):
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        load("nope", 1, 42, tmp_path)
    with pytest.raises(ValueError, match="non-negative"):
        load("gsm8k", -1, 42, tmp_path)


# --------------------------------------------------------------------------
# templates, pinned against hand-written strings
# --------------------------------------------------------------------------


def test_cnn_template(tmp_path):
    path = write_jsonl(
        tmp_path / "cnn_dailymail.jsonl", [{"id": "c1", "article": "Cats sleep a lot.", "highlights": "Cats sleep."}]
    )
    sample = load("cnn_dailymail", 1, 42, tmp_path)
    (req,) = sample.requests
    assert req == Request(
        id="c1",
        text=(
            "Could you summarize the following article, please reuse text from the article if possible: "
            "Cats sleep a lot."
        ),
        chat=True,
        reference_completion="Cats sleep.",
    )
    assert sample.workload == "cnn_dailymail"
    assert sample.source == f"dir:{path}"
    assert sample.checksum == hashlib.sha256(path.read_bytes()).hexdigest()
    assert sample.stand_in is None


def test_sharegpt_template(tmp_path):
    write_jsonl(
        tmp_path / "sharegpt.jsonl",
        [
            {
                "id": "s_0",
                "prompt": "Tell me a joke about cats.",
                "reference_completion": "Why did the cat sit on the computer?",
            }
        ],
    )
    (req,) = load("sharegpt", 1, 42, tmp_path, WordTokenizer()).requests
    assert req == Request("s_0", "Tell me a joke about cats.", True, "Why did the cat sit on the computer?")


def test_instructcoder_template(tmp_path):
    write_jsonl(
        tmp_path / "instructcoder.jsonl",
        [{"id": "i1", "instruction": "Rename x to y.", "input": "x = 1\nprint(x)", "output": "y = 1\nprint(y)"}],
    )
    sample = load("instructcoder", 1, 42, tmp_path)
    (req,) = sample.requests
    assert req.text == "x = 1\nprint(x)\n\nRename x to y. Just output the code, do not include any explanation."
    assert req.chat is True
    assert req.reference_completion == "y = 1\nprint(y)"
    assert sample.stand_in is None


def test_gsm8k_template(tmp_path):
    write_jsonl(tmp_path / "gsm8k.jsonl", [{"id": "g1", "question": "Tom has 3 apples and eats 1. How many are left?"}])
    (req,) = load("gsm8k", 1, 42, tmp_path).requests
    assert req == Request("g1", "Tom has 3 apples and eats 1. How many are left?", True, None)


def test_aime_is_raw_prompt(tmp_path):
    write_jsonl(tmp_path / "aime.jsonl", [{"id": 7, "problem": "Find $x$ if $x+1=2$.", "solution": "$x=1$"}])
    sample = load("aime", 1, 42, tmp_path)
    (req,) = sample.requests
    assert req == Request("7", "Find $x$ if $x+1=2$.", False, "$x=1$")
    assert sample.stand_in is None


GPQA_EXPECTED = (
    "What is the correct answer to this question: What colour is a clear daytime sky?\n"
    "Choices:\n"
    "(A) Blue\n"
    "(B) Green\n"
    "(C) Red\n"
    "(D) Purple\n"
    "\n"
    'Format your response as follows: "The correct answer is (insert answer here)".'
)


def test_gpqa_template_snake_case_fields(tmp_path):
    write_jsonl(
        tmp_path / "gpqa.jsonl",
        [
            {
                "id": "q1",
                "question": "What colour is a clear daytime sky?",
                "correct_answer": "Blue",
                "incorrect_answer_1": "Green",
                "incorrect_answer_2": "Red",
                "incorrect_answer_3": "Purple",
            }
        ],
    )
    sample = load("gpqa", 1, 42, tmp_path)
    assert sample.requests == (Request("q1", GPQA_EXPECTED, True, None),)
    assert sample.stand_in is None
    assert sample.source.startswith("dir:")


def test_gpqa_template_hub_column_names(tmp_path):
    write_jsonl(
        tmp_path / "gpqa.jsonl",
        [
            {
                "Record ID": "rec1",
                "Question": "What colour is a clear daytime sky?",
                "Correct Answer": "Blue",
                "Incorrect Answer 1": "Green",
                "Incorrect Answer 2": "Red",
                "Incorrect Answer 3": "Purple",
            }
        ],
    )
    assert load("gpqa", 1, 42, tmp_path).requests == (Request("rec1", GPQA_EXPECTED, True, None),)


def test_records_without_id_get_line_ids(tmp_path):
    write_jsonl(tmp_path / "gsm8k.jsonl", [{"question": "a?"}, {"question": "b?"}])
    ids = sorted(r.id for r in load("gsm8k", 5, 42, tmp_path).requests)
    assert ids == ["gsm8k:1", "gsm8k:2"]


# --------------------------------------------------------------------------
# stand-ins
# --------------------------------------------------------------------------


def test_instructcoder_editeval_is_labelled(tmp_path):
    write_jsonl(
        tmp_path / "instructcoder_editeval.jsonl", [{"id": "EditEval/0", "instruction": "Fix it.", "input": "x=1"}]
    )
    sample = load("instructcoder", 1, 42, tmp_path)
    assert sample.stand_in == "EditEval stands in for InstructCoder"
    assert sample.source.endswith("instructcoder_editeval.jsonl")
    assert sample.requests[0].text == "x=1\n\nFix it. Just output the code, do not include any explanation."


def test_real_file_wins_over_stand_in(tmp_path):
    write_jsonl(tmp_path / "instructcoder_editeval.jsonl", [{"id": "e", "instruction": "a", "input": "b"}])
    write_jsonl(tmp_path / "instructcoder.jsonl", [{"id": "r", "instruction": "a", "input": "b"}])
    sample = load("instructcoder", 1, 42, tmp_path)
    assert sample.stand_in is None
    assert [r.id for r in sample.requests] == ["r"]


def test_aime24_is_labelled(tmp_path):
    write_jsonl(tmp_path / "aime24.jsonl", [{"id": "aime24-1", "problem": "Compute 1+1."}])
    sample = load("aime", 1, 42, tmp_path)
    assert sample.stand_in == "AIME 2024 stands in for AIME 2022-24"
    assert sample.requests[0].chat is False


def test_gpqa_synthetic_stand_in(tmp_path):
    sample = load("gpqa", 100, 42, tmp_path)
    assert sample.source == "synthetic"
    assert sample.stand_in == "synthetic four-choice questions stand in for GPQA-Main"
    assert len(sample.requests) == 20
    assert len({r.id for r in sample.requests}) == 20
    assert all(r.id.startswith("synthetic-gpqa-") for r in sample.requests)
    for req in sample.requests:
        assert req.chat is True
        assert req.text.startswith("What is the correct answer to this question: ")
        assert req.text.endswith('\n\nFormat your response as follows: "The correct answer is (insert answer here)".')
    again = load("gpqa", 100, 42, None)
    assert again.checksum == sample.checksum
    assert again.requests == sample.requests


def test_synthetic_gpqa_items_are_well_formed():
    records = wl.synthetic_gpqa_records()
    assert len(records) == 20
    first = next(r for r in records if r["id"] == "synthetic-gpqa-distance-1")
    assert first == {
        "id": "synthetic-gpqa-distance-1",
        "question": "A cart moves in a straight line at a constant 3 m/s for 4 s. How far does it travel?",
        "correct_answer": "12 m",
        "incorrect_answer_1": "7 m",
        "incorrect_answer_2": "0.75 m",
        "incorrect_answer_3": "24 m",
    }
    for r in records:
        choices = [r["correct_answer"], r["incorrect_answer_1"], r["incorrect_answer_2"], r["incorrect_answer_3"]]
        assert len(set(choices)) == 4, r


# --------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------


def _gsm8k_file(tmp_path: Path, count: int = 40, order_seed: int | None = None) -> Path:
    records = [{"id": f"g{i}", "question": f"What is {i} + {i}?"} for i in range(count)]
    if order_seed is not None:
        random.Random(order_seed).shuffle(records)
    return write_jsonl(tmp_path / "gsm8k.jsonl", records)


def _ids(sample):
    return [r.id for r in sample.requests]


def test_same_seed_same_ids_different_seed_different_ids(tmp_path):
    _gsm8k_file(tmp_path)
    a = _ids(load("gsm8k", 10, 42, tmp_path))
    b = _ids(load("gsm8k", 10, 42, tmp_path))
    c = _ids(load("gsm8k", 10, 43, tmp_path))
    assert a == b
    assert len(set(a)) == 10
    assert set(a) != set(c)


def test_sampling_is_pinned(tmp_path):
    # The draw is part of every stored baseline: changing it must be deliberate.
    _gsm8k_file(tmp_path)
    assert _ids(load("gsm8k", 5, 42, tmp_path)) == PINNED_SEED42_IDS


PINNED_SEED42_IDS = ["g15", "g9", "g37", "g10", "g6"]  # lowest sha256(f"42:{id}")


def test_sampling_independent_of_file_order_and_unrelated_records(tmp_path):
    _gsm8k_file(tmp_path)
    base = _ids(load("gsm8k", 10, 42, tmp_path))
    _gsm8k_file(tmp_path, order_seed=1)
    assert _ids(load("gsm8k", 10, 42, tmp_path)) == base
    # Removing records that were not picked leaves the pick unchanged.
    write_jsonl(tmp_path / "gsm8k.jsonl", [{"id": i, "question": "q"} for i in reversed(base)])
    assert _ids(load("gsm8k", 10, 42, tmp_path)) == base


def test_smaller_sample_is_prefix_and_n_beyond_available_takes_all(tmp_path):
    _gsm8k_file(tmp_path, count=12)
    ten = _ids(load("gsm8k", 10, 42, tmp_path))
    assert _ids(load("gsm8k", 4, 42, tmp_path)) == ten[:4]
    everything = load("gsm8k", 1000, 42, tmp_path)
    assert sorted(_ids(everything)) == sorted(f"g{i}" for i in range(12))
    assert load("gsm8k", 0, 42, tmp_path).requests == ()


# --------------------------------------------------------------------------
# ShareGPT filter
# --------------------------------------------------------------------------


def _sharegpt_filter_records():
    return [
        {"id": "p3", "prompt": words(3), "reference_completion": "ok"},  # too short
        {"id": "p4", "prompt": words(4), "reference_completion": "ok"},  # lower bound kept
        {"id": "p1024", "prompt": words(1024), "reference_completion": "ok"},  # upper bound kept
        {"id": "p1025", "prompt": words(1025), "reference_completion": "ok"},  # too long
        {"id": "sum2048", "prompt": words(1000), "reference_completion": words(1048)},  # total 2048 kept
        {"id": "sum2049", "prompt": words(1000), "reference_completion": words(1049)},  # total too long
    ]


@pytest.mark.parametrize("tokenizer", [WordTokenizer(), EncodeOnlyTokenizer()], ids=["call", "encode"])
def test_sharegpt_filter(tmp_path, tokenizer):
    write_jsonl(tmp_path / "sharegpt.jsonl", _sharegpt_filter_records())
    sample = load("sharegpt", 100, 42, tmp_path, tokenizer)
    assert sorted(_ids(sample)) == ["p1024", "p4", "sum2048"]


def test_sharegpt_filter_counts_with_the_given_tokenizer(tmp_path):
    class CharTokenizer:
        def __call__(self, text):
            return {"input_ids": list(text)}

    write_jsonl(tmp_path / "sharegpt.jsonl", [{"id": "a", "prompt": "hi you", "reference_completion": "x"}])
    assert _ids(load("sharegpt", 5, 42, tmp_path, CharTokenizer())) == ["a"]  # 6 characters
    assert _ids(load("sharegpt", 5, 42, tmp_path, WordTokenizer())) == []  # 2 words


def test_sharegpt_needs_tokenizer(tmp_path):
    write_jsonl(tmp_path / "sharegpt.jsonl", _sharegpt_filter_records())
    with pytest.raises(ValueError, match="needs the target tokenizer"):
        load("sharegpt", 1, 42, tmp_path)


def test_sharegpt_conversations_format(tmp_path):
    write_jsonl(
        tmp_path / "sharegpt.jsonl",
        [
            {
                "id": "a",
                "conversations": [
                    {"from": "gpt", "value": "Hello there, how can I help?"},
                    {"from": "human", "value": "Explain gravity in simple words."},
                    {"from": "gpt", "value": "Things fall down."},
                ],
            },
            {"id": "b", "conversations": [{"from": "human", "value": "No reply to this one at all."}]},
            {"id": "c", "conversations": []},
        ],
    )
    sample = load("sharegpt", 5, 42, tmp_path, WordTokenizer())
    assert sample.requests == (Request("a", "Explain gravity in simple words.", True, "Things fall down."),)


# --------------------------------------------------------------------------
# missing and malformed sources
# --------------------------------------------------------------------------


def test_missing_source_message(tmp_path):
    with pytest.raises(WorkloadUnavailable) as info:
        load("gsm8k", 1, 42, tmp_path)
    msg = str(info.value)
    assert "\n" not in msg
    assert "gsm8k.jsonl" in msg
    assert str(tmp_path) in msg
    assert "openai/gsm8k (config main, split train)" in msg
    assert "datasets" in msg  # the reason the hub failed


def test_missing_source_names_real_and_stand_in_files(tmp_path):
    with pytest.raises(
        WorkloadUnavailable, match=r"instructcoder\.jsonl or instructcoder_editeval\.jsonl.*likaixin/InstructCoder"
    ):
        load("instructcoder", 1, 42, None)
    with pytest.raises(WorkloadUnavailable, match=r"no such directory"):
        load("aime", 1, 42, tmp_path / "absent")


@pytest.mark.parametrize(
    ("lines", "bad_line", "problem"),
    [
        (['{"id": "a", "article": "x"}', '{"id": "b", "article": "y"}', '{"id": "c", "article": '], 3, "invalid JSON"),
        (['{"id": "a", "article": "x"}', '{"id": "b", "text": "y"}'], 2, "missing field 'article'"),
        (['{"id": "a", "article": null}'], 1, "field 'article' must be a string, got null"),
        (['{"id": "a", "article": "x"}', "", '{"id": "a", "article": "y"}'], 3, "duplicate id 'a' (first on line 1)"),
        (['["a", "b"]'], 1, "expected a JSON object, got list"),
    ],
    ids=["bad-json", "missing-field", "wrong-type", "duplicate-id", "not-an-object"],
)
def test_malformed_file_names_file_and_line(tmp_path, lines, bad_line, problem):
    path = tmp_path / "cnn_dailymail.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(WorkloadError) as info:
        load("cnn_dailymail", 1, 42, tmp_path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:{bad_line}: ")
    assert problem in msg
    assert "\n" not in msg


def test_empty_file_is_an_error(tmp_path):
    (tmp_path / "gsm8k.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match="no records"):
        load("gsm8k", 1, 42, tmp_path)


# --------------------------------------------------------------------------
# hub fallback (fake `datasets` module, no network)
# --------------------------------------------------------------------------


def test_hub_fallback_gsm8k(tmp_path, fake_hub):
    fake_hub["rows"] = [{"question": f"q{i}?", "answer": f"a{i}"} for i in range(6)]
    sample = load("gsm8k", 3, 42, tmp_path)
    assert fake_hub["calls"] == [("openai/gsm8k", {"name": "main", "split": "train"})]
    assert sample.source == "hub:openai/gsm8k@" + "a" * 40
    assert sample.checksum == "fingerprint:fp123"
    assert sample.stand_in is None
    assert len(sample.requests) == 3
    for req in sample.requests:
        row = int(req.id.removeprefix("gsm8k-train-"))
        assert req.text == f"q{row}?" and req.reference_completion == f"a{row}"


def test_hub_fallback_sharegpt_and_gpqa_columns(fake_hub):
    fake_hub["rows"] = [
        {
            "id": "x_0",
            "conversations": [
                {"from": "human", "value": "Please explain tides to me."},
                {"from": "gpt", "value": "The moon pulls water."},
            ],
        }
    ]
    sample = load("sharegpt", 2, 42, None, WordTokenizer())
    path, kwargs = fake_hub["calls"][-1]
    assert path == "anon8231489123/ShareGPT_Vicuna_unfiltered"
    assert kwargs == {"split": "train", "data_files": "ShareGPT_V3_unfiltered_cleaned_split.json"}
    assert sample.requests == (Request("x_0", "Please explain tides to me.", True, "The moon pulls water."),)

    fake_hub["rows"] = [
        {
            "Record ID": "rec1",
            "Question": "What colour is a clear daytime sky?",
            "Correct Answer": "Blue",
            "Incorrect Answer 1": "Green",
            "Incorrect Answer 2": "Red",
            "Incorrect Answer 3": "Purple",
        }
    ]
    sample = load("gpqa", 1, 42, None)
    assert fake_hub["calls"][-1] == ("Idavidrein/gpqa", {"name": "gpqa_main", "split": "train"})
    assert sample.requests == (Request("rec1", GPQA_EXPECTED, True, None),)
    assert sample.stand_in is None


def test_hub_failure_reason_and_gpqa_synthetic(tmp_path, fake_hub):
    fake_hub["error"] = ConnectionError("offline\nmode")
    with pytest.raises(WorkloadUnavailable, match=r"hub: ConnectionError: offline mode$"):
        load("cnn_dailymail", 1, 42, tmp_path)
    assert fake_hub["calls"][-1] == ("abisee/cnn_dailymail", {"name": "3.0.0", "split": "train"})
    sample = load("gpqa", 2, 42, tmp_path)
    assert sample.source == "synthetic"
    assert len(sample.requests) == 2


# --------------------------------------------------------------------------
# render_prompt and overlap_bleu4
# --------------------------------------------------------------------------


def test_render_prompt_chat_and_raw():
    tok = WordTokenizer()
    chat = Request("c", "Hello model.", True)
    assert render_prompt(chat, tok) == "<|user|>Hello model.<|end|><|assistant|>"
    assert tok.chat_calls == [([{"role": "user", "content": "Hello model."}], False, True)]
    raw = Request("r", "Solve $x^2=4$.", False)
    assert render_prompt(raw, tok) == "Solve $x^2=4$."
    assert render_prompt(raw, None) == "Solve $x^2=4$."
    assert len(tok.chat_calls) == 1
    with pytest.raises(ValueError, match="chat template"):
        render_prompt(chat, None)


def test_overlap_bleu4():
    text = "def add(a, b):\n    return a + b\n\nprint(add(1, 2)) # prints three"
    assert overlap_bleu4(text, text) > 0.99
    assert overlap_bleu4("the quick brown fox jumps over the lazy dog", "alpha beta gamma delta epsilon zeta") < 0.01
    partial = overlap_bleu4("the cat sat on the mat near the door today", "the cat sat on the mat near a window")
    assert 0.05 < partial < 0.95
    assert overlap_bleu4("", "anything") == 0.0
    assert overlap_bleu4("anything", "   ") == 0.0


# --------------------------------------------------------------------------
# the project's offline samples (read in place, never copied)
# --------------------------------------------------------------------------


SHARED = paths.dataset_dir()
# Named but missing is a broken set-up (.ci/run names it): fail, never skip silently.
NAMED_BUT_MISSING = os.environ.get(paths.DATASET_DIR_VARIABLE) and not SHARED.is_dir()
if SHARED is not None and not SHARED.is_dir():
    SHARED = None


def test_the_named_dataset_folder_exists():
    assert not NAMED_BUT_MISSING, f"SPECPERF_DATASET_DIR={os.environ.get('SPECPERF_DATASET_DIR')} is not a folder"


OFFLINE = {
    # workload: (expected file, stand-in label, text prefix or None)
    "cnn_dailymail": (
        "cnn_dailymail.jsonl",
        "Spec-Bench's CNN/DailyMail items stand in for the 3.0.0 train split",
        "Could you summarize the following article, please reuse text from the article if possible: ",
    ),
    "sharegpt": ("sharegpt.jsonl", None, None),
    "instructcoder": ("instructcoder_editeval.jsonl", "EditEval stands in for InstructCoder", None),
    "gsm8k": ("gsm8k.jsonl", "the GSM8K test split stands in for the main train split", None),
    "aime": ("aime24.jsonl", "AIME 2024 stands in for AIME 2022-24", None),
}


@pytest.mark.skipif(
    SHARED is None, reason="offline dataset folder not found (set SPECPERF_DATASET_DIR or provide ../shared/datasets)"
)
@pytest.mark.parametrize("name", list(OFFLINE))
def test_real_offline_samples(name):
    filename, stand_in, prefix = OFFLINE[name]
    if not (SHARED / filename).is_file():
        if os.environ.get("SPECPERF_DATASET_DIR"):
            pytest.fail(f"{filename} not in SPECPERF_DATASET_DIR={SHARED}")
        pytest.skip(f"{filename} not in {SHARED}")
    tok = WordTokenizer()
    sample = load(name, 8, 42, SHARED, tok)
    assert sample.source == f"dir:{SHARED / filename}"
    assert sample.checksum == hashlib.sha256((SHARED / filename).read_bytes()).hexdigest()
    assert sample.stand_in == stand_in
    assert len(sample.requests) == 8
    assert len({r.id for r in sample.requests}) == 8
    assert _ids(load(name, 8, 42, SHARED, tok)) == _ids(sample)
    for req in sample.requests:
        assert req.text.strip()
        assert req.chat is (name != "aime")
        if prefix:
            assert req.text.startswith(prefix)
        if name == "instructcoder":
            assert req.text.endswith(" Just output the code, do not include any explanation.")
        if name == "sharegpt":
            n_prompt = len(req.text.split())
            assert 4 <= n_prompt <= 1024
            assert n_prompt + len((req.reference_completion or "").split()) <= 2048
    everything = load(name, 10_000, 42, SHARED, tok)
    assert 8 <= len(everything.requests) < 10_000
