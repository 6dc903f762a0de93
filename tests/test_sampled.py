"""Sampled scenarios: their settings, calls and ids, and their acceptance estimated over requests and
judged on its interval (judge/sampled.py)."""

from __future__ import annotations

import math
import random
import statistics
import textwrap

import pytest
from records import make_record, make_scenario

from specperf.judge import sampled
from specperf.judge.verdicts import compare_sampled, judge
from specperf.records import RequestAcceptance, Sampling
from specperf.records.scenario import REFERENCE_METHOD
from specperf.run.calls import sampled_calls, sampled_params
from specperf.run.engines.protocol import Batch
from specperf.status import IMPROVEMENT, INCONCLUSIVE, INVALID, PASS, REGRESSION

SAMPLED = Sampling(temperature=0.8, top_p=0.95, seed=7)


def independent(metric: str, baseline: float, baseline_se: float, current: float, current_se: float):
    """compare_sampled of two independent samples, each with its own standard error."""
    change = math.log(current / baseline)
    return compare_sampled(metric, baseline, current, change, math.hypot(current_se / current, baseline_se / baseline))


# ---------------------------------------------------------------- settings, ids and calls


def test_a_sampled_scenario_says_so_in_its_id_and_hash_but_not_its_seed():
    greedy = make_scenario()
    sampled_one = greedy.replace(sampling=SAMPLED)
    assert sampled_one.id == greedy.id + "-t0.8-p0.95"
    assert sampled_one.reference_id == greedy.reference_id + "-t0.8-p0.95"  # its no-SD reference samples alike
    assert sampled_one.hash != greedy.hash
    assert sampled_one.engine_key != greedy.engine_key  # its engine counts each request's acceptance
    reference = make_scenario(REFERENCE_METHOD)
    assert reference.replace(sampling=SAMPLED).engine_key == reference.engine_key  # a no-SD engine counts none
    other_seed = greedy.replace(sampling=SAMPLED.model_copy(update={"seed": 8}))
    assert (other_seed.id, other_seed.hash) == (sampled_one.id, sampled_one.hash)  # another sample, same figures
    with_top_k = greedy.replace(sampling=Sampling(temperature=1.0, top_k=50))
    assert with_top_k.id.endswith("-t1-topk50")


def test_greedy_ignores_top_p_and_top_k():
    greedy = make_scenario()
    assert greedy.replace(sampling=Sampling(top_p=0.5, top_k=3)).hash == greedy.hash
    assert Sampling(top_p=0.5).params(3) == {"temperature": 0.0}


def test_each_request_of_a_sampled_round_draws_with_its_own_seed():
    scenario = make_scenario(batch_size=3).replace(sampling=SAMPLED)
    calls = sampled_calls(scenario, [[[1, 2]] * 3, [[3]] * 3])
    assert all(isinstance(call, Batch) for call in calls)
    assert [p["seed"] for call in calls for p in call.params] == [7, 8, 9, 10, 11, 12]
    assert calls[1].params[0] == {"temperature": 0.8, "top_p": 0.95, "top_k": 0, "seed": 10}
    assert [list(call) for call in calls] == [[[1, 2]] * 3, [[3]] * 3]  # a Batch iterates its prompts
    assert sampled_params(make_scenario(), 4) is None
    greedy_calls = [[[1]]]
    assert sampled_calls(make_scenario(), greedy_calls) is greedy_calls


# ---------------------------------------------------------------- counts and figures


def test_a_requests_counts_follow_from_vllms_histogram():
    counts = RequestAcceptance.of_histogram([2, 1, 3], drafted=12)  # k = 2: steps accepting 0, 1, 2 drafts
    assert (counts.steps, counts.drafted, counts.accepted) == (6, 12, 7)
    assert counts.accepted_per_pos == [4, 3]  # position 0 in every step that accepted 1 or 2
    total = counts + RequestAcceptance.of_histogram([1, 0, 0, 1], drafted=6)
    assert (total.steps, total.accepted, total.accepted_per_pos) == (8, 10, [5, 4, 1])


