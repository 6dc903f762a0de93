"""A run's distribution checks (run/distribution_check.py) with stand-in engines: which scenarios
are checked, on which engines, and that a reference's draws serve the run's other scenarios.
Real engines: tests/cpu_tier/test_distribution_engines.py and the main job."""

from __future__ import annotations

import random

from records import make_scenario

from specperf.records import Sampling
from specperf.records.scenario import CHECK_DRAWS, REFERENCE_METHOD, SERVE
from specperf.run.calls import Calls
from specperf.run.distribution_check import SEED, DistributionChecks, applies, first_prompts
from specperf.run.engines.engine import EngineError
from specperf.run.engines.protocol import Batch

NO_SD = REFERENCE_METHOD.name
SAMPLED = make_scenario().replace(sampling=Sampling(temperature=0.8, seed=100))


class Drawing:
    """An engine whose draws follow `weights` over tokens 0..3 at every position, each draw decided by its seed."""

    def __init__(self, weights):
        self.weights, self.batches = weights, []

    def generate(self, batch: Batch, tokens: int, timeout_s: float):
        self.batches.append(batch)
        draws = [random.Random(p["seed"]).choices(range(4), self.weights, k=tokens) for p in batch.params]
        return type("Reply", (), {"token_ids": draws})()


class Pool:
    """engines_for as EnginePool's: the engines wanted, by label; records what each call wanted."""

    def __init__(self, sd_weights):
        self.sd, self.reference, self.wanted = Drawing(sd_weights), Drawing([4, 3, 2, 1]), []
        self.failing, self.failed = None, []  # the label whose engine fails to start, and the slots failed

    def engines_for(self, wanted):
        self.wanted.append({label: spec[0].method.name for label, spec in wanted.items()})
        if self.failing in wanted:
            raise EngineError("engine process died")
        return {label: self.sd if label == "sd" else self.reference for label in wanted}, 0.0

    def fail(self, slot, message, kind):
        self.failed.append((slot, message))


def calls(prompts: list[list[int]], replicas: int = 4) -> Calls:
    return Calls(calls=[[p] * replicas for p in prompts], requests=[], facts=None)


def test_only_a_sampled_sd_scenario_run_offline_is_checked():
    assert applies(SAMPLED)
    assert not applies(make_scenario())  # greedy: its outputs are compared token by token
    assert not applies(SAMPLED.replace(method=REFERENCE_METHOD))  # no SD: nothing to check it against
    assert not applies(SAMPLED.replace(mode=SERVE, concurrency=4))
    pool = Pool([4, 3, 2, 1])
    assert DistributionChecks(pool, log=lambda line: None).of(make_scenario(), None, calls([[1, 2]])) is None
    assert pool.wanted == []  # no engine started for a scenario it does not check


def test_the_first_distinct_prompts_are_drawn_a_seed_each_on_both_engines():
    assert first_prompts(calls([[1, 2], [1, 2], [3], [4]]), 2) == [[1, 2], [3]]
    pool = Pool([4, 3, 2, 1])
    found = DistributionChecks(pool, log=lambda line: None).of(SAMPLED, "/other/python", calls([[1, 2], [3], [5]]))
    assert found is not None and found.value > 0.001 and found.samples == [found.value]
    assert pool.wanted == [{"sd": SAMPLED.method.name}, {"no-SD": NO_SD}]  # one engine at a time
    assert [b.prompts for b in pool.reference.batches] == [[[1, 2]] * CHECK_DRAWS, [[3]] * CHECK_DRAWS]
    reference_seeds = {p["seed"] for b in pool.reference.batches for p in b.params}
    sd_seeds = {p["seed"] for b in pool.sd.batches for p in b.params}
    assert min(reference_seeds) == SEED and len(reference_seeds) == CHECK_DRAWS and not reference_seeds & sd_seeds


def test_draws_from_another_distribution_fail_and_a_references_draws_serve_the_next_scenario():
    pool = Pool([1, 1, 1, 7])  # SD favours token 3: not the target's distribution
    checks = DistributionChecks(pool, log=lambda line: None)
    found = checks.of(SAMPLED, None, calls([[1, 2], [3]]))
    assert found is not None and found.value < 1e-6
    drawn = len(pool.reference.batches)
    checks.of(SAMPLED.replace(batch_size=8), None, calls([[1, 2], [3]]))
    assert len(pool.reference.batches) == drawn  # the same prompts, sampling and build: kept
    assert pool.wanted[-1] == {"sd": SAMPLED.method.name}
    checks.of(SAMPLED, "/candidate/python", calls([[1, 2], [3]]))
    assert pool.wanted[-2:] == [{"sd": SAMPLED.method.name}, {"no-SD": NO_SD}]  # another build: its own reference


def test_an_engine_that_fails_in_the_check_fails_its_own_slot_and_leaves_the_scenario_unchecked():
    pool, lines = Pool([4, 3, 2, 1]), []
    pool.failing = "no-SD"
    assert DistributionChecks(pool, log=lines.append).of(SAMPLED, "/candidate/python", calls([[1, 2]])) is None
    reference = SAMPLED.replace(method=REFERENCE_METHOD)
    assert pool.failed == [(("/candidate/python", reference.engine_key), "engine process died")]
    assert f"not checked: its {REFERENCE_METHOD.label} engine failed: engine process died" in lines[-1]
