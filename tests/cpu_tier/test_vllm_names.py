"""The installed vLLM's own argument names, read from its source (no engine starts)."""

import pytest

from specperf.profiles.scenarios import available_profiles, load_profile
from specperf.run import vllm_fields
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
