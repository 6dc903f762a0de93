"""A vLLM general plugin that times the parts of every engine step, for specperf's traces.

specperf puts this folder on an engine's path only when its scenario is traced, so vLLM loads the
plugin there and nowhere else.  It wraps, once vLLM has imported them:

- ``EngineCore.step`` / ``step_with_batch_queue``: the whole step (scheduling, input preparation,
  the forward, sampling, drafting, bookkeeping);
- the V1 model runner's ``_model_forward`` (the target forward: verification with SD),
  ``_sample`` (sampling; rejection sampling with SD) and ``propose_draft_token_ids`` (drafting);
- the V1 scheduler's ``update_from_output``: the step's batch (tokens in the forward, KV-cache
  tokens its requests hold, requests) and, per request, the draft tokens it scheduled for
  verification and how many the sampled tokens accepted, counted as vLLM's own counters count
  them.  This is the per-step acceptance for a vLLM without public per-request metrics (before
  0.29); where those exist, it is a cross-check of them.

Every step appends ``[total, draft, forward, sample]`` seconds and ``[tokens, kv_tokens,
requests]`` to ``STEPS`` (the order run/tracing.py reads); ``drain()`` hands them over, and
``drain_acceptance()`` the per-request counts, keyed by the engine's request id.  The parts count
where the runner shares the engine core's process (tensor parallel size 1, as specperf runs
engines); elsewhere they stay 0.  On CUDA each timed part synchronizes the device first and last,
so GPU work counts in the part that launched it: only while tracing.
Checked against vLLM 0.29 and 0.32; ``MISSING`` names any hook the installed vLLM lacks.
"""

import sys
import time

from specperf.run.after_import import after_import

STEPS: list[list[float]] = []
ACCEPTANCE: dict[str, tuple[list[int], list[int]]] = {}  # request id: (drafted, accepted) per step
MISSING: list[str] = []
RUNNER_PARTS = {"propose_draft_token_ids": 1, "_model_forward": 2, "_sample": 3}
STEP_FIELDS = ("total", "draft", "forward", "sample", "tokens", "kv_tokens", "requests")
_step = [0.0] * len(STEP_FIELDS)  # the step in progress
_depth = [0]  # a part inside another counts in the outer one only
_clock = time.perf_counter


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


def _timed_part(original, index: int):
    def timed(self, *args, **kwargs):
        if _depth[0]:
            return original(self, *args, **kwargs)
        _depth[0] += 1
        _sync()
        t0 = _clock()
        try:
            return original(self, *args, **kwargs)
        finally:
            _sync()
            _step[index] += _clock() - t0
            _depth[0] -= 1

    return timed


def _timed_step(original):
    def timed(self, *args, **kwargs):
        _step[:] = [0.0] * len(STEP_FIELDS)
        _sync()
        t0 = _clock()
        result = original(self, *args, **kwargs)
        _sync()
        _step[0] = _clock() - t0
        if result and result[1]:  # (outputs, model_executed): idle steps are not steps
            STEPS.append(list(_step))
        return result

    return timed


def _patch_engine_core(module) -> None:
    for name in ("step", "step_with_batch_queue"):
        if hasattr(module.EngineCore, name):
            setattr(module.EngineCore, name, _timed_step(getattr(module.EngineCore, name)))
        else:
            MISSING.append(f"EngineCore.{name}")


def _patch_runner(module) -> None:
    for name, index in RUNNER_PARTS.items():
        if hasattr(module.GPUModelRunner, name):
            setattr(module.GPUModelRunner, name, _timed_part(getattr(module.GPUModelRunner, name), index))
        else:
            MISSING.append(f"GPUModelRunner.{name}")


def _counted_update(original):
    def update_from_output(self, scheduler_output, model_runner_output):
        scheduled = getattr(scheduler_output, "scheduled_spec_decode_tokens", None) or {}
        sampled = getattr(model_runner_output, "sampled_token_ids", None)
        index = getattr(model_runner_output, "req_id_to_index", None) or {}
        bonus = getattr(self, "num_sampled_tokens_per_step", 1)  # the bonus token (0 for pooling)
        batch = getattr(scheduler_output, "num_scheduled_tokens", None) or {}
        running = getattr(self, "requests", {})
        _step[4:] = [
            getattr(scheduler_output, "total_num_scheduled_tokens", 0),
            sum(running[r].num_computed_tokens for r in batch if r in running),
            len(batch),
        ]
        for request_id, draft in scheduled.items():
            if draft and sampled and request_id in index and len(sampled[index[request_id]]):
                drafted, accepted = ACCEPTANCE.setdefault(request_id, ([], []))
                drafted.append(len(draft))
                accepted.append(max(len(sampled[index[request_id]]) - bonus, 0))
        return original(self, scheduler_output, model_runner_output)

    return update_from_output


def _patch_scheduler(module) -> None:
    if hasattr(module.Scheduler, "update_from_output"):
        module.Scheduler.update_from_output = _counted_update(module.Scheduler.update_from_output)
    else:
        MISSING.append("Scheduler.update_from_output")


def register() -> None:
    if getattr(register, "done", False):
        return
    register.done = True
    after_import("vllm.v1.engine.core", _patch_engine_core)
    after_import("vllm.v1.worker.gpu_model_runner", _patch_runner)
    after_import("vllm.v1.core.sched.scheduler", _patch_scheduler)
