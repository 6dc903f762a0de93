"""Speedup from acceptance traces: what a proposer with a fixed k, an oracle, or a per-step choice
between two proposers would reach at each batch size, under a cost model of one step.

The model is the study's simulator (SpecDecode-Bench/simulator: simulator.py, predictor.py), made
fast: a batch replicates one request B times, as the study's runs do, so every copy takes the same
steps and one trajectory per request and mode serves every batch size; the step times are then
array arithmetic.  Each step the batch verifies its drafts in one target forward (its time grows
with the KV-cache tokens and the tokens verified), each copy drafts (n-gram: a fixed share of the
forward; a learned head: grows with KV-cache tokens and drafted tokens), and a fixed overhead is
paid; a copy's latency is the sum of its steps, and speedup is the ratio of mean throughputs with
and without speculative decoding.  One deliberate difference: where the study draws, per copy and
step, whether n-gram found a match at all (only where it would have been rejected anyway), this
draws the number of matching copies of the batch from the same binomial.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODES = ("k1", "k3", "k5", "oracle")
BEST_K = (1, 2, 3, 4, 5)  # the k a recommendation picks from (the study's fixed k span 1 to 5)
# The simulator's proposers, as the study's trace files name their acceptance (acc_ngram, acc_eagle)
# and the suite's traces add theirs: methods.py says which method each simulates.
NGRAM, EAGLE, DRAFT = "ngram", "eagle", "draft"
EAGLE3 = "eagle3"  # the study's acc_eagle_three ground truth (request.py), where a trace file has one
COMBINED, ADAPTIVE = "combined", "adaptive"  # the per-step best of two; n-gram where it proposes, else the draft
PROPOSERS = (EAGLE, NGRAM, COMBINED)  # what `specperf simulate` offers on the study's traces
BATCH_SIZES = (1, 8, 16, 32, 64, 128)
# The study's chance that n-gram finds a match where its draft would be rejected (simulator.py).
NGRAM_MATCH = {"sharegpt": 0.2, "cnn": 0.4, "cnn_dailymail": 0.4, "gsm8k": 0.2, "instructcoder": 0.8}
SEED = 42


@dataclass(frozen=True)
class StepCost:
    """Seconds of one step's parts (predictor.py's TimePredictor)."""

    target_kv: float  # target forward: per KV-cache token of the batch
    target_token: float  # per token verified (batched)
    target_fixed: float
    draft_kv: float  # learned drafter: per KV-cache token
    draft_token: float  # per token proposed (+1: the study counts the verified input)
    draft_fixed: float
    ngram_share: float  # n-gram drafting as a share of the step's forward
    overhead: float  # per step, scheduling and the rest
    switching: float = 0.0  # combined mode: per request and step where the better proposer changes
    overhead_token: float = 0.0  # per position sampled in a step (the study's form has none)

    def forward(self, kv_tokens, tokens):
        return kv_tokens * self.target_kv + tokens * self.target_token + self.target_fixed

    def learned_draft(self, kv_tokens, tokens):
        """A learned drafter's time: per KV-cache token it sees and per token it drafts."""
        return kv_tokens * self.draft_kv + tokens * self.draft_token + self.draft_fixed

    def rest(self, sampled):
        """The step outside the forward and the drafting: scheduling, and sampling and bookkeeping of
        each position the step samples (every verified one; a prefill samples one per request)."""
        return self.overhead + sampled * self.overhead_token


# Llama-3.1-8B-Instruct on one H100, fitted by the study on InstructCoder at batch 1 to 64 (predictor.py).
LLAMA_8B_H100 = StepCost(
    target_kv=3.92645679e-08,
    target_token=2.10103129e-05,
    target_fixed=5.88590713e-03,
    draft_kv=2.37768493e-09,
    draft_token=8.41429603e-07,
    draft_fixed=2.13526175e-03,
    ngram_share=0.005875,
    overhead=1.20683946e-03,
    switching=0.0,  # combined_switching_overhead
)


@dataclass(frozen=True)
class RequestAcceptance:
    """One request: its prompt length and, per proposer, the tokens a step starting at each output
    position would produce if the proposer drafted without limit (accepted drafts + 1; 0 where
    n-gram is known to propose nothing; the study's traces do not tell, so it draws)."""

    id: str
    prompt_len: int
    acc_len: dict[str, list[int]]


@dataclass(frozen=True)
class Trajectory:
    """The steps one copy of a request takes: tokens verified, tokens produced, whether n-gram
    might have found no match (its draft would be rejected; the study then draws a match), and the
    output position each step starts at."""

    verified: np.ndarray
    produced: np.ndarray
    maybe_unmatched: np.ndarray
    length: int
    positions: np.ndarray


