"""The messages between the suite and an engine process, one typed record each.

The suite sends Generate or Close down the pipe; the engine answers Ready once it has started, a
Reply to each Generate, and Failed when it cannot go on (then it exits).  Both ends import this
module from the same source (run/engines/engine.py puts this checkout first on the engine's path), so
the records pickle across the pipe whatever vLLM the engine's environment holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Generate:
    """One timed generate() call over token-id prompts: greedy, or each prompt drawn with its own
    SamplingParams keywords (`params`, one dict per prompt)."""

    prompts: list[list[int]]
    max_tokens: int
    params: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Batch:
    """A sampled offline call: its prompts, each with its SamplingParams keywords (its seed among
    them: records.Sampling.params).  Iterates over its prompts, as a greedy call does."""

    prompts: list[list[int]]
    params: list[dict[str, Any]]

    def __iter__(self):
        return iter(self.prompts)

    def __len__(self) -> int:
        return len(self.prompts)


@dataclass(frozen=True)
class Load:
    """A serve scenario's round as one call: its prompts sent as streamed requests to a server, at
    most `concurrency` in flight, arriving all at once or at `request_rate` per second (run/serving/load.py).
    Iterates over its prompts, as an offline call does."""

    prompts: list[list[int]]
    concurrency: int
    request_rate: float | None = None
    seed: int = 42
    params: list[dict[str, Any]] | None = None  # a sampled load: each request's sampling keywords

    def __iter__(self):
        return iter(self.prompts)

    def __len__(self) -> int:
        return len(self.prompts)


@dataclass(frozen=True)
class Close:
    """Exit when idle."""


@dataclass(frozen=True)
class Ready:
    start_s: float  # from the process's start to a loaded LLM
    pid: int
    provenance: dict[str, Any]  # vllm, torch, ... (run.engines.process.vllm_provenance)
    effective_config: dict[str, Any]  # what vLLM made of the engine arguments


@dataclass(frozen=True)
class Reply:
    """What one Generate measured."""

    wall_s: float
    output_tokens: int
    token_ids: list[list[int]]
    texts: list[str]
    counters_before: dict[str, Any]  # vLLM's cumulative SD counters (run.engines.process.read_spec_counters)
    counters_after: dict[str, Any]
    cpu_s: float | None = None  # CPU time of the engine's process tree over the call
    finish_reasons: list[str | None] = field(default_factory=list)  # per request: "stop" (EOS), "length", ...
    memory: dict[str, Any] = field(default_factory=dict)  # peak memory (run.engines.usage.peak_memory)
    trace: dict[str, Any] | None = None  # run.tracing.trace's raw trace of a traced engine
    latency: dict[str, float | None] | None = None  # a served Load: p50/p90/p99 of each latency (run/serving/load.py)
    client_bound: bool = False  # a served Load: the client, not the server, may have set the pace
    errors: int = 0  # a served Load: requests that failed
    # per request of an SD engine: vLLM's per-request counts (process.request_acceptance), None where it gave none
    request_acceptance: list[dict[str, Any] | None] | None = None


@dataclass(frozen=True)
class Failed:
    message: str  # one line
    traceback: str = ""
