"""The step-cost fit (analysis/cost_fit.py) on traced steps constructed from a known cost: the fit
recovers it, states its error, and turns into the simulator's StepCost."""

from __future__ import annotations

import numpy as np
import pytest
from records import make_record, make_scenario
from test_report import make_run

from specperf import cli
from specperf.analysis import cost_fit
from specperf.profiles.scenarios import REFERENCE_METHOD, Method
from specperf.records import Trace

NGRAM = Method(label="ngram-k3", name="ngram", params={"num_speculative_tokens": 3})
EAGLE3 = make_scenario().method
TRUE = {
    "kv": 2e-6,
    "token": 5e-4,
    "fixed": 3e-3,
    "draft_kv": 1e-6,
    "draft_token": 2e-3,  # per drafted token: a learned drafter's k passes one after another
    "share": 0.02,
    "rest": 4e-4,
    "rest_token": 3e-5,  # sampling and bookkeeping of each verified position
}


def traced(method: Method, noise: float = 0.0, seed: int = 0):
    """Decode steps of a batch of 4 at growing KV sizes after one prefill step of 400 tokens (which
    only the forward's fit takes: the simulator prices prefill with it)."""
    rng = np.random.default_rng(seed)
    requests = np.full(40, 4)
    per_request = rng.integers(1, 5, 40) if method.name != "none" else np.ones(40, int)
    tokens, kv = requests * per_request, 400 + np.cumsum(requests * per_request)
    forward = TRUE["kv"] * kv + TRUE["token"] * tokens + TRUE["fixed"]
    draft = {"none": 0 * kv, "ngram": TRUE["share"] * forward}.get(
        method.name, TRUE["draft_kv"] * kv + TRUE["draft_token"] * (per_request - 1)
    )
    forward, draft = forward * (1 + noise * rng.standard_normal(40)), draft * (1 + noise * rng.standard_normal(40))
    sample, rest = np.full(40, 1e-4), TRUE["rest"] + TRUE["rest_token"] * tokens
    total = forward + draft + sample + rest
    prefill = TRUE["kv"] * 400 + TRUE["token"] * 400 + TRUE["fixed"]
    first = {"total": prefill + 1e-4 + TRUE["rest"], "draft": 0.0, "forward": prefill, "sample": 1e-4}
    step_us = {
        name: [int(round(first[name] * 1e6))] + [int(round(v * 1e6)) for v in values]
        for name, values in (("total", total), ("draft", draft), ("forward", forward), ("sample", sample))
    }
    result = make_record(make_scenario(method).replace(trace=True))
    result.trace = Trace(
        step_us=step_us,
        step_batch={
            "tokens": [400] + list(map(int, tokens)),
            "kv_tokens": [400] + list(map(int, kv)),
            "requests": [4] + list(map(int, requests)),
        },
        steps=41,
    )
    return result


