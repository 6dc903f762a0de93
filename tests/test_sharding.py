"""Splitting real profiles across machines: SD engine keys are partitioned, references go where needed."""

import random

import pytest

from specperf.analysis.cost import H100, calls_per_round, measuring_s
from specperf.profiles.scenarios import load_profile
from specperf.run import sharding


def offline_nightly():
    """h100-nightly's greedy offline scenarios: the shapes these tests state (its serve and sampled
    cells have keys of their own)."""
    return [s for s in load_profile("h100-nightly").scenarios if not s.serves and s.sampling.greedy]


def sd_keys(scenarios):
    return {s.engine_key for s in scenarios if not s.method.is_reference}


@pytest.fixture(scope="module", params=["h100-nightly", "study-full", "cpu-smoke"])
def scenarios(request):
    return list(load_profile(request.param).scenarios)


@pytest.mark.parametrize(
    "text, expected", [("1/1", (1, 1)), ("2/3", (2, 3)), (" 4 / 4 ", (4, 4)), ("1/4096", (1, 4096))]
)
def test_parse_shard(text, expected):
    assert sharding.parse_shard(text) == expected


# 1/1000000000 once ran past 20 s of splitting before a scenario was collected
@pytest.mark.parametrize(
    "text", ["0/3", "4/3", "1/0", "1", "a/b", "1/2/3", "-1/2", "", "1.5/2", "1/4097", "1/1000000000"]
)
def test_parse_shard_rejects(text):
    with pytest.raises(ValueError) as err:
        sharding.parse_shard(text)
    assert str(err.value) == f"--shard: expected I/N with 1 <= I <= N <= 4096, got {text!r}"


def check_partition(scenarios, shards):
    """SD scenarios once, their engine keys whole, each with its references; references only where needed."""
    by_id = {s.id: s for s in scenarios}
    sd_home = {}
    for i, part in enumerate(shards):
        here = {id(s) for s in part}
        assert part == [s for s in scenarios if id(s) in here]  # input order, no duplicates
        for s in part:
            if not s.method.is_reference:
                assert s.id not in sd_home  # never on two shards
                sd_home[s.id] = i
    assert set(sd_home) == {s.id for s in scenarios if not s.method.is_reference}
    key_homes = {}
    for s in scenarios:
        if not s.method.is_reference:
            key_homes.setdefault(s.engine_key, set()).add(sd_home[s.id])
    assert all(len(homes) == 1 for homes in key_homes.values())  # an SD engine starts once
    needed_anywhere = {s.reference_id for s in scenarios if not s.method.is_reference}
    ref_homes = {}
    for i, part in enumerate(shards):
        needed_here = {s.reference_id for s in part if not s.method.is_reference}
        assert needed_here & by_id.keys() <= {s.id for s in part}  # measured in the same run
        for s in part:
            if s.method.is_reference:
                ref_homes.setdefault(s.id, []).append(i)
                assert s.id in needed_here or s.id not in needed_anywhere  # no gratuitous copies
    refs = {s.id for s in scenarios if s.method.is_reference}
    assert set(ref_homes) == refs  # every reference runs
    assert all(len(ref_homes[r]) == 1 for r in refs - needed_anywhere)  # a spare one runs once
    return sd_home


@pytest.mark.parametrize("count", [1, 2, 3, 4, 8])
def test_shards_partition_the_profile(scenarios, count):
    shards = [sharding.shard(scenarios, i, count) for i in range(1, count + 1)]
    assert shards == sharding.assign(scenarios, count)
    check_partition(scenarios, shards)
    used = sum(1 for part in shards if part)
    assert used == min(count, len(sd_keys(scenarios)))  # every unit on its own machine if it can


def test_each_sd_engine_gets_a_machine_and_the_rest_stay_empty():
    scenarios = offline_nightly()
    assert len(sd_keys(scenarios)) == 6
    shards = sharding.assign(scenarios, 8)
    for part in shards[:6]:
        assert len(sd_keys(part)) == 1
        assert len({s.engine_key for s in part}) == 2  # the SD engine and its model's reference
        sd = [s for s in part if not s.method.is_reference]
        assert sorted(s.id for s in part if s.method.is_reference) == sorted(s.reference_id for s in sd)
    assert shards[6:] == [[], []]


def bound(units, single_machine, count):
    """Lower bound of the best split: the largest unit, or the one-machine cost spread evenly."""
    return max(max(u.cost for u in units), single_machine / count)


