"""k sweeps and dynamic SD schedules in profiles (profiles/schema.py, profiles/scenarios.py), and the
schedule's own rules (specperf/schedule.py)."""

from __future__ import annotations

import pytest

from specperf.profiles.scenarios import load_profile
from specperf.schedule import check_schedule, from_points, k_at, switch_points
from tests.test_scenarios import CELL, profile_error, write_profile

SWEEP = CELL.replace("batch_sizes = [1, 4]", "num_speculative_tokens = [1, 3, 5]\nbatch_sizes = [1, 4]")
DYNAMIC = CELL.replace(
    "prompt_lookup_max = 7\n",
    'prompt_lookup_max = 7\n\n[methods.ngram-dynamic]\nmethod = "ngram"\nnum_speculative_tokens = 5\n'
    "prompt_lookup_min = 3\nprompt_lookup_max = 7\n"
    "num_speculative_tokens_per_batch_size = [[1, 1, 5], [2, 4, 3]]\n",
).replace('methods = ["ngram-k3"]', 'methods = ["ngram-dynamic"]')


def test_a_sweep_runs_each_k_as_its_own_paired_method(tmp_path):
    scenarios = load_profile(str(write_profile(tmp_path, SWEEP))).scenarios
    sd = [s for s in scenarios if not s.is_reference]
    assert [s.id for s in sd] == [f"m-ngram-k{k}-bs{b}-gsm8k" for k in (1, 3, 5) for b in (1, 4)]
    assert [s.method.params["num_speculative_tokens"] for s in sd] == [1, 1, 3, 3, 5, 5]
    assert all(s.method.params["prompt_lookup_min"] == 3 for s in sd)
    assert len({s.engine_key for s in sd}) == 3  # one engine per k, shared by the batch sizes
    assert all(s.paired_reference for s in sd)
    references = [s for s in scenarios if s.is_reference]
    assert [s.id for s in references] == ["m-nosd-bs1-gsm8k", "m-nosd-bs4-gsm8k"]  # once per batch size
    assert not any(s.paired_reference for s in references)


def test_a_swept_k_measures_what_the_same_k_declared_alone_measures(tmp_path):
    """Pairing changes how speedup is measured, not what: the k 3 of a sweep keeps the hash (and so
    the baselines) of ngram-k3 declared on its own."""
    swept = {s.id: s for s in load_profile(str(write_profile(tmp_path, SWEEP))).scenarios}
    alone = {s.id: s for s in load_profile(str(write_profile(tmp_path, CELL, "alone.toml"))).scenarios}
    assert swept["m-ngram-k3-bs4-gsm8k"].hash == alone["m-ngram-k3-bs4-gsm8k"].hash


def test_a_label_without_k_gets_one(tmp_path):
    text = SWEEP.replace("ngram-k3", "lookup")
    ids = [s.id for s in load_profile(str(write_profile(tmp_path, text))).scenarios if not s.is_reference]
    assert ids[:2] == ["m-lookup-k1-bs1-gsm8k", "m-lookup-k1-bs4-gsm8k"]


@pytest.mark.parametrize(
    "text, message",
    [
        (SWEEP.replace("[1, 3, 5]", "[1, 3, 3]"), "cells[0].num_speculative_tokens: each k once, got [1, 3, 3]"),
        (SWEEP.replace("[1, 3, 5]", "[]"), "cells[0].num_speculative_tokens: must be a non-empty list"),
        (SWEEP.replace("[1, 3, 5]", "[0, 3]"), "cells[0].num_speculative_tokens[0]:"),
        (
            DYNAMIC.replace("batch_sizes = [1, 4]", "num_speculative_tokens = [1, 3]\nbatch_sizes = [1, 4]"),
            "cells[0].methods[0]: method 'ngram-dynamic' sets its k by num_speculative_tokens_per_batch_size",
        ),
        (
            DYNAMIC.replace("[[1, 1, 5], [2, 4, 3]]", "[[1, 1, 5], [3, 4, 3]]"),
            "methods.ngram-dynamic.num_speculative_tokens_per_batch_size: a gap at batch size 2",
        ),
        (
            DYNAMIC.replace("[[1, 1, 5], [2, 4, 3]]", "[[1, 2, 5], [2, 4, 3]]"),
            "methods.ngram-dynamic.num_speculative_tokens_per_batch_size: an overlap at batch size 2",
        ),
        (
            DYNAMIC.replace("[[1, 1, 5], [2, 4, 3]]", "[[1, 1, 6], [2, 4, 3]]"),
            "methods.ngram-dynamic.num_speculative_tokens_per_batch_size: range 1: k 6 is outside 0..5",
        ),
        (
            DYNAMIC.replace("[[1, 1, 5], [2, 4, 3]]", "[[2, 4, 3]]"),
            "methods.ngram-dynamic.num_speculative_tokens_per_batch_size: a gap at batch size 1",
        ),
        (
            DYNAMIC.replace("[[1, 1, 5], [2, 4, 3]]", "[[1, 4]]"),
            "methods.ngram-dynamic.num_speculative_tokens_per_batch_size: range 1: must be "
            "[first batch size, last batch size, k], got [1, 4]",
        ),
    ],
)
def test_a_bad_sweep_or_schedule_is_one_line_naming_the_field(tmp_path, text, message):
    assert message in profile_error(tmp_path, text)


def test_a_dynamic_method_is_paired_and_passes_its_schedule_to_vllm(tmp_path):
    scenarios = load_profile(str(write_profile(tmp_path, DYNAMIC))).scenarios
    dynamic = [s for s in scenarios if not s.is_reference]
    assert [s.id for s in dynamic] == ["m-ngram-dynamic-bs1-gsm8k", "m-ngram-dynamic-bs4-gsm8k"]
    assert all(s.paired_reference for s in dynamic)
    config = dynamic[0].method.speculative_config()
    assert config["num_speculative_tokens"] == 5
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 1, 5], [2, 4, 3]]


def test_the_schedule_rules():
    schedule = check_schedule([[1, 1, 5], [2, 4, 3], [5, 8, 0]], max_k=5)
    assert [k_at(schedule, b) for b in (1, 2, 4, 5, 8, 64)] == [5, 3, 3, 0, 0, 0]  # past the end: the last k
    assert switch_points(schedule) == [2, 5]
    for bad in ([], "1-4", [[1, 4, True]], [[0, 4, 3]], [[1, 4, -1]], [[3, 1, 2]]):
        with pytest.raises(ValueError):
            check_schedule(bad, max_k=5)


@pytest.mark.parametrize(
    "points, schedule",
    [
        ({1: 5}, [(1, 1, 5)]),
        ({1: 5, 4: 3}, [(1, 2, 5), (3, 4, 3)]),  # 2 is as near 1 as 4 (log2): the smaller size's k
        ({1: 5, 4: 3, 8: 3, 16: 1}, [(1, 2, 5), (3, 11, 3), (12, 16, 1)]),  # 4..8 merged; sqrt(128) = 11.3
        ({4: 3, 8: 1}, [(1, 5, 3), (6, 8, 1)]),  # below the smallest measured size: its k
        ({1: 2, 2: 1}, [(1, 1, 2), (2, 2, 1)]),
        ({1: 0, 4: 0}, [(1, 4, 0)]),
    ],
)
def test_a_schedule_from_measured_points_covers_batch_one_to_the_largest(points, schedule):
    built = from_points(points)
    assert built == schedule
    assert check_schedule([list(r) for r in built], max_k=5) == built
