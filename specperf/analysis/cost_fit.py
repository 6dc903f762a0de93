"""A step-cost model fitted from traced steps, in the study's simulator's form (simulate.StepCost):
the target forward as a function of the batch's KV-cache tokens and the tokens it verifies, a
learned drafter as a function of KV-cache tokens and the tokens it drafts per request (n-gram: a
share of the forward), and the rest of a step (sampling, scheduling, bookkeeping) as a constant and
a cost per token in the step.

The rest grows with the positions a step samples (SmolLM2 on CPU: about 0.45 ms a position beside
10 ms a step; StepCost.overhead_token).  A constant alone, fitted on one k and its no-SD reference,
priced no SD's steps dear and a larger k's cheap: n-gram at batch 4 predicted 8.5% fast from
another k, 4.8% with the cost per position.

A learned drafter drafts k tokens in k passes one after another, so its time is fitted per drafted
token, without a constant: fitted on the steps of one k, a constant and a per-token cost cannot be
told apart, and the study's form (per verified token plus a constant) then priced k 5 from k 1's
steps a fifth too cheap.  On SmolLM2's draft model, steps of k 1, 3 and 5 pooled: 14 ms a drafted
token, 7% error (22.9% in the study's form); each k alone gives 13.6-15.7 ms.  Each part is
a least-squares fit with
non-negative coefficients (more work never costs less) over the decode steps of every traced
scenario of one target model, and comes with its error: the root-mean-square relative error of
its prediction over those steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from ..methods import method_of
from ..records import ScenarioResult
from .simulate import StepCost


@dataclass(frozen=True)
class LinearFit:
    coefficients: tuple[float, ...]  # one per feature, then the constant
    error: float  # RMS relative error over the fitted steps
    steps: int


def fit_linear(features: np.ndarray, seconds: np.ndarray, constant: bool = True) -> LinearFit:
    """seconds ~ features @ coefficients (+ a constant), coefficients >= 0."""
    design = np.column_stack([features, np.ones(len(seconds))]) if constant else features
    coefficients, _ = nnls(design, seconds)
    predicted, timed = design @ coefficients, seconds > 0
    error = float(np.sqrt(np.mean(((predicted[timed] - seconds[timed]) / seconds[timed]) ** 2))) if timed.any() else 0.0
    return LinearFit(tuple(float(c) for c in coefficients), error, len(seconds))


def decode_steps(result: ScenarioResult, prefill: bool = False) -> dict[str, np.ndarray] | None:
    """The traced round's decode steps (no prompt in the forward; with `prefill`, the prompts' steps
    too): seconds of each part and the batch."""
    trace = result.trace
    if trace is None or not trace.step_batch.get("tokens"):
        return None
    columns = {
        **{p: np.array(v, float) / 1e6 for p, v in trace.step_us.items()},
        **{b: np.array(v, float) for b, v in trace.step_batch.items()},
    }
    per_request = columns["tokens"] / np.maximum(columns["requests"], 1)
    k = int(result.scenario.method.params.get("num_speculative_tokens", 0))
    keep = (columns["requests"] > 0) & ((per_request <= k + 1) | prefill) & (columns["forward"] > 0)
    columns = {name: values[keep] for name, values in columns.items()}
    columns["per_request"] = per_request[keep]
    columns["rest"] = columns["total"] - columns["draft"] - columns["forward"]  # sampling included
    return columns if keep.any() else None


def _ngram_share(method: str) -> bool:
    """Whether `method`'s fitted drafting cost is n-gram's share of the forward: it drafts by vLLM's
    n-gram rule, and its drafting is fitted as a share (another model-free method may be fitted as a
    share too, at a cost of its own)."""
    traits = method_of(method)
    return traits.ngram_drafts and traits.drafting_fit == "share"


@dataclass(frozen=True)
class FittedCost:
    model: str
    forward: LinearFit  # kv_tokens, tokens
    rest: LinearFit  # tokens in the step, then the constant
    drafts: dict[str, LinearFit]  # method: learned (kv_tokens, drafted tokens per request); ngram: share

    def step_cost(self, method: str) -> StepCost:
        """The study's StepCost for one of the fitted methods.  n-gram's share comes with every one
        (the combined oracle drafts at n-gram's cost); the adaptive proposer drafts with n-gram or
        the draft model, and takes the draft model's fit."""
        kv, token, fixed = self.forward.coefficients
        rest_token, rest_fixed = self.rest.coefficients
        traits = method_of(method)
        learned_fit = self.drafts.get(traits.fit_from or method)
        kv_cost, per_draft = (
            learned_fit.coefficients if learned_fit is not None and traits.drafting_fit != "share" else (0.0, 0.0)
        )
        # per drafted token in the study's form, per verified token (drafts + 1): less one token's cost
        learned = (kv_cost, per_draft, -per_draft)
        ngram = next((fit for name, fit in self.drafts.items() if _ngram_share(name)), None)
        share = ngram.coefficients[0] if ngram is not None else 0.0
        return StepCost(
            target_kv=kv,
            target_token=token,
            target_fixed=fixed,
            draft_kv=learned[0],
            draft_token=learned[1],
            draft_fixed=learned[2],
            ngram_share=share,
            overhead=rest_fixed,
            overhead_token=rest_token,
        )


def fit_costs(results: list[ScenarioResult]) -> list[FittedCost]:
    """One fitted cost per target model among the traced results."""
    by_model: dict[str, list[tuple[str, dict[str, np.ndarray]]]] = {}
    with_prefill: dict[str, list[dict[str, np.ndarray]]] = {}
    for result in results:
        if (steps := decode_steps(result)) is not None:
            by_model.setdefault(result.scenario.model.name, []).append((result.scenario.method.name, steps))
            with_prefill.setdefault(result.scenario.model.name, []).append(decode_steps(result, prefill=True))
    fitted = []
    for model, scenarios in sorted(by_model.items()):
        pooled = {name: np.concatenate([s[name] for _, s in scenarios]) for name in scenarios[0][1]}
        everything = {
            name: np.concatenate([s[name] for s in with_prefill[model]]) for name in ("kv_tokens", "tokens", "forward")
        }
        drafts = {}
        for method in sorted({m for m, _ in scenarios if method_of(m).drafting_fit}):  # none for mixed steps
            steps = {name: np.concatenate([s[name] for m, s in scenarios if m == method]) for name in pooled}
            if method_of(method).drafting_fit == "share":  # a share of the forward
                drafts[method] = fit_linear(steps["forward"][:, None], steps["draft"], constant=False)
            else:
                drafted = steps["per_request"] - 1  # a step verifies the drafts and one token more
                features = np.column_stack([steps["kv_tokens"], drafted])
                drafts[method] = fit_linear(features, steps["draft"], constant=False)
        fitted.append(
            FittedCost(
                model=model,
                # the prompts' steps too: the simulator prices a request's prefill with the same line
                forward=fit_linear(
                    np.column_stack([everything["kv_tokens"], everything["tokens"]]), everything["forward"]
                ),
                rest=fit_linear(pooled["tokens"][:, None], np.maximum(pooled["rest"], 1e-9)),
                drafts=drafts,
            )
        )
    return fitted
