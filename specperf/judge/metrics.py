"""What is measured: metric definitions (direction, default tolerance, test) and their computation.

Everything here is pure: it works on the plain round records that the engine returns.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from dataclasses import dataclass
from typing import Any

from ..records import VECTOR_METRICS, CallTiming, Counters, Metric, Number

HIGHER = "higher"
LOWER = "lower"
THRESHOLD = "threshold"
ABSOLUTE = "absolute"
DISTRIBUTION_MATCH_P = "distribution_match_p"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    direction: str  # which way is better
    rel_tolerance: float  # a change smaller than this fraction of the baseline is never a regression
    # "mannwhitney": threshold AND one-sided U test over rounds; "threshold": threshold alone;
    # "absolute": the current value against rel_tolerance itself, whatever the baseline (a p value)
    test: str
    description: str
    least: float = 0.0  # the smallest value the metric can take (a speed: just above 0)
    most: float = math.inf  # and the largest (a rate: 1)
    # In a sampled scenario, fails it by default; else its interval explains what the gating figures
    # show, informational unless the profile gives it a tolerance (rules.Rules.is_informational)
    gates_sampled: bool = True

    def out_of_range(self, value: object) -> str | None:
        """Why `value` cannot be a value of this metric (None: it can)."""
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return f"{value!r} is not a finite number"
        if not self.least <= value <= self.most:
            return f"{value!r} is outside [{self.least:g}, {self.most:g}]"
        return None

    @property
    def deterministic(self) -> bool:
        """Exactly reproducible on any machine (acceptance, lossless, the distribution check's p: its
        draws repeat with their seeds): judged on the threshold alone, never widened by measured noise."""
        return self.test in (THRESHOLD, ABSOLUTE)

    @property
    def against_baseline(self) -> bool:
        """A deterministic metric compared with a baseline's (or a gate's current build's) value on
        its tolerance; not one judged on its own value (ABSOLUTE: distribution_match_p)."""
        return self.test == THRESHOLD


# The latencies of a serve scenario (run/serving/load.py), each judged at its p50 and p99.
SERVED_LATENCIES = {
    "ttft": "time to first token",
    "tpot": "time per output token after the first",
    "itl": "inter-token latency (between streamed events)",
}
LEAST_SPEED = 1e-6  # a speed (tok/s, a speedup) below this is no measurement: a zero or denormal in a file

METRICS: dict[str, MetricSpec] = {
    m.name: m
    for m in (
        MetricSpec(
            "throughput_tok_s",
            "tok/s",
            HIGHER,
            0.05,
            "mannwhitney",
            "output tokens of the call / wall time of the call, prefill included",
            LEAST_SPEED,
            math.inf,
        ),
        MetricSpec(
            "speedup",
            "x",
            HIGHER,
            0.05,
            "mannwhitney",
            "SD throughput / no-SD throughput at the same model, dataset and batch size",
            LEAST_SPEED,
            math.inf,
        ),
        MetricSpec(
            "tpot_speedup",
            "x",
            HIGHER,
            0.05,
            "mannwhitney",
            "no-SD TPOT p50 / SD TPOT p50 at the same model, dataset and concurrency (serve scenarios)",
            LEAST_SPEED,
            math.inf,
        ),
        MetricSpec(
            "mean_acceptance_length",
            "tokens",
            HIGHER,
            0.05,
            "threshold",
            "1 + accepted / drafts (vLLM's gate: within 5%)",
            1.0,
            math.inf,
        ),
        MetricSpec(
            "request_mean_acceptance_length",
            "tokens",
            HIGHER,
            0.05,
            "threshold",
            "the mean over requests of each request's 1 + accepted / drafts (every request weighs the same)",
            1.0,
            math.inf,
        ),
        MetricSpec(
            "draft_acceptance_rate",
            "",
            HIGHER,
            0.05,
            "threshold",
            "accepted draft tokens / proposed draft tokens",
            0.0,
            1.0,
            gates_sampled=False,
        ),
        MetricSpec(
            "per_position_acceptance",
            "",
            HIGHER,
            0.05,
            "threshold",
            "accepted at draft position i / drafts, each position checked",
            0.0,
            1.0,
            gates_sampled=False,
        ),
        MetricSpec(
            "request_per_position_acceptance",
            "",
            HIGHER,
            0.05,
            "threshold",
            "the mean over requests of each request's accepted at draft position i / drafts",
            0.0,
            1.0,
            gates_sampled=False,
        ),
        *(
            MetricSpec(
                f"{latency}_p{p}_ms",
                "ms",
                LOWER,
                0.10,
                "mannwhitney",
                f"{what}, p{p} over the round's requests (serve scenarios)",
                0.0,
                math.inf,
            )
            for latency, what in SERVED_LATENCIES.items()
            for p in (50, 99)
        ),
        MetricSpec(
            "lossless_fraction",
            "",
            HIGHER,
            0.0,
            "threshold",
            "fraction of requests whose greedy SD output equals the no-SD output",
            0.0,
            1.0,
        ),
        MetricSpec(
            DISTRIBUTION_MATCH_P,
            "p",
            HIGHER,
            # Its draws repeat with their seeds, so a false alarm would repeat every run until the
            # build changes: 1 in 1,000 at most; a sampler that accepts every draft gives p < 1e-10.
            0.001,
            ABSOLUTE,
            "a sampled SD scenario's draws against its no-SD reference's, position by position "
            "(chi-square, Bonferroni over positions and prompts): below the tolerance, SD's outputs "
            "do not follow the target's distribution",
            0.0,
            1.0,
        ),
    )
}

# What a baseline's samples may hold, by the kind of machine that recorded them: beyond it the file is
# corrupt, not a measurement (a stored speed of 1e-5 tok/s would make any run an improvement).
# Wide on purpose: SmolLM2-135M on 2 CPU cores measures 20-200 tok/s and the tiny checkpoints a few
# thousand; an H100 at batch 128 some ten thousand; the study's speedups lie within 0.3-6x.
PLAUSIBLE: dict[str, dict[str, tuple[float, float]]] = {
    "throughput_tok_s": {"cpu": (0.01, 1e5), "gpu": (0.1, 1e7)},
    "speedup": {"cpu": (0.01, 100.0), "gpu": (0.01, 100.0)},
    "tpot_speedup": {"cpu": (0.01, 100.0), "gpu": (0.01, 100.0)},
}


def implausible(metric: str, value: object, kind: str | None) -> str | None:
    """Why a stored sample of `metric` cannot come from a machine of `kind` (cpu, gpu; another or
    None: any of them), or None."""
    ranges = PLAUSIBLE.get(metric, {})
    if not ranges or not isinstance(value, (int, float)):
        return None
    low, high = ranges.get(kind or "") or (min(r[0] for r in ranges.values()), max(r[1] for r in ranges.values()))
    if low <= value <= high:
        return None
    return f"{value!r} is outside what a {kind or 'machine'} measures, [{low:g}, {high:g}] (judge/metrics.py PLAUSIBLE)"


# Judged across the scenarios of a run when it ends, not per round (analysis/dynamic_sd.py: a dynamic
# SD schedule against the best fixed k); a profile may keep it informational as it does a metric.
DYNAMIC_VS_BEST_K = "dynamic_vs_best_k"


def vector_of(metric: str) -> str | None:
    """The vector metric a flattened name belongs to (acceptance_pos2: per_position_acceptance), or None."""
    return next((vector for vector, prefix in VECTOR_METRICS.items() if re.fullmatch(rf"{prefix}\d+", metric)), None)


def known_metric(metric: str) -> bool:
    return metric in METRICS or vector_of(metric) is not None


def spec_for(metric: str) -> MetricSpec:
    """Specs are per metric name; the positions of a vector (acceptance_pos0, ...) share its one."""
    return METRICS[vector_of(metric) or metric]


def counter_delta(before: dict[str, Any], after: dict[str, Any]) -> Counters:
    """Difference of two spec-decode counter snapshots (see engine.read_spec_counters)."""
    before_pos = before.get("accepted_per_pos", [])
    after_pos = after.get("accepted_per_pos", [])
    return Counters(
        drafts=after["drafts"] - before["drafts"],
        draft_tokens=after["draft_tokens"] - before["draft_tokens"],
        accepted=after["accepted"] - before["accepted"],
        accepted_per_pos=[a - (before_pos[i] if i < len(before_pos) else 0) for i, a in enumerate(after_pos)],
    )


def sum_counters(deltas: list[Counters]) -> Counters:
    per_pos: list[Number] = []
    for delta in deltas:
        for i, value in enumerate(delta.accepted_per_pos):
            if i < len(per_pos):
                per_pos[i] += value
            else:
                per_pos.append(value)
    return Counters(
        drafts=sum(d.drafts for d in deltas),
        draft_tokens=sum(d.draft_tokens for d in deltas),
        accepted=sum(d.accepted for d in deltas),
        accepted_per_pos=per_pos,
    )


def acceptance(counters: Counters) -> dict[str, Any]:
    """Acceptance metrics from summed counters; None where no draft was proposed (n-gram can find none)."""
    drafts, draft_tokens = counters.drafts, counters.draft_tokens
    return {
        "mean_acceptance_length": 1 + counters.accepted / drafts if drafts else None,
        "draft_acceptance_rate": counters.accepted / draft_tokens if draft_tokens else None,
        "per_position_acceptance": [a / drafts for a in counters.accepted_per_pos] if drafts else None,
    }


STUDY_MAX_CALLS = 500  # vis_speedup.load_method_data(max_reqs=500) in the study's scripts


def study_throughput(calls: list[CallTiming]) -> float | None:
    """The study's throughput of one round (scripts/vis_speedup.py compute_throughput): the mean, over
    the first STUDY_MAX_CALLS calls whose first request ended on EOS, of output tokens / call time, a
    mean of per-call rates, not total tokens over total time.  None when no call ended on EOS."""
    rates = [c.output_tokens / c.wall_s for c in calls if c.eos and c.wall_s > 0]
    rates = rates[:STUDY_MAX_CALLS]
    return statistics.fmean(rates) if rates else None


def output_hash(token_ids: list[int]) -> str:
    """A short digest of one request's output tokens: results store these, not the tokens."""
    return hashlib.sha256(",".join(map(str, token_ids)).encode()).hexdigest()[:16]


