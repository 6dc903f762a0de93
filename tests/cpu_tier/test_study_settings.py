"""study-full's settings on real parts: an engine's environment and finish reasons, and the study's
selection through a real tokenizer's chat template on the offline samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from specperf import checkpoints
from specperf.paths import dataset_dir
from specperf.profiles.scenarios import load_profile
from specperf.profiles.workloads import count_tokens, render_prompt
from specperf.run.calls import CallPreparer
from specperf.run.engines.engine import Engine, EngineConfig, default_env

pytestmark = pytest.mark.cpu_tier

PROFILE = """
[profile]
name = "study-settings"
tier = "cpu"
selection = "study"
num_requests = 6

[profile.env]
VLLM_DISABLE_COMPILE_CACHE = "1"

[models.smollm2-135m]
path = "builtin:smollm2-135m"
thinking = false

[[cells]]
model = "smollm2-135m"
methods = ["nosd"]
batch_sizes = [2]
datasets = ["sharegpt", "gsm8k"]

[[cells]]
model = "smollm2-135m"
methods = ["nosd"]
batch_sizes = [1]
datasets = ["aime"]
chat = true
"""


def test_the_profiles_env_reaches_the_engine_and_calls_say_how_they_ended():
    config = EngineConfig(
        model=checkpoints.resolve("builtin:tiny-llama"),
        tokenizer=None,
        tensor_parallel_size=1,
        seed=42,
        speculative_config=None,
        engine_args={
            "enforce_eager": True,
            "dtype": "float32",
            "max_model_len": 512,
            "kv_cache_memory_bytes": 64 * 2**20,
        },
        env={**default_env(), "VLLM_DISABLE_COMPILE_CACHE": "1"},
    )
    engine = Engine(config, start_timeout_s=600)
    try:
        environ = Path(f"/proc/{engine.pid}/environ").read_bytes().split(b"\0")
        reply = engine.generate([[1, 2, 3, 4, 5]] * 2, max_tokens=8, timeout_s=300)
    finally:
        engine.close()
    assert b"VLLM_DISABLE_COMPILE_CACHE=1" in environ
    assert reply.finish_reasons == ["length", "length"]  # 8 tokens, no EOS in a tiny random model


def test_the_studys_selection_through_the_real_chat_template(tmp_path):
    path = tmp_path / "study-settings.toml"
    path.write_text(PROFILE)
    prepare = CallPreparer(dataset_dir())
    for scenario in load_profile(str(path)).scenarios:
        calls = prepare(scenario)
        tokenizer = prepare.tokenizer(scenario)
        assert len(calls.facts.request_ids) == 6 and len(set(calls.facts.request_ids)) == 6, scenario.id
        assert calls.facts.selection.startswith("study: "), calls.facts.selection
        if scenario.dataset == "sharegpt":
            for request in calls.requests:
                prompt = count_tokens(tokenizer, render_prompt(request, tokenizer))
                assert 4 <= prompt <= 1024
                assert prompt + count_tokens(tokenizer, request.reference_completion) <= 2048
        if scenario.dataset == "aime":  # the cell's chat = true templates AIME's raw problem
            assert all(r.chat for r in calls.requests)
            assert render_prompt(calls.requests[0], tokenizer) != calls.requests[0].text
        assert calls.facts.stand_in is not None or scenario.dataset == "sharegpt"