def trajectory(acc_len: list[int], mode: str, ngram: bool) -> Trajectory:
    """`ngram`: 1 means n-gram may have found no match (the study's traces); the suite's own traces
    say so with a 0, and pass False."""
    verified, produced, unmatched, positions = [], [], [], []
    position, length = 1, len(acc_len)  # the first token comes from the prefill
    k = None if mode == "oracle" else int(mode[1:])
    while position < length:
        best = acc_len[position - 1]
        positions.append(position)
        if best == 0:  # n-gram proposed nothing here (the suite's traces know it): one token
            verified.append(1), produced.append(1), unmatched.append(False)
        else:
            tokens = best if k is None else k + 1
            verified.append(tokens)
            produced.append(min(best, tokens))
            unmatched.append(ngram and k is not None and best == 1)
        position += produced[-1]
    return Trajectory(
        np.array(verified, float),
        np.array(produced, float),
        np.array(unmatched, bool),
        length,
        np.array(positions, int),
    )


def learned_key(request: RequestAcceptance) -> str:
    """The learned proposer of a request's traces: the study's EAGLE (or EAGLE-3 where only that is
    there), or the suite's draft model."""
    return next((name for name in (EAGLE, EAGLE3) if name in request.acc_len), DRAFT)


def combined(request: RequestAcceptance, first: str = NGRAM, second: str | None = None) -> list[int]:
    """The per-step best of two proposers (the study's combined oracle)."""
    a, b = request.acc_len[first], request.acc_len[second or learned_key(request)]
    return [max(x, y) for x, y in zip(a, b)]


def switches(request: RequestAcceptance, path: Trajectory) -> int:
    """Steps of the combined oracle along ``path`` where the better proposer is another than the
    step before's (n-gram wins ties, as the study's _get_winning_method has it)."""
    a, b = np.array(request.acc_len[NGRAM]), np.array(request.acc_len[learned_key(request)])
    winners = a[path.positions - 1] >= b[path.positions - 1]
    return int(np.count_nonzero(winners[1:] != winners[:-1]))


def adaptive(request: RequestAcceptance) -> list[int]:
    """The adaptive proposer's rule (run/engines/adaptive_proposer.py): n-gram where it proposes, else the draft."""
    a, b = request.acc_len[NGRAM], request.acc_len[learned_key(request)]
    return [x if x > 0 else y for x, y in zip(a, b)]


def baseline_latency(prompt_len: int, length: int, batch: int, cost: StepCost) -> float:
    """One copy's latency without speculative decoding: the prefill, then one token per step."""
    kv = batch * prompt_len + batch + batch * np.arange(length - 1)
    decode = cost.forward(kv, batch) + cost.rest(batch)
    return float(cost.forward(0, batch * prompt_len) + cost.rest(batch) + decode.sum())


def _learned_drafts(prompt_len: int, path: Trajectory, batch: int, kv: np.ndarray, cost: StepCost) -> np.ndarray:
    """A learned drafter's time per step.  Copies draft one after another, each seeing the KV tokens
    its predecessors added this step (and released, in the last step): the mean over copies."""
    added = path.produced.copy()
    final = 1 + path.produced.sum()
    added[-1] -= final + prompt_len
    return cost.learned_draft(kv + added * (batch - 1) / 2, path.verified)


def sd_latency(
    prompt_len: int,
    path: Trajectory,
    batch: int,
    cost: StepCost,
    drafter: str,
    match: float,
    rng: np.random.Generator,
    learned_steps: np.ndarray | None = None,
) -> float:
    """The mean latency of the batch's copies with speculative decoding along `path`.  A learned
    drafter with `learned_steps` (the adaptive proposer) costs n-gram's share on the other steps."""
    kv = batch * prompt_len + batch + batch * np.concatenate([[0.0], np.cumsum(path.produced)[:-1]])
    verified = batch * path.verified
    matched = np.full(len(path.verified), float(batch))
    if path.maybe_unmatched.any():  # copies whose n-gram found nothing verify one token
        matched[path.maybe_unmatched] = rng.binomial(batch, match, int(path.maybe_unmatched.sum()))
        verified = np.where(path.maybe_unmatched, matched * path.verified + (batch - matched), verified)
    forward = cost.forward(kv, verified)
    if drafter == NGRAM:  # a copy that verifies its last token alone drafted nothing
        drafts = np.where(path.verified > 1, matched / batch * forward * cost.ngram_share, 0.0)
    elif drafter == "ngram-always":
        drafts = forward * cost.ngram_share
    else:
        drafts = _learned_drafts(prompt_len, path, batch, kv, cost)
        if learned_steps is not None:  # the adaptive proposer: n-gram's cost where n-gram drafted
            drafts = np.where(learned_steps, drafts, forward * cost.ngram_share)
    return float(
        cost.forward(0, batch * prompt_len) + cost.rest(batch) + (forward + drafts + cost.rest(verified)).sum()
    )


