"""The workloads the suite measures: the study's six prompt sets and where to find each.

Adding a workload is one entry in :data:`WORKLOADS` (with a parser in prompts.py when its records
have a new format): profile validation, pytest markers and the report read the names through
profiles/registry.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .prompts import (
    Item,
    parse_aime,
    parse_cnn,
    parse_gpqa,
    parse_gsm8k,
    parse_instructcoder,
    parse_instructcoder_0_10,
    parse_sharegpt,
    parse_sharegpt_study,
)
from .synthetic import synthetic_gpqa_records

STAND_IN_EDITEVAL = "EditEval stands in for InstructCoder"
STAND_IN_AIME24 = "AIME 2024 stands in for AIME 2022-24"
STAND_IN_GPQA_SYNTHETIC = "synthetic four-choice questions stand in for GPQA-Main"
STAND_IN_CNN_SPEC_BENCH = "Spec-Bench's CNN/DailyMail items stand in for the 3.0.0 train split"
STAND_IN_GSM8K_TEST = "the GSM8K test split stands in for the main train split"


# The study's two loaders: vLLM's benchmark dataset classes on the branch each cell ran
# (SpecDecode-Bench/vllm).  They pad too few requests differently and build two prompts differently.
LOADER_0_10 = "benchmark_dataset.py of 0.10.1.1"  # perf/e2e-v0.10.1.1, benchmarks/ (13e70936)
LOADER_0_11 = "datasets_bench.py of 0.11.1rc1"  # perf/e2e-v0.11.1rc1, vllm/benchmarks/ (20be7b36)


@dataclass(frozen=True)
class StudyPrompt:
    """How one of the study's loaders builds a workload's prompt string, where it differs from the
    suite's: its own reading of the record, and chat-template arguments it passes itself (which
    win over the model's)."""

    parse: Callable[[Mapping[str, Any]], Item | None] | None = field(default=None, repr=False, compare=False)
    template_kwargs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class LengthFilter:
    """The study's `is_valid_sequence` (vLLM benchmarks' dataset code), in tokens of the target
    tokenizer: the prompt as given to the engine (chat template applied) and the record's reference
    completion."""

    max_prompt: int
    max_total: int
    min_prompt: int = 4
    min_completion: int = 4

    def describe(self) -> str:
        return (
            f"prompt {self.min_prompt}..{self.max_prompt} tokens, reference completion >= {self.min_completion}, "
            f"prompt + completion <= {self.max_total}"
        )


@dataclass(frozen=True)
class LocalFile:
    """A file name looked for in the dataset directory; ``stand_in`` labels a substitute.

    With ``stand_in_ids``, the file is a stand-in only when its records' ids start so: a file of the
    study's own split may carry the same name."""

    filename: str
    stand_in: str | None = None
    stand_in_ids: str | None = None

    def stand_in_for(self, ids: list[str]) -> str | None:
        if self.stand_in_ids is not None and not any(i.startswith(self.stand_in_ids) for i in ids):
            return None
        return self.stand_in


@dataclass(frozen=True)
class HubSource:
    """Arguments for ``datasets.load_dataset``."""

    path: str
    config: str | None
    split: str
    data_files: str | None = None
    revision: str | None = None
    id_column: str | None = None  # None (or absent): ids are "<id_prefix><row>"
    id_prefix: str = ""

    def describe(self) -> str:
        parts = [f"config {self.config}"] if self.config else []
        if self.data_files:
            parts.append(f"file {self.data_files}")
        parts.append(f"split {self.split}")
        if self.revision:
            parts.append(f"revision {self.revision}")
        return f"{self.path} ({', '.join(parts)})"


