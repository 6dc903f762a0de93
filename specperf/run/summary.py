"""From measured rounds to a result's figures and validity; pure functions, no engine, no files."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from pydantic import Field

from ..analysis import ngram
from ..judge import metrics, sampled
from ..judge.verdicts import MIN_ROUNDS
from ..methods import method_of
from ..profiles import workloads
from ..profiles.scenarios import Scenario
from ..profiles.workloads import Request
from ..records import (
    Figures,
    Lossless,
    Metric,
    OutputCheck,
    RequestAcceptance,
    Round,
    ShownOutput,
    StudyThroughput,
    Validity,
)
from .loop import RoundResult
from .tracing.trace import build_trace, ngram_acceptance

SHOWN_OUTPUTS = 3  # requests whose prompt and output text are kept for the report
SHOWN_CHARS = 4000
MIN_ROUND_S = 0.05  # shorter rounds measure the timer and the scheduler, not the engine


@dataclass(frozen=True)
class Checked:
    """How a side's greedy outputs were checked (run/output_check.py): the record, and the outputs'
    hashes in round order where rounds of the check's own made them (None: the timing rounds')."""

    record: OutputCheck = field(default_factory=lambda: OutputCheck(way=OutputCheck.TIMING))
    hashes: list[str] | None = None

    @property
    def way(self) -> str:
        return self.record.way


@dataclass
class Reference:
    """What an SD scenario needs of its no-SD reference: throughput and output hashes (and how those
    outputs were checked), and a serve reference's TPOT p50 (ms)."""

    throughput: float | None
    output_hashes: list[str]
    paired: list[float] | None = None  # the reference's throughput in each paired round
    tpot_ms: float | None = None
    paired_tpot_ms: list[float] | None = None  # its TPOT p50 in each paired round
    checked_by: str = OutputCheck.TIMING  # lossless compares only outputs checked the same way

    @classmethod
    def of(cls, metrics: dict[str, Metric], output_hashes: list[str], checked_by: str = OutputCheck.TIMING):
        """A no-SD result's figures as its SD scenarios need them."""
        throughput, tpot = metrics.get("throughput_tok_s"), metrics.get("tpot_p50_ms")
        return cls(
            throughput.value if throughput else None,
            output_hashes,
            tpot_ms=tpot.value if tpot else None,
            checked_by=checked_by,
        )


class Summary(Figures):
    """What a side's rounds come to: the result's figures (records.Figures, stored as they are by
    run/session.py), and the workload's overlap with the references, which the result keeps with
    its workload facts."""

    overlap_bleu4: list[float] = Field(default_factory=list)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def shown_outputs(requests: list[Request], texts: list[str]) -> list[ShownOutput]:
    """The first few distinct requests with their output (replicas of one prompt are shown once)."""
    shown: dict[str, ShownOutput] = {}
    for request, text in zip(requests, texts):
        if request.id not in shown and len(shown) < SHOWN_OUTPUTS:
            shown[request.id] = ShownOutput(
                request_id=request.id, prompt=request.text[:SHOWN_CHARS], output=text[:SHOWN_CHARS]
            )
    return list(shown.values())


def speedups(throughputs: list[float], reference: Reference | None) -> list[float] | None:
    """Per round: against the reference's paired round, or its median measured earlier; None without one."""
    if reference is not None and reference.paired:
        return [t / r if r > 0 else 0.0 for t, r in zip(throughputs, reference.paired)]
    if reference is not None and reference.throughput:
        return [t / reference.throughput for t in throughputs]
    return None


def tpot_speedups(latencies: dict[str, Metric], reference: Reference | None) -> list[float] | None:
    """Per round: the reference's TPOT p50 over this scenario's, paired or against its median."""
    tpot = latencies.get("tpot_p50_ms")
    if tpot is None or reference is None:
        return None
    if reference.paired_tpot_ms:
        return [r / t if t > 0 else 0.0 for t, r in zip(tpot.samples, reference.paired_tpot_ms)]
    if reference.tpot_ms:
        return [reference.tpot_ms / t if t > 0 else 0.0 for t in tpot.samples]
    return None


