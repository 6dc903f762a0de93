"""The study's prompt templates, one parser per dataset record format, and prompt rendering.

A parser turns one record (a JSONL line or a hub row) into an :class:`Item`: the prompt text, an
id where the record has one, and the reference completion where there is one. It raises
:class:`FieldError` for a record that lacks a field; the caller adds the file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# --------------------------------------------------------------------------
# The study's prompt templates (DESIGN.md, "Facts from the study").
# --------------------------------------------------------------------------

CNN_PREFIX = "Could you summarize the following article, please reuse text from the article if possible: "
INSTRUCTCODER_SUFFIX = " Just output the code, do not include any explanation."
# The v0.10.1.1 branch writes that sentence with a backslash line continuation inside the string
# (benchmarks/benchmark_dataset.py, InstructCoderDataset.sample, 13e70936): the next line's
# 12-space indent becomes part of the prompt.  The v0.11.1rc1 branch (datasets_bench.py) joins
# two literals and has a single space.
INSTRUCTCODER_SUFFIX_0_10 = " Just output " + " " * 12 + "the code, do not include any explanation."
GPQA_TEMPLATE = (
    "What is the correct answer to this question: {question}\n"
    "Choices:\n"
    "(A) {correct}\n"
    "(B) {incorrect1}\n"
    "(C) {incorrect2}\n"
    "(D) {incorrect3}\n"
    "\n"
    'Format your response as follows: "The correct answer is (insert answer here)".'
)


def cnn_prompt(article: str) -> str:
    return CNN_PREFIX + article


def instructcoder_prompt(input: str, instruction: str, suffix: str = INSTRUCTCODER_SUFFIX) -> str:
    return f"{input}\n\n{instruction}{suffix}"


def gpqa_prompt(question: str, correct: str, incorrect1: str, incorrect2: str, incorrect3: str) -> str:
    """GPQA's template with the correct answer at (A), as the study places it."""
    return GPQA_TEMPLATE.format(
        question=question,
        correct=correct,
        incorrect1=incorrect1,
        incorrect2=incorrect2,
        incorrect3=incorrect3,
    )


# --------------------------------------------------------------------------
# Record parsing: one function per record format, shared by files and the hub.
# --------------------------------------------------------------------------


class FieldError(Exception):
    """A record lacks a field or has one of the wrong type (no location yet)."""


@dataclass(frozen=True)
class Item:
    id: str | None
    text: str
    reference: str | None


def describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _str_field(rec: Mapping[str, Any], *names: str) -> str:
    """The first of ``names`` present in ``rec``; it must be a string."""
    for name in names:
        if name in rec:
            value = rec[name]
            if not isinstance(value, str):
                raise FieldError(f"field {name!r} must be a string, got {describe(value)}")
            return value
    alternatives = " or ".join(repr(n) for n in names)
    raise FieldError(f"missing field {alternatives}")


def _opt_str_field(rec: Mapping[str, Any], name: str) -> str | None:
    value = rec.get(name)
    return value if isinstance(value, str) else None