# Measured by analysis/cost.py's model on one H100: max/mean shard cost h100-nightly 1.00, 1.01
# (N=2, 3); study-full 1.00, 1.01, 1.09 (N=2..4), from N=5 on the largest unit (Llama-3-70B's) is
# the longest shard, alone; cpu-smoke 1.07-1.17 (N=2..4).  Against the lower bound (which ignores that
# references are duplicated) the worst is 1.51 (h100-nightly, N=3: greedy splits each model's keys
# 2+1, duplicating references).
def test_shards_are_balanced(scenarios):
    """For every N up to half the SD engine keys (two keys or more a machine)."""
    units = sharding.units(scenarios)
    largest = max(u.cost for u in units)
    for count in range(2, len(sd_keys(scenarios)) // 2 + 1):
        loads = [sharding.group_cost(part) for part in sharding.assign(scenarios, count)]
        assert max(loads) <= 1.3 * max(sum(loads) / count, largest), count
        assert max(loads) <= 1.7 * bound(units, sharding.group_cost(scenarios), count), count
        assert min(loads) > 0


def test_loads_never_exceed_the_sum_of_the_units(scenarios):
    """A shard pays for a shared reference once: never more than its units alone, often less."""
    units = sharding.units(scenarios)
    for count in (1, 2, 3, 4, 8):
        shards = sharding.assign(scenarios, count)
        for part in shards:
            here = {id(s) for s in part}
            own = [u for u in units if all(id(s) in here for s in u.scenarios)]
            assert sharding.group_cost(part) <= sum(u.cost for u in own) + 1e-6
    assert sharding.group_cost(sharding.assign(scenarios, 1)[0]) == pytest.approx(sharding.group_cost(scenarios))


def test_a_unit_goes_where_its_references_already_are():
    """Charging a shard only for references it lacks can beat the less loaded shard."""
    every = offline_nightly()
    eagle = [s for s in every if s.model.name == "llama3.1-8b" and s.method.label in ("eagle-k3", "nosd")]
    draft = [
        s
        for s in every
        if s.model.name == "qwen3-8b" and s.method.label in ("draft-k3", "nosd") and s.dataset != "gsm8k"
    ]
    eagle3 = [s for s in every if s.model.name == "llama3.1-8b" and s.method.label == "eagle3-k3" and s.batch_size == 1]
    scenarios = eagle + draft + eagle3
    shards = sharding.assign(scenarios, 2)
    assert shards[0] == eagle + eagle3 and shards[1] == draft
    # the premise: eagle3 went to the busier shard, because the other would pay for its references too
    assert sharding.group_cost(eagle) > sharding.group_cost(draft)
    refs = [s for s in eagle if s.id in {e.reference_id for e in eagle3}]
    assert sharding.group_cost(draft + eagle3 + refs) > sharding.group_cost(eagle + eagle3)


@pytest.mark.parametrize("count", [2, 3, 4, 8])
def test_shards_do_not_depend_on_input_order(scenarios, count):
    shuffled = scenarios[:]
    random.Random(count).shuffle(shuffled)
    first = sharding.assign(scenarios, count)
    second = sharding.assign(shuffled, count)
    assert [{s.id for s in p} for p in first] == [{s.id for s in p} for p in second]
    for part in second:  # in the caller's order
        here = {id(s) for s in part}
        assert part == [s for s in shuffled if id(s) in here]
    assert sharding.assign(scenarios, count) == first


def test_reference_only_selection_splits_by_engine_key():
    scenarios = [s for s in offline_nightly() if s.method.is_reference]
    shards = sharding.assign(scenarios, 3)
    check_partition(scenarios, shards)
    assert sorted(sorted({s.model.name for s in part}) for part in shards if part) == [["llama3.1-8b"], ["qwen3-8b"]]
    assert sum(1 for part in shards if not part) == 1
    assert sorted(len(u.scenarios) for u in sharding.units(scenarios)) == [22, 22]


def test_spare_references_form_their_own_units():
    """References no selected SD scenario needs still run, once; the needed ones go with their SD scenarios."""
    every = offline_nightly()
    scenarios = [s for s in every if s.method.is_reference or s.batch_size == 1]
    units = sharding.units(scenarios)
    spare = [u for u in units if not u.references]
    assert len(units) == 8 and len(spare) == 2
    assert all(s.method.is_reference and s.batch_size != 1 for u in spare for s in u.scenarios)
    for count in (1, 2, 3, 4, 8):
        check_partition(scenarios, sharding.assign(scenarios, count))


def test_missing_references_are_not_invented():
    scenarios = [s for s in offline_nightly() if not s.method.is_reference or s.dataset == "gsm8k"]
    shards = sharding.assign(scenarios, 3)
    check_partition(scenarios, shards)
    assert {s.dataset for p in shards for s in p if s.method.is_reference} == {"gsm8k"}
    assert sorted(len(sd_keys(p)) for p in shards) == [2, 2, 2]


def test_estimated_cost_follows_the_default_cost_model():
    base = next(s for s in offline_nightly() if s.batch_size == 1)
    cost = sharding.estimated_cost(base)
    assert cost == pytest.approx(measuring_s(base, H100)) and cost > 0
    more_rounds = base.replace(rounds=base.rounds * 2)
    calls = calls_per_round(base)
    assert sharding.estimated_cost(more_rounds) == pytest.approx(
        cost * (2 * base.rounds * calls + base.warmup) / (base.rounds * calls + base.warmup)
    )
    assert cost < sharding.estimated_cost(base.replace(output_len=base.output_len * 2)) <= 2 * cost  # prefill once
    bigger = base.model.model_copy(update={"path": "meta-llama/Meta-Llama-3-70B-Instruct", "tp": 4})
    assert sharding.estimated_cost(base.replace(model=bigger)) > cost
    big_batch = base.replace(batch_size=128)
    assert sharding.estimated_cost(big_batch) > cost
    assert sharding.estimated_cost(big_batch.replace(batching="distinct")) < sharding.estimated_cost(big_batch)
    # one engine start per engine key, however many scenarios share it
    assert sharding.group_cost([base, big_batch]) == pytest.approx(
        sharding.start_cost(base) + cost + sharding.estimated_cost(big_batch)
    )


def test_shard_rejects_bad_numbers():
    with pytest.raises(ValueError, match="1 <= I <= N"):
        sharding.shard([], 0, 2)
    with pytest.raises(ValueError, match="1 <= I <= N"):
        sharding.shard([], 3, 2)
    with pytest.raises(ValueError, match="shard count must be >= 1"):
        sharding.assign([], 0)
    assert sharding.shard([], 1, 1) == []
    assert sharding.assign([], 3) == [[], [], []]


def study_full():
    return list(load_profile("study-full").scenarios)


def test_a_longest_shard_cuts_an_engines_scenarios_into_pieces_that_fit():
    """study-full's largest engine key runs for days on one H100's cost model: at 6 hours a piece its
    scenarios spread over shards, each piece within 6 hours unless it is one scenario, each with the
    references it needs, and every scenario still runs once."""
    scenarios = study_full()
    max_s = 6 * 3600
    units = sharding.units(scenarios)
    longest = max(units, key=lambda u: u.cost)
    assert longest.cost > 4 * max_s
    cut = sharding.pieces(longest, max_s)
    assert len(cut) > 1 and [s for p in cut for s in p.scenarios] == list(longest.scenarios)
    for piece in cut:
        assert piece.cost <= max_s or len(piece.scenarios) == 1
        wanted = {s.reference_id for s in piece.scenarios}
        assert {r.id for r in piece.references} == wanted & {r.id for r in longest.references}
    assert sharding.pieces(longest, None) == [longest] == sharding.pieces(longest, longest.cost)
    count = sum(len(sharding.pieces(u, max_s)) for u in units)  # a shard a piece
    shards = sharding.assign(scenarios, count, max_s)
    sd = [s.id for part in shards for s in part if not s.method.is_reference]
    assert sorted(sd) == sorted(s.id for s in scenarios if not s.method.is_reference)  # each SD scenario once
    homes = {i for i, part in enumerate(shards) for s in part if s.engine_key == longest.engine_key}
    assert len(homes) > 1  # the engine key now starts on several shards
    for part in shards:  # references measured beside what needs them
        assert {s.reference_id for s in part} & {s.id for s in scenarios} <= {s.id for s in part}
    for part in shards:  # none longer, but where a scenario alone is longer
        assert sharding.group_cost(part) <= max_s or len([s for s in part if not s.method.is_reference]) == 1
    assert [sharding.shard(scenarios, i, count, max_s) for i in (1, 2)] == shards[:2]


@pytest.mark.parametrize("hours", [0, -1, float("nan"), float("inf"), 8761])
def test_max_shard_hours_rejects_what_is_no_length(hours):
    with pytest.raises(ValueError, match="--max-shard-hours: expected hours above 0"):
        sharding.parse_max_shard_hours(hours)
    assert sharding.parse_max_shard_hours(0.5) == 1800