def summarise(
    scenario: Scenario,
    rounds: list[RoundResult],
    requests: list[Request],
    reference: Reference | None,
    prompts: list[list[int]] | None = None,
    check: Checked | None = None,
) -> Summary:
    """Throughput, and for SD scenarios acceptance; speedup and lossless when the reference is known.
    `prompts` (token ids, in the order of `requests`) let a traced SD scenario's trace say what n-gram
    would have accepted at every output position; `check` says whose outputs lossless compares."""
    check = check or Checked()
    throughputs = [r.throughput for r in rounds]
    first = rounds[0]
    counters = metrics.sum_counters([r.counters for r in rounds])
    output_hashes = check.hashes if check.hashes is not None else [metrics.output_hash(ids) for ids in first.token_ids]
    values = {"throughput_tok_s": Metric(value=_median(throughputs), samples=throughputs)}
    latencies = served_latencies(rounds)
    values |= latencies
    lossless = None
    per_request = request_totals(rounds)
    if not scenario.method.is_reference:
        per_round = [metrics.acceptance(r.counters) for r in rounds]
        overall = metrics.acceptance(counters)
        for name in ("mean_acceptance_length", "draft_acceptance_rate", "per_position_acceptance"):
            values[name] = Metric(value=overall[name], samples=[a[name] for a in per_round])
        if not scenario.sampling.greedy:  # an estimate over the requests, with its error (judge/sampled.py)
            values |= sampled.acceptance_metrics(per_request, scenario.prompt_replicas)
        speedup = speedups(throughputs, reference)
        if speedup is not None:
            values["speedup"] = Metric(value=_median(speedup), samples=speedup)
            if tpot_speedup := tpot_speedups(latencies, reference):
                values["tpot_speedup"] = Metric(value=_median(tpot_speedup), samples=tpot_speedup)
            if scenario.sampling.greedy and check.way != OutputCheck.NOT_CHECKED and check.way == reference.checked_by:
                fraction = metrics.lossless_fraction(output_hashes, reference.output_hashes)
                values["lossless_fraction"] = Metric(value=fraction, samples=[fraction])
                lossless = Lossless(
                    identical=round(fraction * len(output_hashes)),
                    total=len(output_hashes),
                    reference_id=scenario.reference_id,
                )
    return Summary(
        rounds=[
            Round(
                wall_s=r.wall_s,
                output_tokens=r.output_tokens,
                throughput=t,
                counters=r.counters,
                calls=r.calls,
                cpu_s=r.cpu_s,
                engine_instance=r.instance,
                latency=r.latency,
                errors=r.errors,
                client_bound=r.client_bound,
            )
            for r, t in zip(rounds, throughputs)
        ],
        study_throughput=study_throughput(rounds),
        counters=counters,
        memory=rounds[-1].memory,
        output_hashes=output_hashes,
        outputs=shown_outputs(requests, first.texts),
        overlap_bleu4=[workloads.overlap_bleu4(r.text, text) for r, text in zip(requests, first.texts)],
        metrics=values,
        lossless=lossless,
        output_check=check.record,
        request_acceptance=per_request,
        trace=build_trace(
            [r.trace for r in rounds],
            requests,
            sum(r.output_tokens for r in rounds),
            _ngram_acc(scenario, prompts, first.token_ids) if first.trace else None,
            [len(p) for p in prompts] if prompts is not None else None,
        ),
    )


def request_totals(rounds: list[RoundResult]) -> list[RequestAcceptance]:
    """Each request's SD counts summed over the rounds; none where a round lacks them."""
    counted = [r.request_acceptance for r in rounds]
    if not counted or any(c is None or len(c) != len(counted[0] or []) for c in counted):
        return []
    return [sum(column[1:], column[0]) for column in zip(*counted)]  # type: ignore[arg-type]


