"""Headroom of traced scenarios (analysis/headroom.py) and the simulator's adaptive-proposer rule, on
constructed traces: the same method simulated under the fitted cost, its oracle, the combined
oracle, and no bound where the acceptance is not known at every position."""

from __future__ import annotations

import numpy as np
import pytest
from test_cost_fit import EAGLE3, NGRAM, traced

from specperf.analysis import headroom, simulate
from specperf.analysis.traces import request_acceptance
from specperf.profiles.scenarios import REFERENCE_METHOD, Method
from specperf.records import Metric, RequestTrace
from specperf.report.traces import trace_views

DRAFT = Method(label="draft-k3", name="draft_model", params={"num_speculative_tokens": 3, "model": "d"})
ADAPTIVE = Method(
    label="adaptive-k3",
    name="adaptive",
    params={"num_speculative_tokens": 3, "model": "d", "prompt_lookup_min": 3, "prompt_lookup_max": 7},
)
# Per output position: n-gram proposes in the first half only; the draft model accepts a little everywhere.
NGRAM_ACC = [4, 5, 0, 6, 3, 1, 2, 4] * 4 + [0] * 32
DRAFT_ACC = [2, 1, 2, 1, 3, 1, 2, 1] * 8


def with_requests(result, measured: float):
    result.trace.requests = [
        RequestTrace(
            request_id=f"r{i}",
            drafted=[3],
            accepted=[1],
            ngram_acc=NGRAM_ACC,
            draft_acc=DRAFT_ACC if result.scenario.method.name != "ngram" else [],
            prompt_len=200,
        )
        for i in range(2)
    ]
    result.metrics["speedup"] = Metric(value=measured, samples=[measured])
    return result


def run():
    return [
        traced(REFERENCE_METHOD),
        with_requests(traced(NGRAM, seed=1), 1.3),
        with_requests(traced(DRAFT, seed=2), 0.9),
        with_requests(traced(ADAPTIVE, seed=3), 1.1),
        with_requests(traced(EAGLE3, seed=4), 1.2),
    ]


DRAFT_K1 = Method(label="draft-k1", name="draft_model", params={"num_speculative_tokens": 1, "model": "d"})


def swept_run():
    """run() with the draft model also at k 1: a traced sweep, which the held-out check needs."""
    return run() + [with_requests(traced(DRAFT_K1, seed=5), 0.95)]


def test_each_traced_method_is_simulated_under_the_fitted_cost_with_its_bounds():
    results = run()
    rows = {row.scenario_id: row for row in headroom.headroom(results)}
    assert len(rows) == 4  # the reference has none
    draft = rows[results[2].id]
    requests = request_acceptance(results[2])
    cost = headroom.fit_costs(results)[0].step_cost("draft_model")
    assert draft.simulated == pytest.approx(
        simulate.speedups(requests, "draft", "k3", [4], cost, "gsm8k", True, simulate.MEASURED_FORM)[4]
    )
    assert draft.measured == 0.9 and draft.oracle > draft.simulated
    assert draft.combined >= draft.oracle and draft.adaptive is not None
    assert draft.step_error < 1e-3 and draft.reference_error < 1e-3  # noiseless constructed steps
    assert draft.speedup_error == draft.step_error + draft.reference_error
    assert draft.within_error == (abs(draft.simulated / 0.9 - 1) <= draft.speedup_error)
    assert set(draft.curve) == {4} and set(draft.curve[4]) == {"simulated", "oracle", "combined", "adaptive"}
    assert draft.k == 3
    assert draft.best_k == simulate.best_k(requests, "draft", (4,), cost, "gsm8k", True, simulate.MEASURED_FORM)[4]
    assert draft.held_out is None  # no other k of its sweep
    assert draft.best_k.speedup >= draft.simulated and draft.best_k.oracle == draft.oracle
    ngram = rows[results[1].id]  # no draft model's acceptance: no combined bound
    assert ngram.simulated is not None and ngram.combined is None and ngram.oracle >= ngram.simulated
    adaptive = rows[results[3].id]
    assert adaptive.simulated == pytest.approx(adaptive.adaptive) and adaptive.step_error is None
    eagle = rows[results[4].id]
    assert eagle.simulated is None and "hidden states" in eagle.note


