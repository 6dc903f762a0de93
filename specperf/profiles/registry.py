"""The names the suite knows, each declared once: workloads, SD methods, GPU classes, tiers and
batching modes. Profile validation, pytest markers and the report read them from here.

Adding a workload is one entry in ``workloads/catalog.py``'s ``WORKLOADS``; adding a method one
entry in ``specperf/methods.py``'s ``METHODS``.
"""

from __future__ import annotations

from ..methods import METHODS, REFERENCE, SDMethod, method_of
from ..records import NO_SD  # the method name of the no-SD reference scenarios
from ..records.scenario import NO_SD_LABEL  # the reference's label in scenario ids, and its pytest marker
from .workloads.catalog import WORKLOADS, Workload

__all__ = [
    "BATCHING_MODES",
    "SELECTION_MODES",
    "PROMPT_FORMS",
    "GPU_CLASSES",
    "METHODS",
    "NO_SD",
    "NO_SD_LABEL",
    "TIERS",
    "WORKLOADS",
    "SDMethod",
    "Workload",
    "markers",
    "method_marker",
    "method_names",
    "study_dataset_label",
    "workload_names",
    "CODE_ARGS",
    "CODE_ENV",
    "code_loading",
    "scenarios_loading_code",
]


# Oldest/smallest to newest/largest serving GPU; "H100" as a minimum means H100 or a later entry.
GPU_CLASSES = ("T4", "A10", "A10G", "L4", "A100", "L40", "L40S", "H100", "H200", "GH200", "B100", "B200", "GB200")

# What makes an engine load code its checkpoint or the profile names, beyond vLLM's own: a profile
# takes these only with `allow_code = true`, and the terminal and the report say that it does.
CODE_ARGS = ("trust_remote_code", "worker_cls", "worker_extension_cls", "logits_processors")
CODE_ENV = ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")


def code_loading(engine_args: dict, env: dict) -> list[str]:
    """The engine arguments and environment variables among these that load code (a trust_remote_code
    of false loads none)."""
    return [name for name in CODE_ARGS if engine_args.get(name) not in (None, False)] + [
        name for name in CODE_ENV if name in env
    ]


def scenarios_loading_code(scenarios) -> list[str]:
    """What of code_loading any of `scenarios` sets, sorted: what the terminal and the report name."""
    return sorted({name for s in scenarios for name in code_loading(s.engine_args, s.env)})


SELECTION_MODES = ("hash", "study")  # which records a workload sample takes (workloads/sampling.py)
PROMPT_FORMS = ("token_ids", "study")  # how a request reaches the engine (workloads/prompts.py prompt_ids)
BATCHING_MODES = ("replicate", "distinct")  # one prompt replicated B times (the study's), or B prompts
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
    """The pytest marker of a scenario with this method (the reference's: "nosd")."""
    return method_of(method_name).marker


SERVE_MARKER = "serve"


def markers() -> dict[str, str]:
    """Marker name -> one-line description: the methods, "nosd", the datasets and "serve"."""
    return {
        SERVE_MARKER: "scenarios measured behind vLLM's OpenAI-compatible server",
        REFERENCE.marker: REFERENCE.description,
        **{m.marker: m.description for m in METHODS.values()},
        **{w.name: f"{w.title} workload" for w in WORKLOADS.values()},
    }
