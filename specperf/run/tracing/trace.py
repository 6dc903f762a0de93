"""Tracing a scenario: what each verification step proposed and accepted, and where its time went.

In the engine process (before vLLM is imported), `load_step_timer` puts the step-timer plugin
(vllm_trace/, a vLLM general plugin) on the path, so vLLM loads it there and in any worker it
starts; engines of untraced scenarios never see it.  Per-step acceptance comes from vLLM's public
per-request metrics (`per_request_spec_decode_metrics="detailed"`, in vLLM 0.29 and later); for an
older vLLM from the plugin's scheduler hook, which elsewhere cross-checks the public metrics.
`call_trace` notes, a line each, what the plugin could not time in the installed vLLM.
`build_trace` turns the rounds' raw traces into the result's Trace record (pure), with what n-gram
would have accepted at every output position (`ngram_acceptance`), for the headroom analyses.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ...analysis import ngram
from ...methods import method_of
from ...records import STEP_BATCH, STEP_PARTS, RequestTrace, Trace

if TYPE_CHECKING:  # the engine process imports this module: it needs no workload code
    from ...profiles.workloads import Request

PLUGIN_DIR = Path(__file__).resolve().with_name("vllm_trace")
MAX_STEPS = 20_000  # per-step times kept per result (about 25 bytes a step)
MAX_POSITIONS = 20_000  # output positions given n-gram's acceptance per result
NEVER_DRAFTED = {"drafted": [], "accepted": []}  # a request no step drafted for: the hook never saw it


# ---------------------------------------------------------------- in the engine process


def load_step_timer():
    """The step-timer plugin, registered and on the path of this process and its children."""
    sys.path.insert(0, str(PLUGIN_DIR))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")]))
    import specperf_step_timer

    specperf_step_timer.register()
    return specperf_step_timer


def call_trace(timer, outputs: list, public_acceptance: bool) -> dict:
    """One generate() call's trace: the engine steps it took, each request's per-step counts.

    The counts come from vLLM's per-request metrics where `public_acceptance`, else from the
    step timer's scheduler hook; where both exist they must agree, and a note says if not."""
    hooked = timer.drain_acceptance()
    steps = timer.drain()
    notes = coverage_notes(timer, timed_steps=bool(steps))
    requests, disagree = [], 0
    for output in outputs:
        counted = _hooked_counts(hooked, output.request_id)
        metrics = getattr(output.outputs[0], "spec_decode_metrics", None) if public_acceptance else None
        public = (
            None
            if metrics is None
            else {"drafted": list(metrics.per_step_drafted), "accepted": list(metrics.per_step_accepted)}
        )
        disagree += public is not None and (counted or NEVER_DRAFTED) != public
        requests.append(public if public_acceptance else counted)
    if disagree:
        notes.append(
            f"the scheduler hook's per-step counts differ from vLLM's per-request metrics "
            f"for {disagree} of {len(outputs)} requests"
        )
    return {"steps": steps, "requests": requests, "notes": notes}


def coverage_notes(timer, timed_steps: bool) -> list[str]:
    """What the step timer could not time, a line each: the hooks the installed vLLM lacks (of the
    engine core, the scheduler and the runner that ran), or, where steps were timed but no runner
    the timer patches ran in this process, that one line alone; and the caveat of the runner timed."""
    ran = [runner for runner in timer.RUNNERS if runner.name in timer.TIMED]
    lacking = [hook for owner in ("EngineCore", "Scheduler") for hook in timer.MISSING.get(owner, [])]
    lacking += [f"{runner.name}'s {hook}" for runner in ran for hook in timer.MISSING.get(runner.name, [])]
    notes = [f"the installed vLLM lacks {hook}: its part is not timed" for hook in lacking]
    if timed_steps and not ran:
        notes.append(timer.NOT_TIMED)
    notes += [f"step parts of {runner.name}: {runner.caveat}" for runner in ran if runner.caveat]
    return notes


def draft_path(speculative_config: dict | None) -> str | None:
    """The draft model whose acceptance a traced scenario records at every output position."""
    spec = speculative_config or {}
    return spec.get("model") if method_of(str(spec.get("method"))).draft_over_output else None


