"""A vLLM general plugin that times the parts of every engine step, for specperf's traces.

specperf puts this folder on an engine's path only when its scenario is traced, so vLLM loads the
plugin there and nowhere else.  It wraps, once vLLM has imported them:

- ``EngineCore.step`` / ``step_with_batch_queue``: the whole step (scheduling, input preparation,
  the forward, sampling, drafting, bookkeeping);
- the parts of each model runner in ``RUNNERS`` (vLLM picks one: Model Runner V2 on CUDA with
  Triton, ``VllmConfig.use_v2_model_runner``; V1 elsewhere, the CPU runner included):

  - V1 (``vllm.v1.worker.gpu_model_runner``): ``_model_forward`` the target forward alone (the
    logits count in the rest), ``_sample`` the sampler (rejection sampling with SD),
    ``propose_draft_token_ids`` drafting;
  - V2 (``vllm.v1.worker.gpu.model_runner``): ``execute_model`` the forward *with* the step's input
    preparation (request states, inputs, attention metadata: V2 has no narrower method around the
    model alone), ``sample`` the logits and the sampler, and ``propose`` of the speculator that
    ``init_speculator`` builds, drafting;

- the V1 scheduler's ``schedule``: the step's batch (tokens in the forward, KV-cache tokens its
  requests hold, requests), read from the batch the step scheduled, and so the batch the step's
  parts ran, with async scheduling too (``step_with_batch_queue`` schedules and runs a batch, then
  takes the previous batch's output);
- the V1 scheduler's ``update_from_output``: per request, the draft tokens a batch scheduled for
  verification and how many the sampled tokens accepted, counted as vLLM's own counters count
  them.  This is the per-step acceptance for a vLLM without public per-request metrics (before
  0.29); where those exist, it is a cross-check of them.  Under async scheduling the previous
  batch's rejected drafts reach the scheduler only after the step's batch was scheduled: they are
  taken off that batch's KV-cache tokens here, as a synchronous step would have counted them.

Every step appends ``[total, draft, forward, sample]`` seconds and ``[tokens, kv_tokens,
requests]`` to ``STEPS`` (the order run/tracing/trace.py reads); ``drain()`` hands them over, and
``drain_acceptance()`` the per-request counts, keyed by the engine's request id.  ``TIMED`` names
the runners whose parts ran in this process, ``MISSING`` the hooks the installed vLLM lacks; the
engine log says once which runner's parts are timed, or that none ran here.  The parts count where
the runner shares the engine core's process (tensor parallel size 1, as specperf runs engines);
elsewhere they stay 0.  On CUDA each timed part synchronizes the device first and last, so GPU
work counts in the part that launched it: only while tracing.
Checked against vLLM 0.29 and 0.32 (``tests/cpu_tier/test_step_timer_targets.py``).
"""

import functools
import logging
import sys
import time
from typing import NamedTuple

from specperf.run.tracing.after_import import after_import

STEP_FIELDS = ("total", "draft", "forward", "sample", "tokens", "kv_tokens", "requests")
TOKENS, KV_TOKENS = STEP_FIELDS.index("tokens"), STEP_FIELDS.index("kv_tokens")


class Runner(NamedTuple):
    """A model runner whose parts the timer times.  `parts`: per part (a STEP_FIELDS name), the
    target in `module` whose time it takes: "Class.method", or "factory().method", that method of
    each object the module-level factory builds."""

    name: str
    module: str
    parts: dict[str, str]
    caveat: str | None  # where a part holds more than its name says: a note in every trace it times


RUNNERS = (
    Runner(
        "Model Runner V1",
        "vllm.v1.worker.gpu_model_runner",
        {
            "draft": "GPUModelRunner.propose_draft_token_ids",
            "forward": "GPUModelRunner._model_forward",
            "sample": "GPUModelRunner._sample",
        },
        None,
    ),
    Runner(
        "Model Runner V2",
        "vllm.v1.worker.gpu.model_runner",
        {
            "draft": "init_speculator().propose",
            "forward": "GPUModelRunner.execute_model",
            "sample": "GPUModelRunner.sample",
        },
        "its forward includes the step's input preparation, its sampling the logits",
    ),
)
NOT_TIMED = (
    "step parts not timed: no model runner the step timer patches ("
    + ", ".join(r.name for r in RUNNERS)
    + ") ran in the engine core's process (with tensor parallelism the runner runs in its workers; "
    "else the installed vLLM runs a runner the timer does not know)"
)

STEPS: list[list[float]] = []
ACCEPTANCE: dict[str, tuple[list[int], list[int]]] = {}  # request id: (drafted, accepted) per step
MISSING: dict[str, list[str]] = {}  # "EngineCore", "Scheduler" or a runner's name: its hooks vLLM lacks
TIMED: set[str] = set()  # the runners whose parts ran in this process
_step = [0.0] * len(STEP_FIELDS)  # the step in progress
_scheduled: list = [None]  # the scheduler output of the step in progress
_depth = [0]  # a part inside another counts in the outer one only
_said = [False]  # the engine log told which runner is timed
_clock = time.perf_counter
_log = logging.getLogger("vllm.specperf_step_timer")  # vLLM's log handler, once vLLM set it up


def drain() -> list[list[float]]:
    """The steps timed since the last call."""
    steps = list(STEPS)
    STEPS.clear()
    return steps


