"""Unit tests for specperf.profiles.registry: the names the suite knows, declared once."""

from __future__ import annotations

from specperf.profiles import registry
from specperf.profiles.workloads import WORKLOADS


def test_workloads_come_from_the_catalog():
    assert registry.WORKLOADS is WORKLOADS
    assert registry.workload_names() == ("cnn_dailymail", "sharegpt", "instructcoder", "gsm8k", "aime", "gpqa")


def test_study_dataset_labels():
    labels = {name: registry.study_dataset_label(name) for name in registry.workload_names()}
    assert labels == {
        "gsm8k": "GSM8K",
        "cnn_dailymail": "CNN/DM",
        "sharegpt": "ShareGPT",
        "instructcoder": "InstructCoder",
        "aime": None,
        "gpqa": None,
    }
    assert registry.study_dataset_label("mmlu") is None


def test_methods_and_the_reference():
    names = ("ngram", "eagle", "eagle3", "eagle_tree", "eagle3_tree", "draft_model", "mtp", "suffix", "adaptive")
    assert registry.method_names() == names
    assert (registry.NO_SD, registry.NO_SD_LABEL) == ("none", "nosd")
    assert registry.NO_SD not in registry.method_names()
    assert registry.method_marker("none") == "nosd"
    assert registry.method_marker("eagle3") == "eagle3"


def test_markers_cover_methods_reference_datasets_and_the_serving_mode_with_one_line_each():
    markers = registry.markers()
    assert registry.marker_names() == tuple(markers)
    assert set(markers) == {"nosd", "serve", *registry.method_names(), *registry.workload_names()}
    for name, text in markers.items():
        assert text and "\n" not in text, name


def test_gpu_classes_are_the_ones_gpus_uses():
    from specperf.run import gpus

    assert gpus.GPU_CLASSES is registry.GPU_CLASSES
    assert registry.GPU_CLASSES.index("A100") < registry.GPU_CLASSES.index("H100")


def test_tiers_and_batching_modes():
    assert registry.TIERS == ("cpu", "gpu")
    assert registry.BATCHING_MODES == ("replicate", "distinct")
