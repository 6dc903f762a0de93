"""Loading a workload sample: the first source that opens (a file in --dataset-dir, the hub, the
synthetic stand-in), drawn from in the profile's order (sampling.py), with where it came from."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import WORKLOADS, Workload
from .prompts import Request
from .sampling import (
    STUDY_SHUFFLE_BUFFER,
    Prompting,
    hash_sample,
    loader_padding,
    study_loader,
    study_rows,
    study_sample,
    study_selection,
)
from .sources import HubFailure, open_hub, open_hub_stream, read_jsonl, synthetic_table

log = logging.getLogger(__name__)
DEFAULT_PROMPTING = Prompting()  # the workload's own chat default, the suite's prompt form


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
    selection: str = "hash"  # how the requests were chosen, in words (results keep it)


def _load(
    workload: Workload,
    n: int,
    seed: int,
    dataset_dir: str | Path | None,
    tokenizer: Any,
    selection: str,
    prompting: Prompting,
    loader: str,
) -> WorkloadSample:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    study = selection == "study"
    if (workload.token_filter or (study and workload.study_filter)) and tokenizer is None:
        raise ValueError(
            f"{workload.name}: the length filter counts tokens and needs the target tokenizer: pass tokenizer="
        )
    padding = loader_padding(loader)
    words = study_selection(workload, seed, padding) if study else "hash"
    parse = workload.parser(study)
    if prompting.study_form:  # the prompt strings as the study's loader built them
        words += f"; prompt strings as {loader} builds them"
        own = workload.study_prompts.get(loader)
        parse = own.parse if own is not None and own.parse is not None else parse
        prompting = prompting.as_loader_builds(workload, loader)

    def draw(table: Any) -> tuple[Request, ...]:
        if study:
            return study_sample(workload, study_rows(workload, table, seed), n, seed, tokenizer, prompting, padding)
        return hash_sample(workload, table, n, seed, tokenizer, prompting)

    if dataset_dir is not None:
        directory = Path(dataset_dir)
        for local in workload.local_files:
            path = directory / local.filename
            if path.is_file():
                table, checksum = read_jsonl(workload, path, parse)
                return WorkloadSample(
                    workload.name, draw(table), f"dir:{path}", checksum, local.stand_in_for(table.ids), words
                )
        looked = f"looked in {directory}" + ("" if directory.is_dir() else ", no such directory")
    else:
        looked = "no --dataset-dir given"

    try:
        if study and workload.study_shuffle == "stream":  # the study streams the hub dataset, shuffled
            rows, revision, checksum = open_hub_stream(workload, seed, STUDY_SHUFFLE_BUFFER)
            requests = study_sample(workload, rows, n, seed, tokenizer, prompting, padding)
        else:  # the hash order, or the study's shuffle of the whole list (ShareGPT)
            table, revision, checksum = open_hub(workload, parse)
            requests = draw(table)
    except HubFailure as exc:
        hub_reason = str(exc)
    else:
        return WorkloadSample(workload.name, requests, f"hub:{workload.hub.path}@{revision}", checksum, None, words)

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
        return WorkloadSample(workload.name, draw(table), "synthetic", checksum, workload.synthetic_stand_in, words)

    raise WorkloadUnavailable(
        f"{workload.name} ({workload.title}): no source available: put {files} in --dataset-dir "
        f"({looked}), or make the hub dataset {workload.hub.describe()} loadable "
        f"(network, or its cache with HF_DATASETS_OFFLINE=1); hub: {hub_reason}"
    )


def load(
    workload: str,
    n: int,
    seed: int,
    dataset_dir: str | Path | None,
    tokenizer: Any = None,
    *,
    selection: str = "hash",
    prompting: Prompting = DEFAULT_PROMPTING,
    vllm: str | None = None,
) -> WorkloadSample:
    """Draw ``n`` requests of ``workload`` deterministically from ``seed``.

    ``tokenizer`` (the target model's) is needed where a length filter counts tokens (ShareGPT;
    AIME too under the study's selection); other workloads ignore it.  ``vllm`` (the scenario's
    reference vLLM) picks the study's loader: its padding under the study's selection, its prompt
    strings under the study's prompt form.
    """
    try:
        spec = WORKLOADS[workload]
    except KeyError:
        raise ValueError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}") from None
    return _load(spec, n, seed, dataset_dir, tokenizer, selection, prompting, study_loader(vllm))