def test_token_and_request_weighting_differ_where_long_requests_accept_less():
    long_poor = RequestAcceptance(steps=90, drafted=270, accepted=90, accepted_per_pos=[60, 20, 10])
    short_good = [RequestAcceptance(steps=10, drafted=30, accepted=25, accepted_per_pos=[10, 9, 6])] * 3
    figures = sampled.acceptance_metrics([long_poor, *short_good])
    assert figures["mean_acceptance_length"].value == pytest.approx(1 + 165 / 120)
    assert figures["request_mean_acceptance_length"].value == pytest.approx(statistics.mean([2.0, 3.5, 3.5, 3.5]))
    assert figures["per_position_acceptance"].value[0] == pytest.approx(90 / 120)
    assert figures["request_per_position_acceptance"].value[0] == pytest.approx((60 / 90 + 3 * 1.0) / 4)
    assert all(figures[name].se is not None for name in figures)


def test_the_bootstrap_error_of_a_mean_over_requests_is_the_textbook_one():
    rng = random.Random(3)
    requests = []
    for _ in range(200):
        steps = rng.randint(5, 40)
        accepted = sum(rng.random() < 0.6 for _ in range(steps))
        requests.append(RequestAcceptance(steps=steps, drafted=steps, accepted=accepted, accepted_per_pos=[accepted]))
    figures = sampled.acceptance_metrics(requests)
    means = [1 + r.accepted / r.steps for r in requests]
    textbook = statistics.stdev(means) / math.sqrt(len(means))
    assert figures["request_mean_acceptance_length"].se == pytest.approx(textbook, rel=0.1)


def test_requests_that_never_drafted_are_left_out_and_one_request_has_no_error():
    alone = RequestAcceptance(steps=4, drafted=12, accepted=6, accepted_per_pos=[3, 2, 1])
    figures = sampled.acceptance_metrics([alone, RequestAcceptance()])
    assert figures["mean_acceptance_length"].value == 2.5
    assert figures["mean_acceptance_length"].se is None
    assert sampled.acceptance_metrics([RequestAcceptance()]) == {}


# ---------------------------------------------------------------- judging on the interval