@dataclass(frozen=True)
class Speedup:
    """One batch size's speedup the three ways the study's simulator prints it: the ratio of mean
    throughputs (the figure it returns and plots), the mean of the requests' latency ratios, and
    the ratio of the summed request latencies."""

    throughput: float
    per_request: float
    latency: float


def simulate_speedups(
    requests: list[RequestAcceptance],
    proposer: str,
    mode: str,
    batch_sizes=BATCH_SIZES,
    cost: StepCost = LLAMA_8B_H100,
    dataset: str = "",
    known_misses: bool = False,
) -> dict[int, Speedup]:
    """Speedup at each batch size, three ways (:class:`Speedup`).

    `proposer` is a key of acc_len ("ngram", "eagle", "eagle3", "draft"), "combined" (the per-step
    best of n-gram and the learned one, drafting at n-gram's cost, as the study's simulator prices
    it, plus the cost model's switching cost where the better one changes) or "adaptive" (n-gram
    where it proposes, else the learned one, each at its own cost).
    `known_misses`: the traces mark with 0 where n-gram proposed nothing (the suite's); the study's
    do not, and a match is drawn where n-gram's draft would be rejected."""
    rng = np.random.default_rng(SEED)
    drafter = {NGRAM: NGRAM, COMBINED: "ngram-always"}.get(proposer, "learned")
    rule = {COMBINED: combined, ADAPTIVE: adaptive}.get(proposer, lambda request: request.acc_len[proposer])
    paths = []
    for request in requests:
        acc = rule(request)
        if acc:
            path = trajectory(acc, mode, proposer == NGRAM and not known_misses)
            learned = None
            if proposer == ADAPTIVE:  # the steps the draft model proposed
                learned = np.array(request.acc_len[NGRAM])[path.positions - 1] == 0
            switching = cost.switching * switches(request, path) if proposer == COMBINED else 0.0
            paths.append((request.prompt_len, path, learned, switching))
    result = {}
    for batch in batch_sizes:
        match = NGRAM_MATCH.get(dataset, 0.2)
        with_sd = np.array(
            [
                sd_latency(n, p, batch, cost, drafter, match, rng, learned) + switching
                for n, p, learned, switching in paths
            ]
        )
        without = np.array([baseline_latency(n, p.length, batch, cost) for n, p, _, _ in paths])
        tokens = np.array([batch * p.length for _, p, _, _ in paths], float)
        result[batch] = Speedup(
            throughput=float(np.mean(tokens / with_sd) / np.mean(tokens / without)),
            per_request=float(np.mean(without / with_sd)),
            latency=float(without.sum() / with_sd.sum()),
        )
    return result


# Which of Speedup's three a caller wants: the study's (mean throughput), or the suite's measured
# figure, a round's output tokens over its wall time with its calls one after another: the requests'
# summed latencies.  Simulated against the suite's own measurement, only the latter compares (the
# mean of throughputs weighs a request that SD speeds up most, and said 2.1x where a run measured 1.8x).
STUDY_FORM, MEASURED_FORM = "throughput", "latency"


def speedups(
    requests: list[RequestAcceptance],
    proposer: str,
    mode: str,
    batch_sizes=BATCH_SIZES,
    cost: StepCost = LLAMA_8B_H100,
    dataset: str = "",
    known_misses: bool = False,
    form: str = STUDY_FORM,
) -> dict[int, float]:
    """Speedup at each batch size, by default the study's: mean throughput with SD over mean
    throughput without (:func:`simulate_speedups` has all three; `form` picks one)."""
    simulated = simulate_speedups(requests, proposer, mode, batch_sizes, cost, dataset, known_misses)
    return {batch: getattr(s, form) for batch, s in simulated.items()}


@dataclass(frozen=True)
class BestK:
    """The k from BEST_K the simulator finds fastest at one batch size, its speedup, and the
    method's oracle bound there."""

    k: int
    speedup: float
    oracle: float


def best_k(
    requests: list[RequestAcceptance],
    proposer: str,
    batch_sizes=BATCH_SIZES,
    cost: StepCost = LLAMA_8B_H100,
    dataset: str = "",
    known_misses: bool = False,
    form: str = STUDY_FORM,
) -> dict[int, BestK]:
    """Per batch size, the fastest fixed k of ``proposer`` (the smallest on a tie): the study shows
    one fixed k losing at large batches, where verifying rejected drafts costs most."""
    by_k = {k: speedups(requests, proposer, f"k{k}", batch_sizes, cost, dataset, known_misses, form) for k in BEST_K}
    oracle = speedups(requests, proposer, "oracle", batch_sizes, cost, dataset, known_misses, form)
    best = {}
    for batch in batch_sizes:
        k = max(BEST_K, key=lambda k: (by_k[k][batch], -k))
        best[batch] = BestK(k, by_k[k][batch], oracle[batch])
    return best