def test_the_fit_recovers_a_known_step_cost():
    (fitted,) = cost_fit.fit_costs([traced(REFERENCE_METHOD), traced(NGRAM, seed=1), traced(EAGLE3, seed=2)])
    kv, token, fixed = fitted.forward.coefficients
    assert (kv, token, fixed) == pytest.approx((TRUE["kv"], TRUE["token"], TRUE["fixed"]), rel=1e-3)
    assert fitted.forward.error < 1e-3 and fitted.forward.steps == 123  # the prefill steps too
    assert fitted.drafts["ngram"].coefficients == pytest.approx((TRUE["share"],), rel=1e-3)
    assert fitted.drafts["eagle3"].coefficients == pytest.approx((TRUE["draft_kv"], TRUE["draft_token"]), rel=1e-3)
    assert fitted.rest.coefficients == pytest.approx((TRUE["rest_token"], TRUE["rest"] + 1e-4), rel=1e-3)
    cost = fitted.step_cost("eagle3")
    assert cost.overhead == pytest.approx(TRUE["rest"] + 1e-4, rel=1e-3)  # sampling is part of the rest
    assert cost.overhead_token == pytest.approx(TRUE["rest_token"], rel=1e-3)
    # every learned coefficient lands in its own StepCost field
    assert (cost.target_kv, cost.target_token, cost.target_fixed) == pytest.approx(
        (TRUE["kv"], TRUE["token"], TRUE["fixed"]), rel=1e-3
    )
    # per drafted token, in the study's form: per verified token, less one token's cost
    assert (cost.draft_kv, cost.draft_token, cost.draft_fixed) == pytest.approx(
        (TRUE["draft_kv"], TRUE["draft_token"], -TRUE["draft_token"]), rel=1e-3
    )
    assert cost.ngram_share == pytest.approx(TRUE["share"], rel=1e-3)  # the combined oracle drafts at its cost
    ngram = fitted.step_cost("ngram")
    assert ngram.ngram_share == pytest.approx(TRUE["share"], rel=1e-3)
    assert (ngram.draft_kv, ngram.draft_token, ngram.draft_fixed) == (0.0, 0.0, 0.0)  # n-gram has no learned draft


def test_only_n_grams_fitted_share_prices_n_gram_drafting(monkeypatch):
    """Another model-free method fitted as a share of the forward (drafts of its own, at a cost of
    its own) never stands in for n-gram's share, whichever comes first."""
    from specperf.methods import METHODS, MODEL_FREE, SDMethod

    monkeypatch.setitem(
        METHODS, "lookahead", SDMethod("lookahead", "lookahead", "lookahead", MODEL_FREE, drafting_fit="share")
    )
    share = cost_fit.LinearFit((0.5,), 0.0, 40)
    (fitted,) = cost_fit.fit_costs([traced(REFERENCE_METHOD), traced(NGRAM, seed=1)])
    fitted = cost_fit.FittedCost(fitted.model, fitted.forward, fitted.rest, {"lookahead": share, **fitted.drafts})
    assert fitted.step_cost("eagle3").ngram_share == pytest.approx(TRUE["share"], rel=1e-3)
    alone = cost_fit.FittedCost(fitted.model, fitted.forward, fitted.rest, {"lookahead": share})
    assert alone.step_cost("eagle3").ngram_share == 0.0


def test_the_fit_states_its_error_on_noisy_steps():
    (fitted,) = cost_fit.fit_costs([traced(REFERENCE_METHOD, noise=0.05), traced(EAGLE3, noise=0.05, seed=3)])
    assert 0.02 < fitted.forward.error < 0.1  # about the 5% noise put in
    assert fitted.forward.coefficients[1] == pytest.approx(TRUE["token"], rel=0.3)


def test_results_without_batch_counts_are_left_out():
    untraced = make_record()
    old = traced(EAGLE3)
    old.trace = old.trace.model_copy(update={"step_batch": {}})
    assert cost_fit.fit_costs([untraced, old]) == []


def test_specperf_simulate_prints_the_fit_of_a_run(tmp_path, capsys):
    run = make_run(tmp_path / "run", [traced(REFERENCE_METHOD), traced(EAGLE3, seed=2)])
    assert cli.main(["simulate", "--fit-from", str(run)]) == 0
    out = capsys.readouterr().out
    assert "tiny-llama: target forward = 2e-06 s x KV tokens + 0.0005 s x tokens + 0.003 s (error 0.0%" in out
    assert "drafting, eagle3: 1e-06 s x KV tokens + 0.002 s x drafted tokens per request" in out
    plain = make_run(tmp_path / "plain", [make_record()])
    assert cli.main(["simulate", "--fit-from", str(plain)]) == 2
    assert "no traced results with per-step batch counts in" in capsys.readouterr().err
    assert cli.main(["simulate", "--fit-from", str(tmp_path)]) == 2  # not a run directory: named
    assert "not a run directory" in capsys.readouterr().err
