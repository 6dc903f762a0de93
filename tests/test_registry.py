"""Unit tests for specperf.profiles.registry: the names the suite knows, each read from its one
declaration, and what the study's reference figures need of them."""

from __future__ import annotations

import json
from pathlib import Path

from specperf.methods import METHODS, REFERENCE
from specperf.profiles import registry
from specperf.profiles.workloads import WORKLOADS

REFERENCE_DATA = Path(registry.__file__).resolve().parent.parent / "report" / "reference_data.json"


def test_the_names_a_profile_may_use_are_the_declared_ones_in_order_without_the_reference():
    assert registry.workload_names() == tuple(WORKLOADS)
    assert registry.method_names() == tuple(METHODS) and REFERENCE.name not in registry.method_names()


def test_every_study_panel_has_its_workload_and_every_label_its_panel():
    """The report finds a scenario's panel of the study's figure 1 by its workload's figure label."""
    panels = json.loads(REFERENCE_DATA.read_text())["fig1_speedup_vs_batch"]["panels"]
    panel_datasets = {title.split(") ", 1)[-1].split(" ", 1)[1] for title in panels}
    labels = {registry.study_dataset_label(name) for name in registry.workload_names()} - {None}
    assert labels == panel_datasets
    assert registry.study_dataset_label("mmlu") is None


def test_a_methods_marker_is_its_declared_one_and_an_unknown_name_its_own():
    assert registry.method_marker(REFERENCE.name) == registry.NO_SD_LABEL == REFERENCE.marker
    assert all(registry.method_marker(name) == method.marker for name, method in METHODS.items())
    assert registry.method_marker("medusa") == "medusa"


def test_markers_cover_methods_reference_datasets_and_the_serving_mode_with_one_line_each():
    markers = registry.markers()
    assert set(markers) == {"nosd", "serve", *registry.method_names(), *registry.workload_names()}
    for name, text in markers.items():
        assert text and "\n" not in text, name


def test_gpu_classes_are_the_ones_gpus_uses():
    from specperf.run.hardware import gpus

    assert gpus.GPU_CLASSES is registry.GPU_CLASSES
    assert registry.GPU_CLASSES.index("A100") < registry.GPU_CLASSES.index("H100")
