"""The run-level verdict on a dynamic SD schedule (analysis/dynamic_sd.py, suite/closing.py): shown
slower than its sweep's best fixed k, it fails the run unless the profile keeps it informational.

The run is a resumed one whose every result is constructed and already on disk, so the plugin
judges and closes it without starting an engine.
"""

from __future__ import annotations

import pytest

from specperf.analysis.dynamic_sd import dynamic_against_fixed, slower_than_fixed
from specperf.profiles.scenarios import load_profile
from tests.records import make_record, write_run
from tests.test_best_k import TIGHT, around
from tests.test_plugin import PERF_TESTS, resumable_run

PROFILE = """
[profile]
name = "dynamic-verdict"
tier = "cpu"
num_requests = 1
output_len = 8
rounds = 5
{informational}

[models.tiny]
path = "builtin:tiny-llama"

[methods.ngram]
method = "ngram"
num_speculative_tokens = 5
prompt_lookup_min = 3
prompt_lookup_max = 7

[methods.ngram-dynamic]
method = "ngram"
num_speculative_tokens = 5
prompt_lookup_min = 3
prompt_lookup_max = 7
num_speculative_tokens_per_batch_size = [[1, 1, {k_at_1}]]

[[cells]]
model = "tiny"
methods = ["ngram"]
num_speculative_tokens = [1, 5]
batch_sizes = [1]
datasets = ["gsm8k"]

[[cells]]
model = "tiny"
methods = ["ngram-dynamic"]
batch_sizes = [1]
datasets = ["gsm8k"]
"""
# each scenario's speedup at batch 1: k 5 clearly beats k 1, and a schedule runs what its k runs
SPEEDUP = {"tiny-ngram-k1-bs1-gsm8k": 1.2, "tiny-ngram-k5-bs1-gsm8k": 1.6}
REFERENCE = 100.0


def write_profile(tmp_path, k_at_1: int, informational: str = ""):
    path = tmp_path / "dynamic-verdict.toml"
    path.write_text(PROFILE.format(k_at_1=k_at_1, informational=informational))
    return path


def results_of(profile_path, k_at_1: int, hardware_key: str = "cpu-test-xeon-2c"):
    """A finished result per scenario of the profile, each SD one at its speedup over no SD."""
    results = []
    for scenario in load_profile(str(profile_path)).scenarios:
        speedup = SPEEDUP.get(scenario.id, SPEEDUP[f"tiny-ngram-k{k_at_1}-bs1-gsm8k"])
        throughput = [REFERENCE] * 5 if scenario.is_reference else [REFERENCE * s for s in around(speedup, TIGHT)]
        result = make_record(scenario, throughput=throughput, reference_throughput=REFERENCE, hardware_key=hardware_key)
        results.append(result.model_copy(update={"output_hashes": ["0" * 16]}))
    return results


def test_a_schedule_shown_slower_than_the_best_fixed_k_is_one_line_unless_informational(tmp_path):
    profile_path = write_profile(tmp_path, k_at_1=1)
    results = results_of(profile_path, k_at_1=1)
    by_id = {s.id: s for s in load_profile(str(profile_path)).scenarios}
    [line] = slower_than_fixed(dynamic_against_fixed(results), by_id)
    assert line.startswith("dynamic SD slower than the best fixed k: tiny-ngram-dynamic-bs1-gsm8k runs k 1 at batch 1")
    assert "of k 5" in line and "0.750x" in line
    kept = write_profile(tmp_path, k_at_1=1, informational='informational = ["dynamic_vs_best_k"]')
    assert slower_than_fixed(dynamic_against_fixed(results), {s.id: s for s in load_profile(str(kept)).scenarios}) == []
    assert slower_than_fixed(dynamic_against_fixed(results_of(profile_path, k_at_1=5)), by_id) == []


def test_an_unknown_informational_name_is_a_profile_error(tmp_path):
    from specperf.profiles.scenarios import ProfileError

    path = write_profile(tmp_path, k_at_1=1, informational='informational = ["dynamic_vs_k"]')
    with pytest.raises(ProfileError, match="dynamic_vs_k"):
        load_profile(str(path))


@pytest.mark.parametrize(
    ("k_at_1", "informational", "fails"),
    [(1, "", True), (5, "", False), (1, 'informational = ["dynamic_vs_best_k"]', False)],
    ids=["slower-fails", "as-fast-passes", "slower-informational-passes"],
)
def test_the_run_fails_on_a_schedule_slower_than_the_best_fixed_k(pytester, tmp_path, k_at_1, informational, fails):
    from specperf.run.hardware.device import describe_device

    here = describe_device()["hardware_key"]
    profile_path = write_profile(tmp_path, k_at_1, informational)
    run_dir = tmp_path / "reports" / "20260101-000000-dynamic-verdict"
    resumable_run(run_dir, "dynamic-verdict", here)
    write_run(run_dir, results_of(profile_path, k_at_1, here))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-q", str(PERF_TESTS), "--profile", str(profile_path), "--resume", str(run_dir),
        "--reports-dir", str(tmp_path / "reports"), "--history", "off",
    )  # fmt: skip
    output = result.stdout.str()
    assert "resumed" in output and "4 passed" in output, output
    slower = "dynamic SD slower than the best fixed k: tiny-ngram-dynamic-bs1-gsm8k runs k 1 at batch 1"
    assert (slower in output) is fails, output
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if fails else pytest.ExitCode.OK), output


def test_a_tuned_profile_gates_its_schedule_where_the_sweeps_profile_only_showed_one(tmp_path, capsys):
    from specperf.cli import main

    keeps = 'informational = ["speedup", "dynamic_vs_best_k"]'
    run_dir = write_run(tmp_path / "run", results_of(write_profile(tmp_path, 1, keeps), k_at_1=1))
    out = tmp_path / "tuned.toml"
    assert main(["tune", str(run_dir), "--profile-out", str(out)]) == 0, capsys.readouterr()
    scenarios = load_profile(str(out)).scenarios
    assert any("num_speculative_tokens_per_batch_size" in s.method.params for s in scenarios)
    assert {tuple(s.informational) for s in scenarios} == {("speedup",)}