def lossless_fraction(outputs: list[Any], reference_outputs: list[Any]) -> float:
    """Fraction of requests whose output (token ids or their hashes) equals the reference's, request by request."""
    if len(outputs) != len(reference_outputs):
        raise ValueError(f"{len(outputs)} outputs against {len(reference_outputs)} reference outputs")
    same = sum(1 for ours, ref in zip(outputs, reference_outputs) if ours == ref)
    return same / len(outputs)


def sample_summary(samples: list[float]) -> dict[str, Any]:
    """Median and spread of round samples, as stored with results and baselines."""
    if not samples:
        return {"n": 0}
    median = statistics.median(samples)
    spread = statistics.stdev(samples) if len(samples) > 1 else 0.0
    return {
        "n": len(samples),
        "median": median,
        "mean": statistics.fmean(samples),
        "min": min(samples),
        "max": max(samples),
        "stdev": spread,
        "cv": spread / statistics.fmean(samples) if statistics.fmean(samples) else None,
    }


def metric_samples(metrics: dict[str, Metric]) -> dict[str, list[float]]:
    """Flatten a result's metrics to name -> samples; per-position vectors become acceptance_pos<i>
    (request_acceptance_pos<i>: records.VECTOR_METRICS)."""
    flat: dict[str, list[float]] = {}
    for name, entry in metrics.items():
        if name in VECTOR_METRICS:
            for round_values in entry.samples:
                for i, value in enumerate(round_values if isinstance(round_values, list) else []):
                    flat.setdefault(f"{VECTOR_METRICS[name]}{i}", []).append(value)
        else:  # scalar samples (records.checked_metrics keeps lists to the vector metrics)
            flat[name] = [s for s in entry.samples if isinstance(s, (int, float))]
    return flat


def metric_errors(metrics: dict[str, Metric]) -> dict[str, float]:
    """A sampled result's standard errors over requests (judge/sampled.py), flattened as metric_samples flattens."""
    flat: dict[str, float] = {}
    for name, entry in metrics.items():
        if isinstance(entry.se, list) and name in VECTOR_METRICS:
            flat |= {f"{VECTOR_METRICS[name]}{i}": se for i, se in enumerate(entry.se)}
        elif isinstance(entry.se, (int, float)):
            flat[name] = entry.se
    return flat
