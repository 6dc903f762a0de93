"""The speedup simulator (analysis/simulate.py) on constructed traces, with step costs simple enough
to count by hand; and `specperf simulate` over files in the study's format.

How closely it reproduces the study's own simulator (SpecDecode-Bench/simulator) on the released
traces is benchmarks/simulate_vs_study.py's to show (docs/methodology/simulator.md), not
these tests'."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specperf import cli
from specperf.analysis import simulate, study_traces
from specperf.analysis.simulate import RequestAcceptance, StepCost

# every forward 1 s, nothing else costs: latency counts target forwards
STEPS_ONLY = StepCost(
    target_kv=0, target_token=0, target_fixed=1.0, draft_kv=0, draft_token=0, draft_fixed=0, ngram_share=0, overhead=0
)


def request(acc_len, prompt_len=10, name="r0", proposer="eagle"):
    return RequestAcceptance(name, prompt_len, {proposer: acc_len})


def test_a_trajectory_steps_by_what_each_position_would_accept():
    acc = [3, 2, 1, 1, 4, 1, 1, 1]  # 8 output tokens; the first comes from the prefill
    oracle = simulate.trajectory(acc, "oracle", ngram=False)
    # output positions 1, 4, 5: a step at position p produces acc[p - 1]
    assert list(oracle.verified) == [3, 1, 4] and list(oracle.produced) == [3, 1, 4]
    k1 = simulate.trajectory(acc, "k1", ngram=False)
    assert list(k1.verified) == [2] * 5 and list(k1.produced) == [2, 1, 1, 2, 1]
    ngram_k1 = simulate.trajectory(acc, "k1", ngram=True)
    assert list(ngram_k1.maybe_unmatched) == [False, True, True, False, True]


def test_a_known_ngram_miss_is_one_token_without_drafting_in_every_mode():
    known = simulate.trajectory([0, 0, 3, 1, 1, 1, 1], "k3", ngram=True)
    assert list(known.verified) == [1, 1, 4, 4] and list(known.produced) == [1, 1, 3, 1]
    assert list(known.maybe_unmatched) == [False, False, False, True]  # a rejected draft: the study draws


def test_speedup_counts_forwards_when_only_forwards_cost():
    acc = [3, 2, 1, 1, 4, 1, 1, 1]
    # without SD: the prefill and 7 decode steps; oracle: the prefill and 3 steps; k=1: 5 steps
    got = simulate.speedups([request(acc)], "eagle", "oracle", (1, 4), cost=STEPS_ONLY)
    assert got == {1: pytest.approx(8 / 4), 4: pytest.approx(8 / 4)}
    assert simulate.speedups([request(acc)], "eagle", "k1", (1,), cost=STEPS_ONLY)[1] == pytest.approx(8 / 6)


def test_the_rest_of_a_step_is_priced_per_position_it_samples():
    """Without SD a decode step samples one position per request; with SD every verified one, and a
    prefill one per request: k=1 on 8 tokens verifies 2 a step in 5 steps (10 positions) where no SD
    samples 7, each prefill samples 1."""
    acc = [3, 2, 1, 1, 4, 1, 1, 1]
    per_position = StepCost(**{**STEPS_ONLY.__dict__, "overhead_token": 0.5})
    got = simulate.speedups([request(acc)], "eagle", "k1", (1,), cost=per_position)[1]
    assert got == pytest.approx((8 + 0.5 * 8) / (6 + 0.5 * 11))


def test_nothing_accepted_makes_drafting_a_pure_loss():
    rejected = [request([1] * 50)]
    for mode in simulate.MODES:
        assert simulate.speedups(rejected, "eagle", mode, (1, 64))[1] < 1.0


def test_larger_batches_gain_less_and_the_oracle_bounds_fixed_k():
    requests = [request(list(np.random.default_rng(i).integers(1, 6, 200)), name=f"r{i}") for i in range(5)]
    by_mode = {mode: simulate.speedups(requests, "eagle", mode) for mode in simulate.MODES}
    for mode, values in by_mode.items():
        assert values[1] > values[128], mode  # verification grows compute-bound
    for batch in simulate.BATCH_SIZES:
        assert by_mode["oracle"][batch] >= max(by_mode[m][batch] for m in ("k1", "k3", "k5"))


def test_the_combined_oracle_takes_the_better_proposer_at_each_position():
    both = RequestAcceptance("r", 10, {"ngram": [1, 1, 1, 4, 1, 1, 1, 1, 1], "eagle": [3, 1, 1, 1, 1, 1, 1, 1]})
    assert simulate.combined(both) == [3, 1, 1, 4, 1, 1, 1, 1]  # as long as the shorter
    best = simulate.speedups([both], "combined", "oracle", (1,))[1]
    assert best > simulate.speedups([both], "ngram", "oracle", (1,))[1]
    assert best > simulate.speedups([both], "eagle", "oracle", (1,))[1]


def test_ngram_without_a_match_costs_no_drafting():
    cost = StepCost(
        target_kv=0,
        target_token=0,
        target_fixed=1.0,
        draft_kv=0,
        draft_token=0,
        draft_fixed=0,
        ngram_share=0.5,
        overhead=0,
    )
    # oracle: a position whose draft would be rejected verifies one token, and n-gram drafted nothing
    assert simulate.speedups([request([1] * 5, proposer="ngram")], "ngram", "oracle", (1,), cost=cost)[1] == 1.0
    # the combined oracle prices drafting at n-gram's share in every step, as the study's simulator does
    both = RequestAcceptance("r", 10, {"ngram": [1] * 5, "eagle": [1] * 5})
    assert simulate.speedups([both], "combined", "oracle", (1,), cost=cost)[1] == pytest.approx(5 / 7)


def study_line(name, acc_ngram, acc_eagle, prompt_len=12):
    return json.dumps(
        {
            "id": name,
            "prompt_token_ids": list(range(prompt_len)),
            "generated_token_ids": list(range(len(acc_eagle))),
            "acc_eagle": {"acc_len": acc_eagle},
            "acc_ngram": {"acc_len": acc_ngram},
        }
    )


def test_study_traces_are_read_and_sampled_as_the_study_draws_them(tmp_path):
    path = tmp_path / "combined_gsm8k.jsonl"
    path.write_text("\n".join(study_line(str(i), [1, 2, 1], [2, 1, 1]) for i in range(400)) + "\n")
    requests = study_traces.read_study_traces(path)
    assert len(requests) == 400 and requests[0].prompt_len == 12 and requests[0].acc_len["eagle"] == [2, 1, 1]
    sample = study_traces.study_sample(requests)
    import random

    random.seed(42)
    assert [r.id for r in sample] == [r.id for r in random.sample(requests, k=300)]


def test_trace_lines_of_one_proposer_and_eagle3_ground_truth_are_read_as_the_study_reads_them(tmp_path):
    path = tmp_path / "combined_cnn.jsonl"
    single = {"id": "a", "prompt_token_ids": [1, 2], "generated_token_ids": [1, 2, 3], "acc": {"acc_len": [2, 1, 1]}}
    three = {**single, "id": "b", "acc_eagle_three": [3, 1, 1]}
    path.write_text(json.dumps(single) + "\n" + json.dumps(three | {"acc_ngram": {"acc_len": [1, 1, 1]}}) + "\n")
    a, b = study_traces.read_study_traces(path)
    # request.py: "acc" stands for acc_ngram and acc_eagle where either is missing
    assert a.acc_len == {"ngram": [2, 1, 1], "eagle": [2, 1, 1]}
    assert b.acc_len == {"ngram": [1, 1, 1], "eagle": [2, 1, 1], "eagle3": [3, 1, 1]}
    only_three = RequestAcceptance("c", 2, {"ngram": [1, 1, 1], "eagle3": [3, 1, 1]})
    assert simulate.combined(only_three) == [3, 1, 1]  # the study's COMBINE_NGRAM_EAGLE_THREE


def test_the_three_speedups_are_the_studys_throughput_request_and_latency_ratios():
    """Per request, latency without SD and with (each priced as the tests below check by hand); the
    three figures aggregate them as simulator.py's simulate_like_experiment does."""
    short, long = request([3, 1, 1, 1], prompt_len=40, name="short"), request([1, 1, 1, 4, 1, 1, 1, 1], name="long")
    got = simulate.simulate_speedups([short, long], "eagle", "oracle", (2,), cost=EVERY_TERM)[2]
    rng = np.random.default_rng(0)
    paths = [(r.prompt_len, simulate.trajectory(r.acc_len["eagle"], "oracle", ngram=False)) for r in (short, long)]
    without = np.array([simulate.baseline_latency(n, p.length, 2, EVERY_TERM) for n, p in paths])
    with_sd = np.array([simulate.sd_latency(n, p, 2, EVERY_TERM, "learned", 0.2, rng) for n, p in paths])
    tokens = np.array([2 * p.length for _, p in paths], float)
    assert got.throughput == pytest.approx(np.mean(tokens / with_sd) / np.mean(tokens / without))
    assert got.per_request == pytest.approx(np.mean(without / with_sd))
    assert got.latency == pytest.approx(without.sum() / with_sd.sum())
    assert len({round(got.throughput, 6), round(got.per_request, 6), round(got.latency, 6)}) == 3


