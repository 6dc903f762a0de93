"""Drawing a workload sample: find a source, rank its records by seed, take the first ``n``."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import WORKLOADS, Workload
from .prompts import Item, Request
from .sources import HubFailure, open_hub, read_jsonl, synthetic_table

log = logging.getLogger(__name__)

# ShareGPT filter of the study, in tokens of the target tokenizer.
SHAREGPT_MIN_PROMPT_TOKENS = 4
SHAREGPT_MAX_PROMPT_TOKENS = 1024
SHAREGPT_MAX_TOTAL_TOKENS = 2048


class WorkloadUnavailable(Exception):
    """No source for a workload could be found or opened."""


@dataclass(frozen=True)
class WorkloadSample:
    """The requests drawn from one workload, with where they came from."""

    workload: str
    requests: tuple[Request, ...]
    source: str
    checksum: str
    stand_in: str | None


# --------------------------------------------------------------------------
# Sampling.
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


def _sample(workload: Workload, table: Any, n: int, seed: int, tokenizer: Any) -> tuple[Request, ...]:
    picked: list[Request] = []
    if n == 0:
        return ()
    for row in _rank(seed, table.ids):
        item = table.item(row)
        if item is None:
            continue
        if workload.token_filter and not _passes_sharegpt_filter(item, tokenizer):
            continue
        picked.append(Request(table.ids[row], item.text, workload.chat, item.reference))
        if len(picked) == n:
            break
    return tuple(picked)


# --------------------------------------------------------------------------
# Loading.
# --------------------------------------------------------------------------


def _load(workload: Workload, n: int, seed: int, dataset_dir: str | Path | None, tokenizer: Any) -> WorkloadSample:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if workload.token_filter and tokenizer is None:
        raise ValueError(
            f"{workload.name}: the study's filter (prompt {SHAREGPT_MIN_PROMPT_TOKENS}..{SHAREGPT_MAX_PROMPT_TOKENS} "
            f"tokens, prompt + reference <= {SHAREGPT_MAX_TOTAL_TOKENS} tokens) "
            "needs the target tokenizer: pass tokenizer="
        )

    if dataset_dir is not None:
        directory = Path(dataset_dir)
        for local in workload.local_files:
            path = directory / local.filename
            if path.is_file():
                table, checksum = read_jsonl(workload, path)
                requests = _sample(workload, table, n, seed, tokenizer)
                return WorkloadSample(workload.name, requests, f"dir:{path}", checksum, local.stand_in)
        looked = f"looked in {directory}" + ("" if directory.is_dir() else ", no such directory")
    else:
        looked = "no --dataset-dir given"

    try:
        table, revision, checksum = open_hub(workload)
    except HubFailure as exc:
        hub_reason = str(exc)
    else:
        requests = _sample(workload, table, n, seed, tokenizer)
        return WorkloadSample(workload.name, requests, f"hub:{workload.hub.path}@{revision}", checksum, None)

    files = " or ".join(local.filename for local in workload.local_files)
    if workload.synthetic is not None:
        log.warning(
            "%s: no %s (%s) and hub %s unavailable (%s); using the stand-in: %s",
            workload.name,
            files,
            looked,
            workload.hub.describe(),
            hub_reason,
            workload.synthetic_stand_in,
        )
        table, checksum = synthetic_table(workload)
        requests = _sample(workload, table, n, seed, tokenizer)
        return WorkloadSample(workload.name, requests, "synthetic", checksum, workload.synthetic_stand_in)

    raise WorkloadUnavailable(
        f"{workload.name} ({workload.title}): no source available: put {files} in --dataset-dir "
        f"({looked}), or make the hub dataset {workload.hub.describe()} loadable "
        f"(network, or its cache with HF_DATASETS_OFFLINE=1); hub: {hub_reason}"
    )


def load(workload: str, n: int, seed: int, dataset_dir: str | Path | None, tokenizer: Any = None) -> WorkloadSample:
    """Draw ``n`` requests of ``workload`` deterministically from ``seed``.

    ``tokenizer`` (the target model's) is needed for ShareGPT only, whose filter
    counts tokens; other workloads ignore it.
    """
    try:
        spec = WORKLOADS[workload]
    except KeyError:
        raise ValueError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}") from None
    return _load(spec, n, seed, dataset_dir, tokenizer)
