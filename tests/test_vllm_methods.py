"""The method table: per vLLM release, which methods run, under which name, with which quirks."""

from __future__ import annotations

import pytest

from specperf.run.builds import methods as vllm_methods
from specperf.run.builds.methods import (
    PROPOSER_CLASS,
    UnsupportedMethod,
    proposer_options,
    supported_methods,
    unsupported_reason,
    vllm_speculative_config,
)

TARGET = "/models/GLM-4.5-Air"
K3 = {"num_speculative_tokens": 3}


def have_all(module: str) -> bool:
    return True


def have_none(module: str) -> bool:
    return False


def mapped(method: str, version: str, **params) -> dict:
    return vllm_methods.vllm_speculative_config({"method": method, **K3, **params}, version, TARGET, have_all)


def refusal(method: str, version: str, importable=have_all, **params) -> str:
    with pytest.raises(UnsupportedMethod) as caught:
        vllm_methods.vllm_speculative_config({"method": method, **K3, **params}, version, TARGET, importable)
    return str(caught.value)


# ------------------------------------------------------------------ per release


def test_0_10_1_1_the_study_release():
    assert mapped("ngram", "0.10.1.1", prompt_lookup_min=3, prompt_lookup_max=7) == {
        "method": "ngram",
        **K3,
        "prompt_lookup_min": 3,
        "prompt_lookup_max": 7,
    }
    assert mapped("eagle3", "0.10.1.1", model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B") == {
        "method": "eagle3",
        **K3,
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    }
    # MTP is "deepseek_mtp" there, and a GLM-4.5 target needs `model` set to itself
    assert mapped("mtp", "0.10.1.1") == {"method": "deepseek_mtp", **K3, "model": TARGET}
    assert mapped("mtp", "0.10.1.1", model="/other")["model"] == "/other"
    assert mapped("medusa", "0.10.1.1", model="m")["method"] == "medusa"
    assert mapped("eagle", "0.10.1.1", model="m", speculative_token_tree="[(0,)]")["speculative_token_tree"]
    assert (
        refusal("draft_model", "0.10.1.1")
        == "unsupported: method draft_model needs vLLM >= 0.15.0 (installed 0.10.1.1)"
    )
    assert refusal("suffix", "0.10.1.1") == "unsupported: method suffix needs vLLM >= 0.11.1 (installed 0.10.1.1)"


def test_0_11_mtp_is_its_own_name():
    assert mapped("mtp", "0.11.0") == {"method": "mtp", **K3}  # vLLM fills in the target itself
    assert mapped("mtp", "0.11.2")["method"] == "mtp"
    assert refusal("suffix", "0.11.0") == "unsupported: method suffix needs vLLM >= 0.11.1 (installed 0.11.0)"
    assert mapped("suffix", "0.11.1")["method"] == "suffix"
    assert refusal("draft_model", "0.11.1") == "unsupported: method draft_model needs vLLM >= 0.15.0 (installed 0.11.1)"


def test_0_12_suffix_needs_arctic_inference():
    assert mapped("suffix", "0.12.0", suffix_decoding_max_cached_requests=0) == {
        "method": "suffix",
        **K3,
        "suffix_decoding_max_cached_requests": 0,
    }
    assert (
        refusal("suffix", "0.12.0", importable=have_none)
        == "unsupported: method suffix needs the arctic-inference package (module arctic_inference not found)"
    )
    assert refusal("draft_model", "0.12.0").startswith("unsupported: method draft_model needs vLLM >= 0.15.0")


def test_0_16_draft_model_runs():
    assert mapped("draft_model", "0.16.0", model="Qwen/Qwen3-0.6B") == {
        "method": "draft_model",
        **K3,
        "model": "Qwen/Qwen3-0.6B",
    }
    assert refusal("ngram_gpu", "0.16.0") == "unsupported: method ngram_gpu needs vLLM >= 0.18.0 (installed 0.16.0)"
    assert mapped("eagle", "0.16.0", speculative_token_tree="[(0,)]")["method"] == "eagle"


def test_0_29_tree_drafting_is_gone():
    assert mapped("custom_class", "0.29.0", model="pkg.Proposer")["method"] == "custom_class"
    assert (
        refusal("eagle", "0.29.0", speculative_token_tree="[(0,)]")
        == "unsupported: speculative_token_tree was removed in vLLM 0.21.0 (installed 0.29.0)"
    )
    assert mapped("mtp", "0.29.0") == {"method": "mtp", **K3}


def test_0_32_still_has_medusa_and_mlp_speculator():
    for method in ("medusa", "mlp_speculator", "ngram", "eagle", "eagle3", "draft_model", "mtp"):
        assert mapped(method, "0.32.0")["method"] == method
    assert mapped("ngram", "0.32.0+cpu")["method"] == "ngram"  # a local version label


def test_0_33_medusa_and_mlp_speculator_are_gone():
    assert refusal("medusa", "0.33.0") == "unsupported: method medusa was removed in vLLM 0.33.0 (installed 0.33.0)"
    assert refusal("mlp_speculator", "0.33.1").startswith("unsupported: method mlp_speculator was removed")
    assert mapped("eagle3", "0.33.0")["method"] == "eagle3"


# ------------------------------------------------------------------ the rest of the interface