def test_a_prompts_replicas_are_resampled_together():
    """The study's calls replicate one prompt over the batch: the replicas share it, so where prompts
    differ and a prompt's replicas agree, resampling requests one by one would count each prompt
    four times; resampled together, the error is the prompts' own (about twice as wide)."""
    prompts = [RequestAcceptance(steps=20, drafted=60, accepted=a, accepted_per_pos=[a // 2]) for a in range(5, 45, 4)]
    replicated = [r for r in prompts for _ in range(4)]
    apart, together = sampled.acceptance_metrics(replicated), sampled.acceptance_metrics(replicated, cluster=4)
    alone = sampled.acceptance_metrics(prompts)
    for name in ("mean_acceptance_length", "request_mean_acceptance_length", "draft_acceptance_rate"):
        assert apart[name].value == together[name].value == pytest.approx(alone[name].value)
        assert together[name].se == pytest.approx(alone[name].se, rel=0.15)
        assert together[name].se == pytest.approx(2 * apart[name].se, rel=0.15)
    assert make_scenario(batch_size=4).prompt_replicas == 4
    assert make_scenario(batch_size=4).replace(batching="distinct").prompt_replicas == 1


@pytest.mark.parametrize(
    "baseline, current, se, status",
    [
        (2.0, 1.8, 0.02, REGRESSION),  # all of the interval worse, beyond 5%
        (2.0, 1.99, 0.01, PASS),  # none of it worse than 5%
        (2.0, 1.95, 0.08, INCONCLUSIVE),  # wide: neither shown
        (2.0, 2.3, 0.02, IMPROVEMENT),
    ],
)
def test_a_sampled_figure_is_judged_on_the_interval_of_its_change(baseline, current, se, status):
    verdict = independent("mean_acceptance_length", baseline, se, current, se)
    assert verdict.status == status
    assert verdict.ci_low < verdict.change < verdict.ci_high


def test_a_sampled_figure_without_errors_is_not_judged():
    verdict = compare_sampled("mean_acceptance_length", 2.0, 1.0, None, None)
    assert verdict.status == INVALID and "no error over requests" in verdict.note


def test_simulated_gates_of_sampled_acceptance_keep_false_alarms_rare_and_catch_a_5pct_drop(monkeypatch):
    """Requests drawn as vLLM's rejection sampler draws (each draft accepted with a request's own
    rate); 130 comparisons with the suite's bootstrap (500 resamples each, for time)."""
    monkeypatch.setattr(sampled, "RESAMPLES", 500)
    rng = random.Random(11)

    def run(scale: float, count: int = 64) -> dict:
        requests = []
        for _ in range(count):
            rate = min(0.95, rng.betavariate(6, 4) * scale)  # the spread between prompts
            histogram = [0, 0, 0, 0]
            for _ in range(rng.randint(8, 30)):  # verify steps of one request, k = 3
                accepted = 0
                while accepted < 3 and rng.random() < rate:
                    accepted += 1
                histogram[accepted] += 1
            requests.append(RequestAcceptance.of_histogram(histogram, 3 * sum(histogram)))
        return sampled.acceptance_metrics(requests)["mean_acceptance_length"]

    def flagged(scale: float, gates: int) -> list[str]:
        outcomes = []
        for _ in range(gates):
            base, cur = run(1.0), run(scale)
            outcomes.append(independent("mean_acceptance_length", base.value, base.se, cur.value, cur.se).status)
        return outcomes

    same = flagged(1.0, 100)
    assert same.count(REGRESSION) <= 5  # what fails a run: at most 2.5% expected
    assert same.count(REGRESSION) + same.count(IMPROVEMENT) <= 10
    dropped = flagged(0.85, 30)  # acceptance rate 15% lower: the mean length about 10% lower
    assert sum(s == REGRESSION for s in dropped) >= 27


def draws(rates: list[float], seed: int, steps: int = 20) -> list[RequestAcceptance]:
    """Requests as vLLM's rejection sampler draws them (k = 3, each draft accepted while a uniform
    draw is below the request's rate): a request's draws come from its own seed, as vLLM's do."""
    requests = []
    for place, rate in enumerate(rates):
        rng = random.Random(seed * 1000 + place)
        histogram = [0, 0, 0, 0]
        for _ in range(steps):
            accepted = 0
            while accepted < 3 and rng.random() < rate:
                accepted += 1
            histogram[accepted] += 1
        requests.append(RequestAcceptance.of_histogram(histogram, 3 * steps))
    return requests


def test_the_same_requests_are_judged_request_by_request():
    rates = [random.Random(i).uniform(0.3, 0.8) for i in range(16)]
    same = sampled.paired_changes(draws(rates, seed=1), draws(rates, seed=1))
    assert same["mean_acceptance_length"] == (0.0, 0.0, False)  # an unchanged build: no change, no error
    lower = [rate * 0.9 for rate in rates]  # each draft 10% less likely: the same draws, fewer accepted
    paired_outcomes, independent_outcomes = [], []
    for seed in range(10):
        base, cur = draws(rates, seed), draws(lower, seed)
        change, error, _ = sampled.paired_changes(cur, base)["mean_acceptance_length"]
        paired_outcomes.append(compare_sampled("mean_acceptance_length", 2.0, 1.9, change, error).status)
        other = draws(lower, seed + 100)  # another seed: independent samples of the same two builds
        b, c = sampled.acceptance_metrics(base), sampled.acceptance_metrics(other)
        verdict = independent(
            "mean_acceptance_length",
            b["mean_acceptance_length"].value,
            b["mean_acceptance_length"].se,
            c["mean_acceptance_length"].value,
            c["mean_acceptance_length"].se,
        )
        independent_outcomes.append(verdict.status)
    assert paired_outcomes.count(REGRESSION) >= 9  # the same draws: 16 requests tell
    assert independent_outcomes.count(REGRESSION) <= 5  # other draws: 16 requests seldom tell


def test_a_position_few_requests_reach_is_judged_on_its_relative_change_without_a_warning():
    """Two of eight requests ever accept a third draft: in some resamples neither does, on either
    side, so the third position's log ratio is 0/0 there.  Its change is taken relative to the
    baseline's value, with a finite error (an unchanged build: 0 and 0, a pass), and scipy's
    warning about an interval the suite does not use is not shown."""
    import warnings

    rare = [RequestAcceptance.of_histogram([4, 6, 0, 0], 30)] * 6 + [
        RequestAcceptance.of_histogram([4, 2, 2, 2], 30)
    ] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = sampled.paired_changes(rare, list(rare))
    change, error, linear = same["acceptance_pos2"]
    assert linear and change == 0.0 and error == 0.0
    assert same["mean_acceptance_length"] == (0.0, 0.0, False)
    assert compare_sampled("acceptance_pos2", 0.05, 0.05, change, error, linear=linear).status == PASS


def test_pairs_of_the_same_prompts_with_other_draws_keep_false_alarms_rare(monkeypatch):
    """Drawn with other seeds (or by a vLLM that does not repeat a seed's draws), request i is still
    the same prompt on both sides:
    200 simulated A/A comparisons between unequal prompts, judged request by request (500
    resamples each, for time).  At 24 requests the rule flags a little above its nominal 2.5% a
    side (400 such gates: 3.75% and 2.5%, docs/methodology/sampled.md)."""
    monkeypatch.setattr(sampled, "RESAMPLES", 500)
    rng = random.Random(5)
    statuses = []
    for gate in range(200):
        rates = [rng.uniform(0.1, 0.9) for _ in range(24)]  # prompts that lend themselves unequally
        change, error, _ = sampled.paired_changes(draws(rates, gate), draws(rates, gate + 10_000))[
            "mean_acceptance_length"
        ]
        verdict = compare_sampled("mean_acceptance_length", 2.0, 2.0, change, error, requests=len(rates))
        statuses.append(verdict.status)
    assert statuses.count(REGRESSION) <= 8
    assert statuses.count(REGRESSION) + statuses.count(IMPROVEMENT) <= 16


def test_the_stored_judge_judges_a_sampled_scenarios_acceptance_on_its_interval():
    from specperf.judge.baselines import baseline_from_result

    def result(accepted: int, seed: int = 7):
        record = make_record(make_scenario().replace(sampling=SAMPLED.model_copy(update={"seed": seed})))
        requests = [
            RequestAcceptance(steps=20, drafted=60, accepted=accepted + i % 5, accepted_per_pos=[10, 6, 4])
            for i in range(40)
        ]
        figures = sampled.acceptance_metrics(requests)
        return record.model_copy(update={"metrics": {**record.metrics, **figures}, "request_acceptance": requests})

    def verdict(judged, metric: str = "mean_acceptance_length"):
        return next(m for m in judged.metrics if m.metric == metric)

    baseline = baseline_from_result(result(20))
    assert len(baseline.request_acceptance) == 40
    same = judge(result(20), baseline)  # the same requests: judged request by request, identical exactly
    assert verdict(same).status == PASS and (verdict(same).ci_low, verdict(same).ci_high) == (0.0, 0.0)
    assert "request by request" in verdict(same).note and verdict(same).note.startswith("sampled")
    assert verdict(same, "request_mean_acceptance_length").status == PASS
    worse = judge(result(14), baseline)  # 1 + 16/20 against 1 + 22/20: 14% shorter
    assert verdict(worse).status == REGRESSION
    unpaired = baseline.model_copy(update={"request_acceptance": []})  # a baseline that kept no requests
    apart = judge(result(20, seed=8), unpaired)
    assert verdict(apart).status == PASS and "request by request" not in verdict(apart).note
    assert verdict(apart).ci_low < 0 < verdict(apart).ci_high
    greedy = judge(make_record(make_scenario()), None)
    assert all(not m.note.startswith("sampled") for m in greedy.metrics)
    assert baseline_from_result(make_record(make_scenario())).request_acceptance == []


def test_a_sampled_scenario_gates_on_its_acceptance_lengths_and_a_tolerance_makes_a_position_gate():
    """Its positions and draft rate explain the lengths (shown, failing nothing by default); a
    position that falls while the lengths hold passes, unless the profile gives positions a tolerance."""
    from specperf.judge.baselines import baseline_from_result
    from specperf.judge.rules import Rules

    def result(per_pos: list[int]):
        record = make_record(make_scenario().replace(sampling=SAMPLED))
        requests = [
            RequestAcceptance(steps=20, drafted=60, accepted=sum(per_pos), accepted_per_pos=per_pos) for _ in range(40)
        ]
        figures = sampled.acceptance_metrics(requests)
        return record.model_copy(update={"metrics": {**record.metrics, **figures}, "request_acceptance": requests})

    baseline = baseline_from_result(result([10, 6, 4]))
    shifted = result([11, 6, 3])  # the same length, the third position 25% lower
    judged = judge(shifted, baseline)
    figures = {m.metric: m for m in judged.metrics}
    assert figures["acceptance_pos2"].status == REGRESSION and judged.status == PASS
    assert "informational: explains the acceptance lengths" in figures["acceptance_pos2"].note
    assert "95% over the scenario's 2 acceptance figures" in figures["mean_acceptance_length"].note
    assert not Rules().for_scenario(shifted.scenario).is_informational("request_mean_acceptance_length")
    strict = judge(shifted, baseline, rules=Rules(tolerances={"per_position_acceptance": 0.1}))
    assert strict.status == REGRESSION
    greedy = Rules().for_scenario(make_scenario())
    assert not greedy.is_informational("acceptance_pos2")  # a greedy scenario's exact check: every figure gates


# ---------------------------------------------------------------- profiles


def test_a_profile_samples_every_cell_and_a_cell_overrides_some_settings(tmp_path):
    from test_scenarios import CELL, write_profile

    from specperf.profiles.scenarios import load_profile

    text = CELL.replace("warmup = 1\n", "warmup = 1\nsampling = { temperature = 0.7, top_p = 0.9, seed = 3 }\n")
    text += textwrap.dedent("""
        [[cells]]
        model = "m"
        methods = ["ngram-k3"]
        batch_sizes = [2]
        datasets = ["gsm8k"]
        sampling = { temperature = 1, top_k = 20 }
        """)
    scenarios = {s.id: s for s in load_profile(str(write_profile(tmp_path, text))).scenarios}
    assert scenarios["m-ngram-k3-bs1-gsm8k-t0.7-p0.9"].sampling == Sampling(temperature=0.7, top_p=0.9, seed=3)
    assert "m-nosd-bs1-gsm8k-t0.7-p0.9" in scenarios  # the reference samples as its SD scenarios do
    merged = scenarios["m-ngram-k3-bs2-gsm8k-t1-p0.9-topk20"].sampling
    assert merged == Sampling(temperature=1.0, top_p=0.9, top_k=20, seed=3)


@pytest.mark.parametrize(
    "sampling, words",
    [
        ("{ temperature = -1 }", "profile.sampling: temperature: Input should be greater than or equal to 0, got -1"),
        ("{ top_p = 0 }", "profile.sampling: top_p: Input should be greater than 0, got 0"),
        ("{ temperature = true }", "profile.sampling: temperature: Input should be a valid number, got True"),
        (
            "{ temprature = 1 }",
            "profile.sampling: unknown field 'temprature' (allowed: temperature, top_p, top_k, seed, check_draws)",
        ),
        ('"hot"', "profile.sampling: must be a table, got 'hot'"),
    ],
)
def test_a_malformed_sampling_table_is_one_line_naming_it(tmp_path, sampling, words):
    from test_scenarios import CELL, profile_error

    message = profile_error(tmp_path, CELL.replace("warmup = 1\n", f"warmup = 1\nsampling = {sampling}\n"))
    assert message.endswith(words)


def test_a_baseline_without_errors_takes_this_runs_as_the_history_judge_gives_it():
    """The rolling judge's baseline is the median of the history's runs, without an error of its own."""
    from specperf.judge.verdicts import sampled_verdicts
    from specperf.records import Metric

    current = {"mean_acceptance_length": Metric(value=1.9, samples=[1.9], se=0.01)}
    history = {"mean_acceptance_length": Metric(value=2.0, samples=[2.0, 2.0, 2.0])}
    (verdict,) = sampled_verdicts(["mean_acceptance_length"], current, history)
    assert verdict.status == REGRESSION and "the baseline's error taken as this run's" in verdict.note
    half = (verdict.ci_high - verdict.ci_low) / 2
    assert half == pytest.approx(1.96 * math.sqrt(2) * 0.01 / 1.9 * 0.95, rel=0.05)


# ---------------------------------------------------------------- the report


def test_the_report_shows_a_sampled_scenarios_intervals_and_keeps_it_apart_from_greedy(tmp_path):
    from test_report import html_of, make_run, scenario_detail, section
    from test_report import make_record as report_record

    greedy = report_record(method="ngram", batch_size=4)
    scenario = greedy.scenario.replace(sampling=SAMPLED)
    requests = [
        RequestAcceptance(steps=20, drafted=60, accepted=10 + i % 7, accepted_per_pos=[6, 3, 1]) for i in range(24)
    ]
    figures = sampled.acceptance_metrics(requests)
    hot = greedy.model_copy(update={"scenario": scenario, "metrics": {**greedy.metrics, **figures}})
    html = html_of(make_run(tmp_path / "run", [greedy, hot]))
    detail = scenario_detail(html, scenario.id)
    length, per_request = figures["mean_acceptance_length"], figures["request_mean_acceptance_length"]
    low, high = length.value - 1.96 * length.se, length.value + 1.96 * length.se
    assert (
        f"acceptance length {length.value:.4g} [{low:.4g}, {high:.4g}], per request {per_request.value:.4g} [" in detail
    )
    assert "per request" not in scenario_detail(html, greedy.scenario.id)
    assert "sampled -t0.8-p0.95" in section(html, "acceptance")  # a row of its own: never pooled with greedy


def test_informational_figures_do_not_widen_the_gating_ones():
    from specperf.judge.rules import Rules
    from specperf.judge.verdicts import sampled_verdicts
    from specperf.records import Metric

    names = ["mean_acceptance_length", "acceptance_pos0", "acceptance_pos1"]
    current = {
        "mean_acceptance_length": Metric(value=1.9, samples=[1.9], se=0.01),
        "per_position_acceptance": Metric(value=[0.5, 0.3], samples=[[0.5, 0.3]], se=[0.01, 0.01]),
    }
    every = sampled_verdicts(names, current, current)
    assert "95% over the scenario's 3 acceptance figures" in every[0].note
    rules = Rules(informational=frozenset({"per_position_acceptance"}))
    (length, *_) = sampled_verdicts(names, current, current, rules)
    assert length.note == "sampled: 95.0% interval over requests"


def test_a_rate_that_falls_to_zero_is_judged_on_its_difference():
    from specperf.judge.verdicts import sampled_verdicts
    from specperf.records import Metric

    then = {"per_position_acceptance": Metric(value=[0.5, 0.2], samples=[[0.5, 0.2]], se=[0.005, 0.01])}
    now = {"per_position_acceptance": Metric(value=[0.5, 0.0], samples=[[0.5, 0.0]], se=[0.005, 0.0])}
    verdicts = {v.metric: v for v in sampled_verdicts(["acceptance_pos0", "acceptance_pos1"], now, then)}
    assert verdicts["acceptance_pos1"].status == REGRESSION and verdicts["acceptance_pos1"].change == -1.0
    assert "fell to 0" in verdicts["acceptance_pos1"].note
    assert verdicts["acceptance_pos0"].status == PASS