def served_latencies(rounds: list[RoundResult]) -> dict[str, Metric]:
    """A serve scenario's latency metrics (judge/metrics.SERVED_LATENCIES), each round's percentile
    in milliseconds a sample; none for offline rounds."""
    if not rounds or any(r.latency is None for r in rounds):
        return {}
    values = {}
    for latency in metrics.SERVED_LATENCIES:
        for p in (50, 99):
            samples = [r.latency.get(f"{latency}_s_p{p}") for r in rounds if r.latency]
            if samples and all(v is not None for v in samples):
                ms = [1000 * v for v in samples if v is not None]
                values[f"{latency}_p{p}_ms"] = Metric(value=_median(ms), samples=ms)
    return values


def study_throughput(rounds: list[RoundResult]) -> StudyThroughput | None:
    """The study's throughput definition beside the suite's; None where no call says how it ended."""
    if not any(c.eos is not None for r in rounds for c in r.calls):
        return None
    samples = [metrics.study_throughput(r.calls) for r in rounds]
    last = rounds[-1].calls
    return StudyThroughput(
        value=_median([s for s in samples if s is not None]),
        samples=samples,
        eos_calls=sum(1 for c in last if c.eos),
        calls=len(last),
    )


def _ngram_acc(scenario: Scenario, prompts: list[list[int]] | None, outputs: list[list[int]]):
    """n-gram's acceptance per output position: with the scenario's own window if it is n-gram."""
    if prompts is None or scenario.method.is_reference:
        return None
    window = ngram.STUDY_WINDOW
    if method_of(scenario.method.name).ngram_window:  # vLLM: either bound defaults to the other, both to 5
        low, high = scenario.method.params.get("prompt_lookup_min"), scenario.method.params.get("prompt_lookup_max")
        window = (low or high or 5, high or low or 5)
    return ngram_acceptance(prompts, outputs, window)


def validity(
    scenario: Scenario,
    rounds: list[RoundResult],
    summary: Summary,
    other_problems: list[str] = (),
    needs_reference: bool = True,
    check: Checked | None = None,
) -> Validity:
    """The rules a measurement must meet to be judged; each broken one is a reason.  `needs_reference`
    False: an SD scenario without its no-SD result is judged without speedup (a running server's).
    Greedy outputs must repeat: between the timing rounds, or where `check` made rounds of its own,
    alone and in a batch there."""
    check = check or Checked()
    reasons = []
    # the rounds a speed's test needs; a sampled scenario that gates no speed has its information in its requests
    speeds = {name for name in summary.metrics if not metrics.spec_for(name).deterministic}
    if len(rounds) < MIN_ROUNDS and (scenario.sampling.greedy or speeds - set(scenario.informational)):
        reasons.append(f"{len(rounds)} rounds are too few for the significance test (it needs {MIN_ROUNDS})")
    shortest = min(r.wall_s for r in rounds)
    if shortest < MIN_ROUND_S:
        reasons.append(f"a round took {shortest * 1000:.1f} ms, too short to time (minimum {MIN_ROUND_S} s)")
    if any(r.output_tokens == 0 for r in rounds):
        reasons.append("a round produced no output tokens")
    if needs_reference and not scenario.method.is_reference and "speedup" not in summary.metrics:
        reasons.append(f"no reference result {scenario.reference_id} in this run")
    greedy = scenario.sampling.greedy  # sampled outputs are judged by their distribution, not repeated
    if greedy and check.way == OutputCheck.TIMING and any(r.token_ids != rounds[0].token_ids for r in rounds):
        reasons.append("greedy outputs differ between rounds")
    if check.record.stable is False:
        reasons.append(f"greedy outputs depend on the batch ({check.record.note})")
    if failed := sum(r.errors for r in rounds):
        reasons.append(f"{failed} request(s) failed over the rounds (each round's result keeps its count)")
    if bound := sum(r.client_bound for r in rounds):
        reasons.append(f"the load generator kept a core busy in {bound} round(s): it, not the server, set the pace")
    reasons += other_problems
    return Validity(valid=not reasons, reasons=reasons)