def add_draft_acceptance(trace: dict, draft, prompts: list[list[int]], outputs: list[list[int]], memo: dict) -> None:
    """Per request of a call's trace, what `draft` (a draft_lm.DraftLM) would accept at every output
    position; computed once per distinct prompt and output (`memo`), after the call's timing."""
    for request, prompt, output in zip(trace["requests"], prompts, outputs):
        key = (tuple(prompt), tuple(output))
        if key not in memo:
            memo[key] = draft.acceptance_lengths(prompt, output[:MAX_POSITIONS], ngram.STUDY_MAX_DRAFT)
        if request is not None:
            request["draft_acc"] = memo[key]


def _hooked_counts(hooked: dict, request_id: str) -> dict | None:
    """The hook's counts of a request: the engine may suffix the id it was given ("7" -> "7-1a2b3c4d")."""
    engine_id = (
        request_id if request_id in hooked else next((e for e in hooked if e.rsplit("-", 1)[0] == request_id), None)
    )
    if engine_id is None:
        return None
    drafted, accepted = hooked[engine_id]
    return {"drafted": drafted, "accepted": accepted}


# ---------------------------------------------------------------- in the suite


def merge_calls(traces: list[dict | None]) -> dict | None:
    """The calls of one round as one trace."""
    if not traces or any(t is None for t in traces):
        return None
    return {
        "steps": [s for t in traces for s in t["steps"]],
        "requests": [r for t in traces for r in t["requests"]],
        "notes": list(dict.fromkeys(n for t in traces for n in t["notes"])),
    }


def ngram_acceptance(prompts: list[list[int]], outputs: list[list[int]], window: tuple[int, int]) -> list[list[int]]:
    """Per request, n-gram's acceptance length at each output position (replicas computed once),
    for the first MAX_POSITIONS positions of the run."""
    done: dict[tuple, list[int]] = {}
    lengths, budget = [], MAX_POSITIONS
    for prompt, output in zip(prompts, outputs):
        key = (tuple(prompt), tuple(output))
        if key not in done and budget >= len(output):
            done[key] = ngram.acceptance_lengths(prompt, output, window)
            budget -= len(output)
        lengths.append(done.get(key, []))
    return lengths


def build_trace(
    round_traces: list[dict | None],
    requests: list[Request],
    output_tokens: int,
    ngram_acc: list[list[int]] | None = None,
    prompt_lens: list[int] | None = None,
) -> Trace | None:
    """The result's trace: per-step lists of the last round, totals over all of them."""
    traced = [t for t in round_traces if t is not None]
    if not traced:
        return None
    last = traced[-1]
    steps = [s for t in traced for s in t["steps"]]
    seconds = {part: sum(s[i] for s in steps) for i, part in enumerate(STEP_PARTS)}
    seconds["rest"] = seconds["total"] - seconds["draft"] - seconds["forward"] - seconds["sample"]
    counts = [r for t in traced for r in t["requests"] if r is not None]
    notes = list(last["notes"])
    if len(last["steps"]) > MAX_STEPS:
        notes.append(f"per-step times: the first {MAX_STEPS} of {len(last['steps'])} steps kept")
    ngram_acc = ngram_acc or [[] for _ in requests]
    if any(not a for a, r in zip(ngram_acc, last["requests"]) if r is not None) and any(ngram_acc):
        notes.append(f"n-gram acceptance: the first {MAX_POSITIONS} output positions only")
    return Trace(
        requests=[
            RequestTrace(
                request_id=request.id,
                drafted=r["drafted"],
                accepted=r["accepted"],
                ngram_acc=a,
                draft_acc=r.get("draft_acc", []),
                prompt_len=n,
            )
            for request, r, a, n in zip(requests, last["requests"], ngram_acc, prompt_lens or [0] * len(requests))
            if r is not None
        ],
        step_us={part: [round(s[i] * 1e6) for s in last["steps"][:MAX_STEPS]] for i, part in enumerate(STEP_PARTS)},
        step_batch={
            name: [int(s[len(STEP_PARTS) + i]) for s in last["steps"][:MAX_STEPS]] for i, name in enumerate(STEP_BATCH)
        },
        seconds=seconds,
        steps=len(steps),
        output_tokens=output_tokens,
        drafted=sum(sum(r["drafted"]) for r in counts),
        accepted=sum(sum(r["accepted"]) for r in counts),
        notes=notes,
    )
