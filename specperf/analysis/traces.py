"""What a scenario's trace says (records.Trace): where the step time went, how acceptance varies with
the position in the output and between requests, and, against a baseline's trace, what moved.

Pure functions over stored traces; the report and summary.json show them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import ScenarioResult, Trace
from ..status import REGRESSION
from . import simulate

PARTS = ("draft", "forward", "sample", "rest")
PART_NAMES = {
    "draft": "drafting",
    "forward": "target forward (verification)",
    "sample": "sampling",
    "rest": "the rest",
    "acceptance": "acceptance",
}
TENTHS = 10
PERCENTILES = (5, 25, 50, 75, 95)
SPEED_METRICS = ("speedup", "throughput_tok_s")


def time_shares(trace: Trace) -> dict[str, float] | None:
    """Each part's share of the step time over all measured rounds; None without timed steps."""
    total = trace.seconds.get("total", 0.0)
    if total <= 0:
        return None
    return {part: trace.seconds.get(part, 0.0) / total for part in PARTS}


def request_positions(drafted: list[int], accepted: list[int], ngram_acc: list[int] | None = None) -> list[int]:
    """The output position at which each verification step started: the first token comes from the
    prefill, and a step that accepted a drafts adds a + 1 tokens.  For n-gram, give its acceptance
    per position (analysis/ngram.py): where it proposed nothing (0) a step added one token and vLLM
    recorded no step."""
    positions, position = [], 1
    for a in accepted:
        while ngram_acc and position <= len(ngram_acc) and ngram_acc[position - 1] == 0:
            position += 1
        positions.append(position)
        position += a + 1
    return positions


def acceptance_by_tenth(trace: Trace, ngram: bool = False) -> list[float | None]:
    """Draft acceptance rate (accepted / proposed) by tenth of each request's output, pooled over
    requests; `ngram`: the trace is n-gram's, whose steps without a draft are not recorded."""
    accepted, drafted = [0] * TENTHS, [0] * TENTHS
    for request in trace.requests:
        skipped = request.ngram_acc if ngram else None
        positions = request_positions(request.drafted, request.accepted, skipped)
        length = len(skipped) if skipped else positions[-1] + request.accepted[-1] + 1 if positions else 0
        for start, d, a in zip(positions, request.drafted, request.accepted):
            tenth = min(TENTHS - 1, TENTHS * start // length)
            accepted[tenth] += a
            drafted[tenth] += d
    return [a / d if d else None for a, d in zip(accepted, drafted)]


def request_acceptance_lengths(trace: Trace) -> list[float]:
    """Each traced request's mean acceptance length: tokens per verification step, bonus token included."""
    return [1 + sum(r.accepted) / len(r.accepted) for r in trace.requests if r.accepted]


def percentiles(values: list[float]) -> dict[str, float] | None:
    """p5, p25, p50, p75, p95 of `values`; None when empty."""
    if not values:
        return None
    return {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(values, PERCENTILES))}


@dataclass
class Attribution:
    """Why the time per output token changed, against a baseline's trace: each part's contribution
    (its change of seconds per step, over the baseline's seconds per token) and acceptance's (fewer
    or more tokens per step), as fractions of the baseline's time per token; they sum to the change."""

    change: float  # relative change of seconds per output token
    contributions: dict[str, float]  # part or "acceptance" -> fraction
    tokens_per_step: tuple[float, float]  # baseline, current

    @property
    def mover(self) -> str:
        return max(self.contributions, key=lambda k: abs(self.contributions[k]))

    def to_json(self) -> dict:
        return {
            "change": self.change,
            "contributions": self.contributions,
            "mover": self.mover,
            "tokens_per_step": list(self.tokens_per_step),
        }

    def line(self) -> str:
        parts = ", ".join(f"{PART_NAMES[k]} {v:+.1%}" for k, v in self.contributions.items())
        before, after = self.tokens_per_step
        return (
            f"time per output token {self.change:+.1%}, mostly {PART_NAMES[self.mover]} ({parts}; "
            f"tokens per step {before:.2f} -> {after:.2f})"
        )


def _per_step(trace: Trace) -> tuple[dict[str, float], float] | None:
    if trace.steps <= 0 or trace.output_tokens <= 0 or trace.seconds.get("total", 0) <= 0:
        return None
    return {p: trace.seconds.get(p, 0.0) / trace.steps for p in PARTS}, trace.output_tokens / trace.steps


def attribute(current: Trace, baseline: Trace) -> Attribution | None:
    """What moved between two traces of a scenario; None unless both have timed steps."""
    now, before = _per_step(current), _per_step(baseline)
    if now is None or before is None:
        return None
    (parts_now, tokens_now), (parts_before, tokens_before) = now, before
    step_before = sum(parts_before.values())
    per_token_before = step_before / tokens_before
    per_token_now = sum(parts_now.values()) / tokens_now
    # seconds/token = seconds/step / tokens/step: a step part's change at the baseline's tokens per step,
    # and the change of tokens per step at the current step time, sum to the whole change.
    contributions = {p: (parts_now[p] - parts_before[p]) / tokens_before / per_token_before for p in PARTS}
    contributions["acceptance"] = (
        sum(parts_now.values()) / tokens_now - sum(parts_now.values()) / tokens_before
    ) / per_token_before
    return Attribution(per_token_now / per_token_before - 1, contributions, (tokens_before, tokens_now))


def attribution_of(result: ScenarioResult) -> Attribution | None:
    """For a result whose speed regressed against a baseline, and both carry traces: what moved."""
    verdict, baseline = result.verdict, result.baseline
    if verdict is None or result.trace is None or baseline is None or baseline.trace is None:
        return None
    if not any(m.metric in SPEED_METRICS and m.status == REGRESSION for m in verdict.metrics):
        return None
    return attribute(result.trace, baseline.trace)


def request_acceptance(result: ScenarioResult) -> list[simulate.RequestAcceptance]:
    """The traced requests in the simulator's form: n-gram's and the draft model's per-position acceptance."""
    requests = []
    for r in result.trace.requests if result.trace else []:
        acc = {
            name: values for name, values in ((simulate.NGRAM, r.ngram_acc), (simulate.DRAFT, r.draft_acc)) if values
        }
        if acc and r.prompt_len:
            requests.append(simulate.RequestAcceptance(r.request_id, r.prompt_len, acc))
    return requests
