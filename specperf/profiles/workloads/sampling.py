"""Drawing a workload sample from its records: put them in order, take the first ``n`` that pass
(loading.py finds the records).

Two orders (a profile's ``selection``): "hash" ranks records by sha256(seed:id), independent of the
file's order and nested in n; "study" reproduces the study's scripts (SpecDecode-Bench/vllm,
scripts/common.py get_dataset with vLLM's benchmark dataset classes): a ``datasets`` streaming
shuffle with the seed (buffer 1000) over the records, ShareGPT a seeded ``random.shuffle`` of its
conversations of two turns or more, then the study's length filters, and too few records padded
with seeded copies the way the cell's vLLM branch draws them (:func:`study_padding`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .catalog import LOADER_0_10, LOADER_0_11, LengthFilter, Workload
from .prompts import Item, Request, render_prompt

STUDY_SHUFFLE_BUFFER = 1000  # datasets' IterableDataset.shuffle default, as the study used it
STUDY_DATASETS_VERSION = "4.0.0"  # requirements/common.txt of the study's vLLM fork: the stream order's version

# ShareGPT filter of the study, in tokens of the target tokenizer.
SHAREGPT_MIN_PROMPT_TOKENS = 4
SHAREGPT_MAX_PROMPT_TOKENS = 1024
SHAREGPT_MAX_TOTAL_TOKENS = 2048


# --------------------------------------------------------------------------
# The hash order.
# --------------------------------------------------------------------------


def _rank(seed: int, ids: Sequence[str]) -> list[int]:
    """Row numbers ordered by sha256(seed:id): order-independent and nested in n."""

    def key(row: int) -> tuple[bytes, int]:
        return hashlib.sha256(f"{seed}:{ids[row]}".encode()).digest(), row

    return sorted(range(len(ids)), key=key)


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of ``text`` as the target tokenizer counts them (``tokenizer(text).input_ids``)."""
    if callable(tokenizer):
        encoded = tokenizer(text)
        ids = getattr(encoded, "input_ids", None)
        if ids is None and isinstance(encoded, Mapping):
            ids = encoded.get("input_ids")
        if ids is None and isinstance(encoded, Sequence) and not isinstance(encoded, str):
            ids = encoded
        if ids is not None:
            return len(ids)
    if hasattr(tokenizer, "encode"):
        return len(tokenizer.encode(text))
    raise TypeError(
        f"cannot count tokens with {type(tokenizer).__name__}: "
        "expected tokenizer(text).input_ids or tokenizer.encode(text)"
    )


def _passes_sharegpt_filter(item: Item, tokenizer: Any) -> bool:
    prompt_len = count_tokens(tokenizer, item.text)
    if not SHAREGPT_MIN_PROMPT_TOKENS <= prompt_len <= SHAREGPT_MAX_PROMPT_TOKENS:
        return False
    reference_len = count_tokens(tokenizer, item.reference or "")
    return prompt_len + reference_len <= SHAREGPT_MAX_TOTAL_TOKENS


@dataclass(frozen=True)
class Prompting:
    """How a request becomes a prompt: the chat template or not (None: the workload's default),
    keyword arguments for the template (Qwen3's enable_thinking), and the study's prompt form or
    the suite's (prompts.py prompt_ids)."""

    chat: bool | None = None
    template_kwargs: tuple[tuple[str, Any], ...] = ()
    study_form: bool = False

    def request(self, workload: Workload, rid: str, item: Item) -> Request:
        chat = workload.chat if self.chat is None else self.chat
        return Request(rid, item.text, chat, item.reference, self.template_kwargs, self.study_form)

    def as_loader_builds(self, workload: Workload, loader: str) -> Prompting:
        """These settings with the template arguments the study's ``loader`` passes itself for this
        workload (CNN/DailyMail's enable_thinking=False on 0.10.1.1) over the model's."""
        own = workload.study_prompts.get(loader)
        if not self.study_form or own is None or not own.template_kwargs:
            return self
        return replace(self, template_kwargs=tuple({**dict(self.template_kwargs), **dict(own.template_kwargs)}.items()))


def hash_sample(
    workload: Workload, table: Any, n: int, seed: int, tokenizer: Any, prompting: Prompting
) -> tuple[Request, ...]:
    """The first ``n`` records in the hash order that pass the workload's token filter (ShareGPT's)."""
    picked: list[Request] = []
    if n == 0:
        return ()
    for row in _rank(seed, table.ids):
        item = table.item(row)
        if item is None:
            continue
        if workload.token_filter and not _passes_sharegpt_filter(item, tokenizer):
            continue
        picked.append(prompting.request(workload, table.ids[row], item))
        if len(picked) == n:
            break
    return tuple(picked)


# --------------------------------------------------------------------------
# The study's selection.
# --------------------------------------------------------------------------


