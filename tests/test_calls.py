"""A round's calls as run/calls.batch builds them, and as the cost model counts them."""

from __future__ import annotations

import pytest
from records import make_scenario

from specperf.analysis.cost import calls_per_round, sequences_per_round
from specperf.profiles.workloads import Request
from specperf.run.calls import batch


@pytest.mark.parametrize("batching", ["replicate", "distinct"])
@pytest.mark.parametrize("requests, batch_size", [(2, 4), (5, 2), (4, 4), (1, 3)])
def test_the_calls_built_are_the_calls_the_cost_model_counts(batching, requests, batch_size):
    scenario = make_scenario(batch_size=batch_size).replace(num_requests=requests, batching=batching)
    wanted = [Request(id=str(i), text=f"prompt {i}", chat=False) for i in range(requests)]
    calls, order = batch(scenario, wanted, [[i + 1] for i in range(requests)])
    assert len(calls) == calls_per_round(scenario)
    assert sum(len(c) for c in calls) == len(order) == sequences_per_round(scenario)
    assert all(len(c) == batch_size for c in calls)


def test_a_serve_round_is_one_load_of_every_request():
    from specperf.analysis.cost import sequences_per_call

    scenario = make_scenario(batch_size=1).replace(num_requests=6, mode="serve", concurrency=2)
    assert calls_per_round(scenario) == 1
    assert sequences_per_call(scenario) == sequences_per_round(scenario) == 6
