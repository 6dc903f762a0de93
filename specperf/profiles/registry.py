"""The names the suite knows, each declared once: workloads, SD methods, GPU classes, tiers and
batching modes. Profile validation, pytest markers and the report read them from here.

Adding a workload is one entry in ``workloads/catalog.py``'s ``WORKLOADS``; adding a method one
entry in :data:`METHODS` below.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import NO_SD    # the method name of the no-SD reference scenarios
from .workloads.catalog import WORKLOADS, Workload

__all__ = [
    "BATCHING_MODES",
    "SELECTION_MODES",
    "GPU_CLASSES",
    "METHODS",
    "NO_SD",
    "NO_SD_LABEL",
    "TIERS",
    "WORKLOADS",
    "SDMethod",
    "Workload",
    "marker_names",
    "markers",
    "method_marker",
    "method_names",
    "study_dataset_label",
    "workload_names",
]


@dataclass(frozen=True)
class SDMethod:
    """A speculative method as vLLM's ``speculative_config`` names it; also a pytest marker."""

    name: str
    description: str


# The speculative methods this suite measures; whether the installed vLLM runs one is checked
# when its engine starts.
METHODS: dict[str, SDMethod] = {m.name: m for m in (
    SDMethod("ngram", "n-gram (prompt lookup) scenarios"),
    SDMethod("eagle", "EAGLE scenarios"),
    SDMethod("eagle3", "EAGLE-3 scenarios"),
    SDMethod("draft_model", "draft-model scenarios"),
    SDMethod("mtp", "multi-token-prediction scenarios"),
    SDMethod("suffix", "suffix-decoding scenarios"),
    SDMethod("adaptive", "scenarios of specperf's adaptive proposer (n-gram, else a draft model)"),
)}

NO_SD_LABEL = "nosd"      # their label in scenario ids, and their pytest marker
NO_SD_DESCRIPTION = "the no-SD reference scenarios"

# Oldest/smallest to newest/largest serving GPU; "H100" as a minimum means H100 or a later entry.
GPU_CLASSES = ("T4", "A10", "A10G", "L4", "A100", "L40", "L40S", "H100", "H200", "GH200",
               "B100", "B200", "GB200")

SELECTION_MODES = ("hash", "study")         # which records a workload sample takes (workloads/sampling.py)
BATCHING_MODES = ("replicate", "distinct")   # one prompt replicated B times (the study's), or B prompts
TIERS = ("cpu", "gpu")


def workload_names() -> tuple[str, ...]:
    """The dataset names a profile may use, in declaration order."""
    return tuple(WORKLOADS)


def study_dataset_label(name: str) -> str | None:
    """How the study's figure 1 names dataset ``name`` ("CNN/DM"); None where it has no panel."""
    workload = WORKLOADS.get(name)
    return workload.figure_label if workload is not None else None


def method_names() -> tuple[str, ...]:
    """The SD method names a profile may use (without the no-SD reference)."""
    return tuple(METHODS)


def method_marker(method_name: str) -> str:
    """The pytest marker of a scenario with this method: the name, or "nosd" for the reference."""
    return NO_SD_LABEL if method_name == NO_SD else method_name


def markers() -> dict[str, str]:
    """Marker name -> one-line description: the methods, "nosd" and the datasets."""
    return {
        NO_SD_LABEL: NO_SD_DESCRIPTION,
        **{m.name: m.description for m in METHODS.values()},
        **{w.name: f"{w.title} workload" for w in WORKLOADS.values()},
    }


def marker_names() -> tuple[str, ...]:
    """The names of :func:`markers`."""
    return tuple(markers())