@dataclass(frozen=True)
class Workload:
    """One prompt set of the study and where to find it."""

    name: str  # the profile's dataset name and a pytest marker
    title: str
    figure_label: str | None  # the dataset in the study's figure 1 panel titles; None: no panel
    chat: bool
    local_files: tuple[LocalFile, ...]
    hub: HubSource
    parse: Callable[[Mapping[str, Any]], Item | None] = field(repr=False, compare=False)
    token_filter: bool = False  # hash selection: the ShareGPT filter on prompt and reference length
    study_filter: LengthFilter | None = None  # study selection: the study's length filter
    study_shuffle: str = "stream"  # study selection: "stream" (datasets' streaming shuffle) or "list"
    # study selection: how the study's loader reads a record, where it differs from ``parse``
    study_parse: Callable[[Mapping[str, Any]], Item | None] | None = field(default=None, repr=False, compare=False)
    synthetic: Callable[[], list[dict[str, str]]] | None = field(default=None, repr=False, compare=False)
    synthetic_stand_in: str | None = None
    # the study's prompt form: per loader, where its prompt string differs from the suite's
    study_prompts: Mapping[str, StudyPrompt] = field(default_factory=dict, compare=False)

    def parser(self, study: bool) -> Callable[[Mapping[str, Any]], Item | None]:
        """The record parser of a selection: the study's reading under ``selection = "study"``."""
        return self.study_parse if study and self.study_parse is not None else self.parse


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            name="cnn_dailymail",
            title="CNN/DailyMail summarisation",
            figure_label="CNN/DM",
            chat=True,
            local_files=(LocalFile("cnn_dailymail.jsonl", STAND_IN_CNN_SPEC_BENCH, "specbench-"),),
            hub=HubSource("abisee/cnn_dailymail", "3.0.0", "train", id_column="id"),
            parse=parse_cnn,
            # CNNDailyMailDataset.sample of 0.10.1.1 calls apply_chat_template(..., enable_thinking=False)
            study_prompts={LOADER_0_10: StudyPrompt(template_kwargs=(("enable_thinking", False),))},
        ),
        Workload(
            name="sharegpt",
            title="ShareGPT V3 unfiltered chat",
            figure_label="ShareGPT",
            chat=True,
            local_files=(LocalFile("sharegpt.jsonl"),),
            hub=HubSource(
                "anon8231489123/ShareGPT_Vicuna_unfiltered",
                None,
                "train",
                data_files="ShareGPT_V3_unfiltered_cleaned_split.json",
                id_column="id",
            ),
            parse=parse_sharegpt,
            token_filter=True,
            study_filter=LengthFilter(max_prompt=1024, max_total=2048),  # ShareGPTDataset.sample
            study_shuffle="list",  # ShareGPTDataset.load_data: random.seed(seed); random.shuffle
            study_parse=parse_sharegpt_study,  # conversations[0] and [1] of every entry with two turns
        ),
        Workload(
            name="instructcoder",
            title="InstructCoder code editing",
            figure_label="InstructCoder",
            chat=True,
            local_files=(
                LocalFile("instructcoder.jsonl"),
                LocalFile("instructcoder_editeval.jsonl", STAND_IN_EDITEVAL),
            ),
            hub=HubSource("likaixin/InstructCoder", None, "train", id_column="id", id_prefix="instructcoder-train-"),
            parse=parse_instructcoder,
            study_prompts={LOADER_0_10: StudyPrompt(parse=parse_instructcoder_0_10)},  # the 12-space continuation
        ),
        Workload(
            name="gsm8k",
            title="GSM8K math word problems",
            figure_label="GSM8K",
            chat=True,
            local_files=(LocalFile("gsm8k.jsonl", STAND_IN_GSM8K_TEST, "gsm8k-test-"),),
            hub=HubSource("openai/gsm8k", "main", "train", id_prefix="gsm8k-train-"),
            parse=parse_gsm8k,
        ),
        Workload(
            name="aime",
            title="AIME 2022-24 (raw prompt)",
            figure_label=None,
            chat=False,
            local_files=(
                LocalFile("aime.jsonl"),
                LocalFile("aime24.jsonl", STAND_IN_AIME24),
            ),
            hub=HubSource("AI-MO/aimo-validation-aime", None, "train", id_column="id", id_prefix="aime-"),
            parse=parse_aime,
            study_filter=LengthFilter(max_prompt=2048, max_total=32000),  # AIMODataset.sample
        ),
        Workload(
            name="gpqa",
            title="GPQA-Main four-choice science",
            figure_label=None,
            chat=True,
            local_files=(LocalFile("gpqa.jsonl"),),
            hub=HubSource("Idavidrein/gpqa", "gpqa_main", "train", id_column="Record ID", id_prefix="gpqa-"),
            parse=parse_gpqa,
            synthetic=synthetic_gpqa_records,
            synthetic_stand_in=STAND_IN_GPQA_SYNTHETIC,
        ),
    )
}