def test_the_combined_oracle_pays_the_switching_cost_where_the_better_proposer_changes():
    # positions 1, 4, 5, 6: n-gram wins at 1 (3 >= 1), EAGLE at 4 (2 > 1), n-gram at 6 (tie): two switches
    both = RequestAcceptance("r", 10, {"ngram": [3, 1, 1, 1, 1, 1, 1], "eagle": [1, 1, 1, 2, 1, 1, 1]})
    path = simulate.trajectory(simulate.combined(both), "oracle", ngram=False)
    assert list(path.positions) == [1, 4, 6] and simulate.switches(both, path) == 2
    free = simulate.speedups([both], "combined", "oracle", (1,), cost=STEPS_ONLY)[1]
    costly = StepCost(**{**STEPS_ONLY.__dict__, "switching": 0.5})
    assert simulate.speedups([both], "combined", "oracle", (1,), cost=costly)[1] == pytest.approx(
        free * 4 / (4 + 2 * 0.5)
    )
    assert simulate.LLAMA_8B_H100.switching == 0.0  # the study's combined_switching_overhead


def test_a_bad_trace_line_is_named(tmp_path):
    path = tmp_path / "combined_cnn.jsonl"
    path.write_text(study_line("0", [1], [1]) + '\n{"id": 1}\n')
    with pytest.raises(ValueError, match=r"combined_cnn.jsonl:2: not a study trace line"):
        study_traces.read_study_traces(path)


