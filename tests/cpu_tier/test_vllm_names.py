"""The installed vLLM's own argument names, read from its source, and the settings the suite
passes it, read back from the config it builds (no engine starts)."""

import pytest

from specperf import checkpoints
from specperf.profiles.scenarios import available_profiles, load_profile
from specperf.run.builds import fields as vllm_fields
from specperf.run.engines import process as engine_process
from specperf.run.engines.engine import EngineConfig
from specperf.suite.profile import check_vllm_names

pytestmark = pytest.mark.cpu_tier


def test_the_installed_vllm_is_read():
    assert {"enforce_eager", "kv_cache_memory_bytes", "max_model_len", "dtype"} <= vllm_fields.engine_arg_names()
    assert {"num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"} <= vllm_fields.speculative_field_names()
    assert "did you mean 'enforce_eager'" in vllm_fields.problem_with(
        "enforce_eagr", vllm_fields.engine_arg_names(), vllm_fields.SET_BY_THE_SUITE
    )


@pytest.mark.parametrize("name", available_profiles())
def test_every_profile_uses_names_the_installed_vllm_accepts(name):
    check_vllm_names(load_profile(name))


def test_an_attention_backend_a_scenarios_env_names_reaches_the_installed_vllms_config(monkeypatch):
    """A tree method's env, or a scenario's own, names the backend (FLASH_ATTN here: the tree's
    TREE_ATTN left vLLM with the trees); the engine passes it the way the installed vLLM takes it."""
    import vllm
    from vllm.engine.arg_utils import EngineArgs

    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    config = EngineConfig(checkpoints.resolve("builtin:tiny-llama"), None, 1, 42, None, {"max_model_len": 512})
    kwargs = engine_process.engine_arguments(config, engine_process.installed_facts(vllm.__version__))
    assert EngineArgs(**kwargs).create_engine_config().attention_config.backend.name == "FLASH_ATTN"
