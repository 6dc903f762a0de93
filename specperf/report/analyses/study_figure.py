"""The study's figure 1 (arXiv 2601.11580: speedup against batch size on H100) beside the suite's
scenarios: the figure data shipped with the suite, and which panel and series a scenario matches."""

from __future__ import annotations

import json
from pathlib import Path

from ...methods import method_of
from ...profiles.registry import study_dataset_label

REFERENCE_DATA = Path(__file__).resolve().parent.parent / "reference_data.json"

# The study's names, kept here only.
# Substrings of a scenario's model name or path -> the model tag in the panel titles.
STUDY_MODELS = (
    ("llama3.1-8b", "L3.1-8B"),
    ("llama-3.1-8b", "L3.1-8B"),
    ("llama3-70b", "L3-70B"),
    ("llama-3-70b", "L3-70B"),
    ("qwen3-8b", "Q3-8B"),
)


def load_reference() -> dict:
    """The study's figure data shipped with the suite (arXiv 2601.11580), or {} when unreadable."""
    try:
        return json.loads(REFERENCE_DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def study_panel(model_name: str, model_path: str, dataset: str, reference: dict) -> tuple[str, dict] | None:
    """The figure 1 panel (title, series) for a (model, dataset), when the study measured that pair."""
    names = (model_name.lower(), model_path.lower())
    tag = next((t for key, t in STUDY_MODELS if any(key in n for n in names)), None)
    dataset_tag = study_dataset_label(dataset)
    if tag is None or dataset_tag is None:
        return None
    panels = reference.get("fig1_speedup_vs_batch", {}).get("panels", {})
    for title, series in panels.items():
        if title.split(") ", 1)[-1] == f"{tag} {dataset_tag}":
            return title, series
    return None


def study_series_name(method_name: str, params: dict) -> str | None:
    """The figure 1 series that a method corresponds to (same vLLM method and k)."""
    return method_of(method_name).study_series.get(params.get("num_speculative_tokens"))