def test_cli_prints_every_mode_and_batch_size(tmp_path, capsys):
    lines = [study_line(str(i), [1 + i % 3] * 40, [1 + (i + 1) % 4] * 40) for i in range(20)]
    (tmp_path / "combined_gsm8k.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "table.json"
    assert (
        cli.main(
            [
                "simulate",
                "--study-traces",
                str(tmp_path),
                "--datasets",
                "gsm8k",
                "--batch-sizes",
                "1",
                "8",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "gsm8k          combined  oracle" in table
    rows = json.loads(out.read_text())
    assert [(r["proposer"], r["mode"]) for r in rows] == [("eagle", m) for m in simulate.MODES] + [
        ("ngram", m) for m in simulate.MODES
    ] + [("combined", "oracle")]
    assert all(set(r["speedup"]) == set(r["per_request"]) == set(r["latency"]) == {"1", "8"} for r in rows)
    assert table.count("request mean") == table.count("latency") == len(rows)  # beside each throughput row


def test_cli_names_a_missing_trace_file(tmp_path, capsys):
    assert cli.main(["simulate", "--study-traces", str(tmp_path), "--datasets", "cnn"]) == 2
    assert "combined_cnn.jsonl: no such trace file" in capsys.readouterr().err


@pytest.mark.parametrize("size", ["0", "-1", "1000001"])
def test_cli_refuses_a_batch_size_out_of_range_in_one_line(tmp_path, capsys, size):
    """0 once printed nan, -1 a ValueError's traceback."""
    assert cli.main(["simulate", "--study-traces", str(tmp_path), "--batch-sizes", "1", size]) == 2
    assert capsys.readouterr().err == f"specperf: error: --batch-sizes: {size} is not a batch size from 1 to 1000000\n"


def test_the_curves_page_draws_a_chart_per_dataset_with_a_line_per_mode():
    from specperf.report.study_curves import render_study_curves

    rows = [
        {"dataset": d, "proposer": p, "mode": m, "speedup": {1: 2.0, 8: 1.5, 64: 1.1}}
        for d in ("gsm8k", "<i>cnn</i>")
        for p, m in (("eagle", "k3"), ("ngram", "oracle"), ("combined", "oracle"))
    ]
    page = render_study_curves(rows, "traces/<dir>")
    assert page.count('<svg class="chart"') == 2 and page.count("<polyline") == 6
    assert 'stroke-dasharray="8 3 2 3"' in page and "eagle k3, batch 8: 1.50x" in page
    assert "&lt;i&gt;cnn&lt;/i&gt;" in page and "<i>cnn</i>" not in page and "traces/&lt;dir&gt;" in page


# Every term of the cost model non-zero and of its own size, so that dropping or changing any one
# moves the speedup: a = target per KV token, b = per verified token, c = per forward, d = draft per
# KV token, e = per drafted token, f = per draft, s = n-gram's share, over = overhead per step.
A, B, C, D, E, F, S, OVER = 1e-3, 1e-2, 1.0, 1e-4, 0.1, 0.5, 0.05, 0.25
EVERY_TERM = StepCost(
    target_kv=A, target_token=B, target_fixed=C, draft_kv=D, draft_token=E, draft_fixed=F, ngram_share=S, overhead=OVER
)
PROMPT, ACC = 2, [3, 1, 1, 1]  # 4 output tokens, the first from the prefill


def by_hand_without_sd(n):
    """Prefill (2n prompt tokens), then decode steps at KV 3n, 4n, 5n (2n prompt + n first tokens + ...)."""
    prefill = B * PROMPT * n + C + OVER
    return prefill + sum(A * kv + B * n + C + OVER for kv in (3 * n, 4 * n, 5 * n))


def by_hand_with_sd(n, steps, drafting):
    """Prefill, then each step (KV tokens, tokens verified per copy) with its forward, drafting and overhead."""
    prefill = B * PROMPT * n + C + OVER
    total = prefill
    for kv, verified, draft in steps:
        forward = A * kv + B * verified * n + C
        total += forward + drafting(forward, draft) + OVER
    return total


def learned(forward, draft):
    kv_seen, drafted = draft  # each copy drafts after the others' tokens of this step: mean (n-1)/2 of them
    return D * kv_seen + E * drafted + F


@pytest.mark.parametrize("n", [1, 2, 4])
def test_the_simulator_prices_every_term_of_the_step_cost(n):
    """Oracle: one step verifying 3 tokens per copy; k=1: steps verifying 2, producing 2 then 1.  A
    learned drafter in its last step sees the KV its copy releases (1 + produced + prompt tokens)."""
    base = by_hand_without_sd(n)
    oracle = by_hand_with_sd(n, [(3 * n, 3, (3 * n + (3 - 6) * (n - 1) / 2, 3))], learned)
    k1 = by_hand_with_sd(
        n, [(3 * n, 2, (3 * n + 2 * (n - 1) / 2, 2)), (5 * n, 2, (5 * n + (1 - 6) * (n - 1) / 2, 2))], learned
    )
    ngram_oracle = by_hand_with_sd(n, [(3 * n, 3, None)], lambda forward, _: S * forward)
    ngram_k1 = by_hand_with_sd(n, [(3 * n, 2, None), (5 * n, 2, None)], lambda forward, _: S * forward)
    eagle, ngram = [request(ACC, PROMPT)], [request(ACC, PROMPT, proposer="ngram")]
    assert simulate.speedups(eagle, "eagle", "oracle", (n,), cost=EVERY_TERM)[n] == pytest.approx(
        base / oracle, rel=1e-12
    )
    assert simulate.speedups(eagle, "eagle", "k1", (n,), cost=EVERY_TERM)[n] == pytest.approx(base / k1, rel=1e-12)
    assert simulate.speedups(ngram, "ngram", "oracle", (n,), cost=EVERY_TERM)[n] == pytest.approx(
        base / ngram_oracle, rel=1e-12
    )
    assert simulate.speedups(ngram, "ngram", "k1", (n,), cost=EVERY_TERM, known_misses=True)[n] == pytest.approx(
        base / ngram_k1, rel=1e-12
    )


def test_the_best_k_is_the_fastest_fixed_k_and_shrinks_at_large_batches():
    requests = [request([3, 1, 2, 1, 4, 1, 2, 1] * 20, prompt_len=200, name=f"r{i}") for i in range(2)]
    best = simulate.best_k(requests, "eagle", (1, 128))
    for batch in (1, 128):
        by_k = {k: simulate.speedups(requests, "eagle", f"k{k}", (batch,))[batch] for k in simulate.BEST_K}
        assert best[batch].k == max(by_k, key=by_k.get) and best[batch].speedup == by_k[best[batch].k]
        assert best[batch].oracle == simulate.speedups(requests, "eagle", "oracle", (batch,))[batch]
        assert best[batch].oracle >= best[batch].speedup
    # verifying drafts that will be rejected costs most in a large batch: a smaller k wins there
    assert (best[1].k, best[128].k) == (3, 1)


def test_cli_prints_the_best_k_per_dataset_proposer_and_batch_size(tmp_path, capsys):
    lines = [study_line(str(i), [1 + i % 3] * 40, [3, 1, 2, 1, 4, 1, 2, 1] * 5) for i in range(20)]
    (tmp_path / "combined_gsm8k.jsonl").write_text("\n".join(lines) + "\n")
    args = ["simulate", "--study-traces", str(tmp_path), "--datasets", "gsm8k", "--batch-sizes", "1", "128"]
    assert cli.main([*args, "--best-k"]) == 0
    table = capsys.readouterr().out.split("best k (simulated speedup; the oracle's bound in brackets)")[1]
    requests = study_traces.study_sample(study_traces.read_study_traces(tmp_path / "combined_gsm8k.jsonl"))
    best = simulate.best_k(requests, "eagle", (1, 128), dataset="gsm8k")
    row = next(line for line in table.splitlines() if line.startswith("gsm8k          eagle"))
    assert f"k{best[1].k} {best[1].speedup:.2f} ({best[1].oracle:.2f})" in row
    assert f"k{best[128].k} {best[128].speedup:.2f} ({best[128].oracle:.2f})" in row
    assert any(line.startswith("gsm8k          ngram") for line in table.splitlines())
    assert "combined" not in table  # a fixed k is a single proposer's
