"""One mapping from an engine's config to vLLM's arguments (run/builds/arguments.py): the offline
engine and the server get the same speculative config, additional config and attention backend
for every kind of method, and the facts of the vLLM they map for are read where it runs."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from specperf.run.builds import environments
from specperf.run.builds import methods as vllm_methods
from specperf.run.builds.arguments import VllmFacts, vllm_arguments
from specperf.run.builds.methods import ATTENTION_BACKEND_ENV, PROPOSER_CLASS, PROPOSER_OPTIONS_KEY, UnsupportedMethod
from specperf.run.engines import process as engine_process
from specperf.run.engines.engine import EngineConfig, EngineError
from specperf.run.serving.server import server_arguments

TARGET = "/ckpt/target"
K3 = {"num_speculative_tokens": 3}
NGRAM = {"method": "ngram", **K3, "prompt_lookup_min": 3, "prompt_lookup_max": 7}
ADAPTIVE = {"method": "adaptive", "model": "/ckpt/draft", **K3, "prompt_lookup_min": 3, "prompt_lookup_max": 7}
TREE = {"method": "eagle3_tree", "model": "/ckpt/head", **K3, "speculative_token_tree": "[(0,), (1,), (0, 0)]"}
# EngineArgs fields (vllm/engine/arg_utils.py): `attention_backend` from 0.13.0, absent in 0.12.0
WITH_BACKEND_ARG = frozenset({"model", "enforce_eager", "attention_backend"})
WITHOUT_BACKEND_ARG = frozenset({"model", "enforce_eager"})


def engine_config(spec: dict | None, **engine_args) -> EngineConfig:
    """An engine's config with its method's environment in it, as the pool builds it."""
    method_env = vllm_methods.method_env(spec["method"]) if spec else {}
    return EngineConfig(TARGET, None, 1, 42, spec, engine_args, {"OMP_NUM_THREADS": "1", **method_env})


def offline(config: EngineConfig, vllm: VllmFacts, monkeypatch) -> tuple[dict, dict]:
    """LLM(...)'s arguments and the environment the engine process is left with, after exec."""
    monkeypatch.delenv(ATTENTION_BACKEND_ENV, raising=False)
    for name, value in config.env.items():
        monkeypatch.setenv(name, value)
    kwargs = engine_process.engine_arguments(config, vllm)
    return kwargs, dict(os.environ)


