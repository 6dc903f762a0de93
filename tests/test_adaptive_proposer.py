"""The adaptive proposer's choice per row (run/engines/adaptive_proposer.py), with a recorded draft model
in place of the real one (the CPU tier runs it in a real engine: tests/cpu_tier/test_end_to_end.py,
test_the_adaptive_proposer_drafts_by_its_rule_and_headroom_is_simulated)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specperf.profiles.schema import ProfileFile, problem
from specperf.run.builds.methods import PROPOSER_OPTIONS_KEY
from specperf.run.engines.adaptive_proposer import AdaptiveProposer


class RecordedDraft:
    def __init__(self):
        self.calls = []

    def propose(self, row, context, k):
        self.calls.append((row, len(context), k))
        return [7] * k


def proposer(max_model_len: int = 100) -> AdaptiveProposer:
    config = SimpleNamespace(
        additional_config={PROPOSER_OPTIONS_KEY: {"model": "/draft", "prompt_lookup_min": 2, "prompt_lookup_max": 3}},
        speculative_config=SimpleNamespace(num_speculative_tokens=3),
        model_config=SimpleNamespace(dtype="float32", max_model_len=max_model_len),
    )
    made = AdaptiveProposer(config)
    made.draft = RecordedDraft()
    return made


def test_ngram_where_the_context_repeats_the_draft_model_elsewhere_nothing_in_prefill():
    made = proposer()
    tokens = np.zeros((3, 20), dtype=np.int64)
    tokens[0, :8] = [1, 2, 3, 4, 5, 9, 2, 3]  # "2 3" recurs: n-gram proposes 4 5 9
    tokens[1, :6] = [1, 2, 3, 4, 5, 6]  # nothing recurs: the draft model
    drafts = made.propose([[3], [6], []], np.array([8, 6, 4]), tokens)
    assert drafts == [[4, 5, 9], [7, 7, 7], []]
    assert made.chosen == {"lookup": 1, "draft": 1} and made.draft.calls == [(1, 6, 3)]


def test_no_draft_past_max_model_len():
    made = proposer(max_model_len=7)
    tokens = np.arange(20, dtype=np.int64)[None, :]
    assert made.propose([[5]], np.array([5]), tokens) == [[7, 7]]  # two positions left
    assert made.propose([[6]], np.array([7]), tokens) == [[]]


@pytest.mark.parametrize("missing", ["model", "prompt_lookup_min"])
def test_a_profile_must_name_the_adaptive_proposers_draft_and_window(missing):
    method = {
        "method": "adaptive",
        "model": "org/draft",
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 3,
        "prompt_lookup_max": 7,
    }
    del method[missing]
    profile = {
        "profile": {"name": "p", "tier": "gpu", "rounds": 3, "warmup": 1},
        "models": {"m": {"path": "org/model"}},
        "methods": {"adaptive-k3": method},
        "cells": [{"model": "m", "methods": ["adaptive-k3"], "batch_sizes": [1], "datasets": ["gsm8k"]}],
    }
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        ProfileFile.model_validate(profile)
    assert (
        problem(err.value) == f"methods.adaptive-k3.{missing}: required for method 'adaptive' "
        "(it needs model, prompt_lookup_min, prompt_lookup_max)"
    )