def drain_acceptance() -> dict[str, tuple[list[int], list[int]]]:
    """Each request's (drafted, accepted) per verification step since the last call."""
    counts = dict(ACCEPTANCE)
    ACCEPTANCE.clear()
    return counts


def _sync() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _timed_part(original, index: int, runner: str):
    @functools.wraps(original)
    def timed(*args, **kwargs):
        if _depth[0]:
            return original(*args, **kwargs)
        TIMED.add(runner)
        _depth[0] += 1
        _sync()
        t0 = _clock()
        try:
            return original(*args, **kwargs)
        finally:
            _sync()
            _step[index] += _clock() - t0
            _depth[0] -= 1

    return timed


def _timing_what_it_builds(factory, method: str, index: int, runner: str):
    @functools.wraps(factory)
    def build(*args, **kwargs):
        built = factory(*args, **kwargs)
        if hasattr(built, method):
            setattr(built, method, _timed_part(getattr(built, method), index, runner))
        elif built is not None:
            MISSING.setdefault(runner, []).append(f"{type(built).__name__}.{method}")
        return built

    return build


def _say_once() -> None:
    if _said[0]:
        return
    _said[0] = True
    if TIMED:
        _log.info("specperf step timer: timing the step parts of %s", ", ".join(sorted(TIMED)))
    else:
        _log.warning("specperf step timer: %s", NOT_TIMED)


def _timed_step(original):
    @functools.wraps(original)
    def timed(self, *args, **kwargs):
        _step[:] = [0.0] * len(STEP_FIELDS)
        _scheduled[0] = None
        _sync()
        t0 = _clock()
        result = original(self, *args, **kwargs)
        _sync()
        _step[0] = _clock() - t0
        if result and result[1]:  # (outputs, model_executed): idle steps are not steps
            STEPS.append(list(_step))
            _say_once()
        return result

    return timed


def _patch_engine_core(module) -> None:
    for name in ("step", "step_with_batch_queue"):
        if hasattr(module.EngineCore, name):
            setattr(module.EngineCore, name, _timed_step(getattr(module.EngineCore, name)))
        else:
            MISSING.setdefault("EngineCore", []).append(f"EngineCore.{name}")


def _patch_runner(runner: Runner, module) -> None:
    for part, target in runner.parts.items():
        holder, name = target.split(".")
        index = STEP_FIELDS.index(part)
        if holder.endswith("()") and callable(getattr(module, holder[:-2], None)):
            factory = getattr(module, holder[:-2])
            setattr(module, holder[:-2], _timing_what_it_builds(factory, name, index, runner.name))
        elif hasattr(getattr(module, holder, None), name):
            owner = getattr(module, holder)
            setattr(owner, name, _timed_part(getattr(owner, name), index, runner.name))
        else:
            MISSING.setdefault(runner.name, []).append(target)


def _recorded_schedule(original):
    @functools.wraps(original)
    def schedule(self, *args, **kwargs):
        output = original(self, *args, **kwargs)
        batch = getattr(output, "num_scheduled_tokens", None) or {}
        running = getattr(self, "requests", {})
        _step[TOKENS:] = [
            getattr(output, "total_num_scheduled_tokens", 0),
            sum(running[r].num_computed_tokens for r in batch if r in running),
            len(batch),
        ]
        _scheduled[0] = output
        return output

    return schedule


def _counted_update(original):
    @functools.wraps(original)
    def update_from_output(self, scheduler_output, model_runner_output):
        scheduled = getattr(scheduler_output, "scheduled_spec_decode_tokens", None) or {}
        sampled = getattr(model_runner_output, "sampled_token_ids", None)
        index = getattr(model_runner_output, "req_id_to_index", None) or {}
        bonus = getattr(self, "num_sampled_tokens_per_step", 1)  # the bonus token (0 for pooling)
        # async scheduling: this output is an earlier batch's, and the step's batch is scheduled already
        step_batch = {} if scheduler_output is _scheduled[0] else getattr(_scheduled[0], "num_scheduled_tokens", {})
        for request_id, draft in scheduled.items():
            if draft and sampled and request_id in index and len(sampled[index[request_id]]):
                drafted, accepted = ACCEPTANCE.setdefault(request_id, ([], []))
                drafted.append(len(draft))
                accepted.append(max(len(sampled[index[request_id]]) - bonus, 0))
                if request_id in step_batch:  # vLLM rolls the rejected drafts back now
                    _step[KV_TOKENS] -= drafted[-1] - accepted[-1]
        return original(self, scheduler_output, model_runner_output)

    return update_from_output


def _patch_scheduler(module) -> None:
    for name, wrap in (("schedule", _recorded_schedule), ("update_from_output", _counted_update)):
        if hasattr(module.Scheduler, name):
            setattr(module.Scheduler, name, wrap(getattr(module.Scheduler, name)))
        else:
            MISSING.setdefault("Scheduler", []).append(f"Scheduler.{name}")


def register() -> None:
    if getattr(register, "done", False):
        return
    register.done = True
    after_import("vllm.v1.engine.core", _patch_engine_core)
    after_import("vllm.v1.core.sched.scheduler", _patch_scheduler)
    for runner in RUNNERS:
        after_import(runner.module, functools.partial(_patch_runner, runner))