ADAPTIVE_OPTIONS = {"model": "/ckpt/draft", "prompt_lookup_min": 3, "prompt_lookup_max": 7}
# kind: (the scenario's speculative_config, its vLLM, and what that vLLM gets: speculative_config,
# additional_config, the attention backend as argument, the attention backend as variable)
KINDS = {
    "plain": (NGRAM, VllmFacts("0.32.0", WITH_BACKEND_ARG), NGRAM, None, None, None),
    "adaptive proposer": (
        ADAPTIVE,
        VllmFacts("0.32.0", WITH_BACKEND_ARG),
        {"method": "custom_class", "model": PROPOSER_CLASS, **K3},
        {PROPOSER_OPTIONS_KEY: ADAPTIVE_OPTIONS},
        None,
        None,
    ),
    "tree, backend as argument": (
        TREE,
        VllmFacts("0.20.2", WITH_BACKEND_ARG),
        {**TREE, "method": "eagle3"},
        None,
        "TREE_ATTN",
        None,
    ),
    "tree, backend as variable": (
        TREE,
        VllmFacts("0.12.0", WITHOUT_BACKEND_ARG),
        {**TREE, "method": "eagle3"},
        None,
        None,
        "TREE_ATTN",
    ),
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_offline_engine_and_the_server_get_the_same_arguments_for_every_kind_of_method(kind, monkeypatch):
    spec, vllm, *expected = KINDS[kind]
    config = engine_config(spec, enforce_eager=True)
    kwargs, env = offline(config, vllm, monkeypatch)
    served = server_arguments(config, vllm)
    assert served.kwargs == {name.replace("_", "-"): value for name, value in kwargs.items() if name != "model"}
    assert served.env.get(ATTENTION_BACKEND_ENV) == env.get(ATTENTION_BACKEND_ENV)
    got = [kwargs["speculative_config"], kwargs.get("additional_config"), kwargs.get("attention_backend")]
    assert [*got, env.get(ATTENTION_BACKEND_ENV)] == expected


def test_the_suites_own_settings_win_over_a_profiles_engine_args():
    kwargs = vllm_arguments(
        engine_config(None, seed=7, enable_prefix_caching=True, max_model_len=512),
        VllmFacts("0.32.0", WITH_BACKEND_ARG),
        {},
    ).kwargs
    assert kwargs == {
        "model": TARGET,
        "tensor_parallel_size": 1,
        "seed": 42,
        "enable_prefix_caching": False,
        "disable_log_stats": False,
        "max_model_len": 512,
    }


def test_a_method_is_checked_against_the_declaration_where_one_was_read():
    declared = VllmFacts("0.10.1.1", WITHOUT_BACKEND_ARG, frozenset({"ngram", "deepseek_mtp", "eagle"}))
    kwargs = vllm_arguments(engine_config({"method": "mtp", **K3}), declared, {}).kwargs
    assert kwargs["speculative_config"] == {"method": "deepseek_mtp", **K3, "model": TARGET}
    with pytest.raises(EngineError, match=r"vLLM 0.10.1.1 does not declare method 'dflash' \(declared: "):
        vllm_arguments(engine_config({"method": "dflash", **K3}), declared, {})


def test_without_a_declaration_the_table_is_trusted_and_refuses_in_one_line():
    unread = VllmFacts("0.14.0", WITH_BACKEND_ARG)
    assert vllm_arguments(engine_config({"method": "mtp", **K3}), unread, {}).kwargs["speculative_config"] == {
        "method": "mtp",
        **K3,
    }
    with pytest.raises(UnsupportedMethod, match=r"^unsupported: method draft_model needs vLLM >= 0.15.0"):
        vllm_arguments(engine_config({"method": "draft_model", "model": "d", **K3}), unread, {})


def test_another_environments_vllm_is_read_without_importing_it(tmp_path, monkeypatch):
    """Its version from its metadata, its engine arguments from its source: a stand-in vLLM whose
    import would fail."""
    site = tmp_path / "site"
    (site / "vllm" / "engine").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("raise ImportError('vLLM must not be imported here')\n")
    (site / "vllm" / "engine" / "arg_utils.py").write_text(
        "class EngineArgs:\n    model: str = ''\n    attention_backend: str | None = None\n"
    )
    (site / "vllm-0.20.2.dist-info").mkdir()
    (site / "vllm-0.20.2.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.20.2\n")
    other = tmp_path / "python"  # another interpreter's path: asked in a subprocess
    other.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    other.chmod(other.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PYTHONPATH", str(site))
    found = environments.vllm_facts(str(other))
    assert found == VllmFacts("0.20.2", frozenset({"model", "attention_backend"}), distribution="vllm")


@pytest.mark.parametrize(
    "request_metrics, spec, engine_args, expected",
    [
        (True, NGRAM, WITH_BACKEND_ARG | {"per_request_spec_decode_metrics"}, "summary"),
        (False, NGRAM, WITH_BACKEND_ARG | {"per_request_spec_decode_metrics"}, None),  # greedy: not paid for
        (True, NGRAM, WITH_BACKEND_ARG, None),  # a vLLM before 0.29 has no per-request counts
        (True, None, WITH_BACKEND_ARG | {"per_request_spec_decode_metrics"}, None),  # nothing to count without SD
    ],
)
def test_an_engine_of_sampled_scenarios_asks_for_each_requests_counts(request_metrics, spec, engine_args, expected):
    import dataclasses

    config = dataclasses.replace(engine_config(spec), request_metrics=request_metrics)
    arguments = vllm_arguments(config, VllmFacts("0.32.0", frozenset(engine_args)), {})
    assert arguments.kwargs.get("per_request_spec_decode_metrics") == expected