def test_supported_methods_gives_reasons_for_the_rest():
    assert supported_methods("0.10.1.1", have_all) == {
        "ngram": None,
        "eagle": None,
        "eagle3": None,
        "eagle_tree": None,
        "eagle3_tree": None,
        "draft_model": "method draft_model needs vLLM >= 0.15.0 (installed 0.10.1.1)",
        "mtp": None,
        "suffix": "method suffix needs vLLM >= 0.11.1 (installed 0.10.1.1)",
        "medusa": None,
        "mlp_speculator": None,
        "ngram_gpu": "method ngram_gpu needs vLLM >= 0.18.0 (installed 0.10.1.1)",
        "custom_class": "method custom_class needs vLLM >= 0.22.0 (installed 0.10.1.1)",
        "adaptive": "method adaptive needs vLLM >= 0.22.0 (installed 0.10.1.1)",
    }
    on_0_33 = supported_methods("0.33.0", have_none)
    assert [m for m, reason in on_0_33.items() if reason is None] == [
        "ngram",
        "eagle",
        "eagle3",
        "draft_model",
        "mtp",
        "ngram_gpu",
        "custom_class",
        "adaptive",
    ]
    assert on_0_33["suffix"].startswith("method suffix needs the arctic-inference package")
    assert on_0_33["eagle3_tree"] == "method eagle3_tree was removed in vLLM 0.21.0 (installed 0.33.0)"


def test_unsupported_reason_for_the_session():
    assert unsupported_reason("eagle3", {"model": "m", **K3}, "0.10.1.1", have_all) is None
    assert (
        unsupported_reason("draft_model", {"model": "m"}, "0.12.0")
        == "method draft_model needs vLLM >= 0.15.0 (installed 0.12.0)"
    )
    assert unsupported_reason("suffix", {}, "0.32.0", importable=None) is None  # package check skipped
    assert (
        unsupported_reason("ngram", None, "0.9.2") == "vLLM 0.9.2 is older than specperf's method table (from 0.10.0)"
    )
    assert unsupported_reason("ngram", None, "nightly") == "cannot read the vLLM version 'nightly'"


def test_names_the_table_does_not_know_pass_through():
    assert unsupported_reason("dflash", {}, "0.33.0") is None
    assert mapped("glm4_moe_mtp", "0.10.1.1") == {"method": "glm4_moe_mtp", **K3}


def test_a_config_without_method_is_refused():
    with pytest.raises(UnsupportedMethod, match="without a method"):
        vllm_methods.vllm_speculative_config({"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}, "0.10.1.1", TARGET)


def test_the_scenario_config_is_not_changed():
    spec = {"method": "mtp", **K3}
    vllm_methods.vllm_speculative_config(spec, "0.10.1.1", TARGET)
    assert spec == {"method": "mtp", **K3}


def test_the_adaptive_proposer_is_a_custom_class_with_its_options_in_additional_config():
    spec = {
        "method": "adaptive",
        "model": "/ckpt/draft",
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 3,
        "prompt_lookup_max": 7,
    }
    assert vllm_speculative_config(spec, "0.32.0", "/ckpt/target") == {
        "method": "custom_class",
        "model": PROPOSER_CLASS,
        "num_speculative_tokens": 3,
    }
    assert proposer_options(spec) == {"model": "/ckpt/draft", "prompt_lookup_min": 3, "prompt_lookup_max": 7}
    assert proposer_options({"method": "ngram", "num_speculative_tokens": 3}) is None
    assert unsupported_reason("adaptive", spec, "0.21.0") == "method adaptive needs vLLM >= 0.22.0 (installed 0.21.0)"


def test_a_tree_method_is_its_chain_method_with_the_tree_and_stops_at_0_21():
    tree = "[(0,), (1,), (0, 0), (1, 0), (0, 0, 0), (1, 0, 0)]"  # bench_latency.py's k=6 tree
    spec = {"method": "eagle3_tree", "model": "head", "num_speculative_tokens": 6, "speculative_token_tree": tree}
    assert vllm_speculative_config(spec, "0.10.1.1", "t", have_all) == {**spec, "method": "eagle3"}
    assert vllm_speculative_config(spec, "0.20.2", "t", have_all)["method"] == "eagle3"
    with pytest.raises(UnsupportedMethod, match="^unsupported: method eagle3_tree was removed in vLLM 0.21.0"):
        vllm_speculative_config(spec, "0.21.0", "t", have_all)


# EngineArgs fields (vllm/engine/arg_utils.py): 0.12.0 has no attention_backend; 0.13.0 to 0.20.2 have it.
ENGINE_ARGS_0_12 = {"model", "enforce_eager", "attention_config"}
ENGINE_ARGS_0_15 = ENGINE_ARGS_0_12 | {"attention_backend"}


def test_a_trees_backend_reaches_vllm_as_the_engine_argument_where_vllm_takes_one():
    tree_env = vllm_methods.method_env("eagle3_tree")
    assert tree_env == {"VLLM_ATTENTION_BACKEND": "TREE_ATTN"}
    # 0.15 to 0.20 run trees but read no VLLM_ATTENTION_BACKEND: only the argument drafts a tree
    assert vllm_methods.attention_backend_arg(tree_env, ENGINE_ARGS_0_15) == {"attention_backend": "TREE_ATTN"}
    assert vllm_methods.attention_backend_arg(tree_env, ENGINE_ARGS_0_12) == {}  # the variable, read by vLLM
    chain_as_the_study_ran = {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}  # a scenario's own env
    assert vllm_methods.attention_backend_arg(chain_as_the_study_ran, ENGINE_ARGS_0_15) == {
        "attention_backend": "FLASH_ATTN"
    }
    assert vllm_methods.attention_backend_arg({}, ENGINE_ARGS_0_15) == {}