def test_the_report_shows_headroom_and_draws_the_bounds():
    views = trace_views(swept_run())
    assert len(views.headroom) == 5 and views.to_json()["headroom"][0]["id"]
    draft = next(h for h in views.headroom if "-draft-k3-" in h["id"])
    assert draft["k"] == 3 and 1 <= draft["best_k"]["k"] <= 5 and draft["held_out"] is not None
    from specperf import report
    from specperf.report.loading import RunData

    page = report.render_html(report.build_view(RunData(run_dirs=[], results=swept_run())))
    assert "<th>best k (simulated)</th>" in page and "<th>held-out error</th>" in page
    assert f"k={draft['best_k']['k']}: " in page and "(held-out error " in page
    page = report.render_html(report.build_view(RunData(run_dirs=[], results=run())))
    assert "not shown: no held-out error" in page and "(held-out error " not in page  # no sweep: no best k
    curves = views.bound_curves()
    assert all(curve for curve in curves.values()) and len(curves) == 4  # EAGLE-3 has no curve


def test_the_adaptive_rule_takes_ngram_where_it_proposes_and_prices_each_step_by_its_drafter():
    cost = simulate.LLAMA_8B_H100
    always = simulate.RequestAcceptance("a", 100, {"ngram": [3] * 40, "draft": [1] * 40})
    never = simulate.RequestAcceptance("b", 100, {"ngram": [0] * 40, "draft": [2] * 40})
    assert simulate.adaptive(always) == [3] * 40 and simulate.adaptive(never) == [2] * 40
    batches = [1, 8]
    assert simulate.speedups([always], "adaptive", "k3", batches, cost, known_misses=True) == pytest.approx(
        simulate.speedups([always], "ngram", "k3", batches, cost, known_misses=True)
    )
    assert simulate.speedups([never], "adaptive", "k3", batches, cost) == pytest.approx(
        simulate.speedups([never], "draft", "k3", batches, cost)
    )


def test_known_misses_draw_nothing():
    path = simulate.trajectory([1, 1, 0, 1] * 5, "k3", ngram=False)
    assert not path.maybe_unmatched.any() and list(path.positions[:3]) == [1, 2, 3]
    drawn = simulate.trajectory([1, 1, 0, 1] * 5, "k3", ngram=True)
    assert drawn.maybe_unmatched.sum() == np.sum(np.array(drawn.verified) == 4)


def test_the_speedup_chart_draws_each_bound_once():
    from specperf.report.charts import method_colors, speedup_charts
    from specperf.report.view import scenario_view

    results = run()
    views = [scenario_view(r, None) for r in results]
    (chart,) = speedup_charts(views, method_colors(views), {}, trace_views(results).bound_curves())
    labels = [entry["label"] for entry in chart["legend"]]
    assert {"ngram-k3 oracle", "draft-k3 oracle", "adaptive-k3 oracle"} <= set(labels)
    # the draft model's and the adaptive proposer's requests share one combined oracle: drawn once
    assert sum(label.endswith("combined oracle") for label in labels) == 1


def test_specperf_simulate_prints_the_best_k_beside_each_headroom_row(tmp_path, capsys):
    from test_report import make_run

    from specperf import cli

    results = swept_run()
    assert cli.main(["simulate", "--fit-from", str(make_run(tmp_path / "run", results))]) == 0
    out = capsys.readouterr().out
    rows = {row.scenario_id: row for row in headroom.headroom(results)}
    draft = rows[results[2].id]
    line = next(line for line in out.splitlines() if line.startswith(results[2].id))
    assert f"k{draft.best_k.k} {draft.best_k.speedup:.2f}x" in line and "best k" in out
    assert f"{draft.held_out:+.1%}" in line
    ngram = next(line for line in out.splitlines() if line.startswith(results[1].id))
    assert ngram.split()[3] == "-" and "k" not in ngram.split()[-2]  # no held-out error, no best k


def test_the_simulator_is_checked_on_a_k_it_did_not_see():
    """Each k of a traced sweep predicted from the other's steps and acceptance alone: the k 1 run's
    own steps may be anything, its prediction from k 3 stays the same."""
    from specperf.analysis.held_out import held_out, worst_error

    results = swept_run()
    k3, k1 = results[2], results[5]
    rows = {(r.scenario_id, r.fit_k): r for r in held_out(results)}
    assert set(rows) == {(k1.id, 3), (k3.id, 1)}
    cost = headroom.fit_costs([k3, results[0]])[0].step_cost("draft_model")
    expected = simulate.speedups(
        request_acceptance(k3), "draft", "k1", [4], cost, "gsm8k", True, simulate.MEASURED_FORM
    )[4]
    row = rows[k1.id, 3]
    assert row.simulated == pytest.approx(expected) and row.measured == 0.95
    assert row.error == pytest.approx(expected / 0.95 - 1) and worst_error(list(rows.values()), k1.id) == row.error
    k1.trace.step_us = {name: [v * 3 for v in values] for name, values in k1.trace.step_us.items()}
    assert {r.scenario_id: r.simulated for r in held_out(results)}[k1.id] == pytest.approx(expected)