def id_field(rec: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        if name in rec:
            value = rec[name]
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise FieldError(f"field {name!r} must be a string or an integer, got {describe(value)}")
            return str(value)
    return None


def parse_cnn(rec: Mapping[str, Any]) -> Item:
    return Item(id_field(rec, "id"), cnn_prompt(_str_field(rec, "article")), _opt_str_field(rec, "highlights"))


_HUMAN_ROLES = frozenset({"human", "user"})


def parse_sharegpt(rec: Mapping[str, Any]) -> Item | None:
    """First human turn and the reply to it; None for a conversation without one."""
    rid = id_field(rec, "id")
    if "prompt" in rec:
        prompt = _str_field(rec, "prompt")
        reference = _str_field(rec, "reference_completion")
        return Item(rid, prompt, reference)
    if "conversations" not in rec:
        raise FieldError("missing field 'prompt' (or 'conversations')")
    turns = rec["conversations"]
    if not isinstance(turns, list):
        raise FieldError(f"field 'conversations' must be a list, got {describe(turns)}")
    for pos, turn in enumerate(turns):
        if not isinstance(turn, Mapping):
            raise FieldError(f"conversations[{pos}] must be an object, got {describe(turn)}")
        if turn.get("from") in _HUMAN_ROLES:
            if pos + 1 >= len(turns):
                return None
            reply = turns[pos + 1]
            if not isinstance(reply, Mapping) or reply.get("from") in _HUMAN_ROLES:
                return None
            prompt, answer = turn.get("value"), reply.get("value")
            if not isinstance(prompt, str) or not isinstance(answer, str):
                return None
            return Item(rid, prompt, answer)
    return None


def parse_sharegpt_study(rec: Mapping[str, Any]) -> Item | None:
    """ShareGPT as the study reads it (ShareGPTDataset.load_data and sample): a conversation of at
    least two turns gives its first turn as the prompt and its second as the completion, whatever
    their roles; None for a shorter one, which the study drops before it shuffles."""
    if "prompt" in rec:  # the offline samples' form: a prompt and its reply, two turns
        return parse_sharegpt(rec)
    if "conversations" not in rec:
        return None
    turns = rec["conversations"]
    if not isinstance(turns, list):
        raise FieldError(f"field 'conversations' must be a list, got {describe(turns)}")
    if len(turns) < 2:
        return None
    prompt, completion = turns[0], turns[1]
    for pos, turn in enumerate((prompt, completion)):
        if not isinstance(turn, Mapping) or not isinstance(turn.get("value"), str):
            raise FieldError(f"conversations[{pos}] must be an object with a string 'value'")
    return Item(id_field(rec, "id"), prompt["value"], completion["value"])


def parse_instructcoder(rec: Mapping[str, Any], suffix: str = INSTRUCTCODER_SUFFIX) -> Item:
    instruction = _str_field(rec, "instruction")
    code = _str_field(rec, "input")
    return Item(id_field(rec, "id"), instructcoder_prompt(code, instruction, suffix), _opt_str_field(rec, "output"))


def parse_instructcoder_0_10(rec: Mapping[str, Any]) -> Item:
    """InstructCoder as the study's v0.10.1.1 loader writes it (the 12-space continuation)."""
    return parse_instructcoder(rec, INSTRUCTCODER_SUFFIX_0_10)


def parse_gsm8k(rec: Mapping[str, Any]) -> Item:
    return Item(id_field(rec, "id"), _str_field(rec, "question"), _opt_str_field(rec, "answer"))


def parse_aime(rec: Mapping[str, Any]) -> Item:
    return Item(id_field(rec, "id"), _str_field(rec, "problem"), _opt_str_field(rec, "solution"))


def parse_gpqa(rec: Mapping[str, Any]) -> Item:
    text = gpqa_prompt(
        _str_field(rec, "question", "Question"),
        _str_field(rec, "correct_answer", "Correct Answer"),
        _str_field(rec, "incorrect_answer_1", "Incorrect Answer 1"),
        _str_field(rec, "incorrect_answer_2", "Incorrect Answer 2"),
        _str_field(rec, "incorrect_answer_3", "Incorrect Answer 3"),
    )
    return Item(id_field(rec, "id", "Record ID"), text, None)


# --------------------------------------------------------------------------
# Requests and what the engine is given.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One prompt of a workload."""

    id: str
    text: str
    chat: bool
    reference_completion: str | None = None
    template_kwargs: tuple[tuple[str, Any], ...] = ()  # extra chat-template arguments (enable_thinking)
    string_prompt: bool = False  # the study's form: tokenised as vLLM tokenises a prompt string


def render_prompt(request: Request, tokenizer: Any) -> str:
    """The exact prompt string given to the engine.

    Chat requests go through the tokenizer's chat template as one user message
    with ``add_generation_prompt=True`` (and the request's template arguments); raw requests
    (AIME) are returned as they are.
    """
    if not request.chat:
        return request.text
    if tokenizer is None or not hasattr(tokenizer, "apply_chat_template"):
        raise ValueError(f"request {request.id!r} needs the target tokenizer's chat template (apply_chat_template)")
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": request.text}],
        tokenize=False,
        add_generation_prompt=True,
        **dict(request.template_kwargs),
    )
    if not isinstance(prompt, str):
        raise TypeError(f"apply_chat_template(tokenize=False) returned {type(prompt).__name__}, expected str")
    return prompt


def prompt_ids(request: Request, tokenizer: Any) -> list[int]:
    """The token ids the engine is given for ``request``.

    The suite's form tokenises the rendered prompt once: a chat template's text already holds the
    BOS, so no special tokens are added to it.  The study's form (``string_prompt``) reproduces
    what vLLM does with the prompt string the study passed: it tokenises it with special tokens,
    which puts a second BOS after a Llama-3 template's (every prompt of the study's released
    traces starts 128000, 128000)."""
    text = render_prompt(request, tokenizer)
    return list(tokenizer(text, add_special_tokens=request.string_prompt or not request.chat).input_ids)


def overlap_bleu4(prompt: str, output: str) -> float:
    """Prompt/output overlap: sentence BLEU-4 of ``output`` against ``prompt`` as reference.

    Computed with sacrebleu (default 13a tokenisation, exponential smoothing,
    brevity penalty included) and returned on a 0..1 scale (sacrebleu's score / 100).
    Empty text on either side gives 0.0.
    """
    if not prompt.strip() or not output.strip():
        return 0.0
    import sacrebleu  # imported here so that the loaders do not need it

    score = sacrebleu.sentence_bleu(output, [prompt]).score / 100.0
    return min(1.0, max(0.0, score))