def _stream_order(count: int, seed: int) -> list[int]:
    """Row numbers in the order of ``datasets``' streaming shuffle of a one-shard dataset."""
    import datasets

    def rows(count: int) -> Iterator[dict]:
        for row in range(count):
            yield {"row": row}

    stream = datasets.IterableDataset.from_generator(rows, gen_kwargs={"count": count})
    return [example["row"] for example in stream.shuffle(seed=seed, buffer_size=STUDY_SHUFFLE_BUFFER)]


def study_rows(workload: Workload, table: Any, seed: int) -> Iterator[tuple[str, Item | None]]:
    """A local table's records in the study's order."""
    if workload.study_shuffle == "list":
        # The study shuffles the records its loader keeps (ShareGPT: two turns or more), which
        # the table's parser (the workload's study_parse) returns an item for.
        order = [row for row in range(len(table.ids)) if table.item(row) is not None]
        random.Random(seed).shuffle(order)
    else:
        order = _stream_order(len(table.ids), seed)
    for row in order:
        yield table.ids[row], table.item(row)


def _passes(length_filter: LengthFilter, request: Request, tokenizer: Any) -> bool:
    prompt = count_tokens(tokenizer, render_prompt(request, tokenizer))
    if not length_filter.min_prompt <= prompt <= length_filter.max_prompt:
        return False
    if request.reference_completion is None:  # nothing to check the completion by
        return True
    completion = count_tokens(tokenizer, request.reference_completion)
    return completion >= length_filter.min_completion and prompt + completion <= length_filter.max_total


PAD_CHOICES = "random.choices"  # vLLM 0.10.1.1, benchmark_dataset.py maybe_oversample_requests
PAD_CHOICE_LOOP = "random.choice per copy"  # vLLM 0.11.1rc1 (20be7b36), datasets_bench.py


def study_loader(vllm: str | None) -> str:
    """The study's loader for a cell's vLLM: releases before 0.11 (and no vLLM named) built requests
    with 0.10.1.1's benchmark_dataset.py; 0.11 and later, and a branch named without a version
    (the draft-model fork), with datasets_bench.py: the fork's scripts beyond the 0.10.1.1 branch
    import vllm.benchmarks.datasets_bench (scripts/common.py at 00ff3b49 and a6ccf877).  The fork's
    own copy is not published; 0.11.1rc1's (20be7b36) stands for it."""
    from packaging.version import InvalidVersion, Version

    if not vllm:
        return LOADER_0_10
    try:
        return LOADER_0_11 if Version(vllm) >= Version("0.11.0rc0") else LOADER_0_10
    except InvalidVersion:
        return LOADER_0_11


def loader_padding(loader: str) -> str:
    """How one of the study's loaders pads too few requests.  Both seed ``random`` with the seed;
    0.10.1.1 draws ``random.choices(requests, k=missing)``, 0.11.1rc1 draws
    ``random.choice(requests)`` once per missing request, which picks other copies."""
    return PAD_CHOICE_LOOP if loader == LOADER_0_11 else PAD_CHOICES


def study_padding(vllm: str | None) -> str:
    """How the study's loader of a cell's vLLM pads too few requests."""
    return loader_padding(study_loader(vllm))


def _copies(picked: list[Request], missing: int, seed: int, padding: str) -> list[Request]:
    rng = random.Random(seed)
    if padding == PAD_CHOICE_LOOP:
        return [rng.choice(picked) for _ in range(missing)]
    return rng.choices(picked, k=missing)


def study_sample(
    workload: Workload,
    rows: Iterator[tuple[str, Item | None]],
    n: int,
    seed: int,
    tokenizer: Any,
    prompting: Prompting,
    padding: str = PAD_CHOICES,
) -> tuple[Request, ...]:
    """The first ``n`` records of ``rows`` that pass the workload's study filter, padded as the study
    pads (``padding``: see :func:`study_padding`) when fewer pass; a copy's id says so."""
    picked: list[Request] = []
    for rid, item in rows:
        if len(picked) == n:
            break
        if item is None:
            continue
        request = prompting.request(workload, rid, item)
        if workload.study_filter is None or _passes(workload.study_filter, request, tokenizer):
            picked.append(request)
    if picked and len(picked) < n:
        copies = _copies(picked, n - len(picked), seed, padding)
        picked += [replace(r, id=f"{r.id}#copy{i + 1}") for i, r in enumerate(copies)]
    return tuple(picked)


def study_selection(workload: Workload, seed: int, padding: str = PAD_CHOICES) -> str:
    """The study's selection of this workload, in words, with the ``datasets`` version the order
    depends on and how too few requests are padded."""
    if workload.study_shuffle == "list":
        order = f"random.shuffle with seed {seed}"
    else:
        import datasets

        order = f"datasets {datasets.__version__} streaming shuffle, seed {seed}, buffer {STUDY_SHUFFLE_BUFFER}"
        if datasets.__version__ != STUDY_DATASETS_VERSION:
            order += f" (the study's order came from datasets {STUDY_DATASETS_VERSION})"
    length_filter = workload.study_filter
    return (
        f"study: {order}" + (f"; filter {length_filter.describe()}" if length_filter else "") + f"; padded by {padding}"
    )
