"""The serving mode's load generator: streamed completions against an OpenAI-compatible server.

A round sends every prompt once (token ids, as the offline mode sends them, or text), greedy or
with each request's sampling keywords (its seed among them), at most `concurrency` in flight,
arriving all at once or (with `request_rate`) as a seeded Poisson process, each streamed back as
server-sent events.  Per request it keeps what `vllm bench serve`
keeps, defined as it defines them (vllm/benchmarks/lib/endpoint_request_func.py): time to first
token at the first event that carries a choice, an inter-token latency for every later one (an
event may carry several tokens when drafts are accepted), the end-to-end latency at the last one,
and the output tokens the server counted; TPOT is (latency - TTFT) / (tokens - 1).  The round's
own CPU time is measured too: on a small machine the client can be the bottleneck, and the round
says so.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field

import httpx

CLIENT_BOUND = 0.8  # the client used this share of one core or more: its figures are the client's
PERCENTILES = (50, 90, 99)
LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
Prompt = list[int] | str  # token ids (the suite's own prompts), or text


@dataclass
class RequestTiming:
    """One streamed request; times in seconds, `sent_s` from the round's start."""

    sent_s: float = 0.0
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    e2e_s: float | None = None
    output_tokens: int = 0
    text: str = ""
    token_ids: list[int] = field(default_factory=list)  # where the server returns them (return_token_ids)
    finish_reason: str | None = None  # "stop" (EOS), "length", ...
    error: str | None = None  # a request that failed or timed out, one line
    acceptance: dict | None = None  # vLLM's per-request SD counts (the final usage event's metrics), if sent

    @property
    def tpot_s(self) -> float | None:
        if self.error or self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass
class LoadRound:
    """One round of requests and what it comes to."""

    requests: list[RequestTiming]
    wall_s: float
    client_cpu_s: float

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.requests if r.error is None)

    @property
    def throughput(self) -> float:
        """Output tokens per second over the round."""
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def errors(self) -> int:
        return sum(r.error is not None for r in self.requests)

    @property
    def client_bound(self) -> bool:
        """The client, not the server, may have set the pace (it kept a core busy)."""
        return self.wall_s > 0 and self.client_cpu_s / self.wall_s >= CLIENT_BOUND

    def latencies(self, name: str) -> list[float]:
        """Every value of one latency over the round's successful requests (every gap, for ITL)."""
        done = [r for r in self.requests if r.error is None]
        if name == "itl_s":
            return [gap for r in done for gap in r.itl_s]
        return [value for r in done if (value := getattr(r, name)) is not None]

    def percentiles(self) -> dict[str, float | None]:
        """p50, p90 and p99 of each latency (`ttft_s_p50`, ...); None where the round has none."""
        import numpy as np

        found: dict[str, float | None] = {}
        for name in LATENCIES:
            values = self.latencies(name)
            for p in PERCENTILES:
                found[f"{name}_p{p}"] = float(np.percentile(values, p)) if values else None
        return found


DONE = "[DONE]"


def parse_event(line: str) -> dict | str | None:
    """One server-sent event line: its JSON, DONE for the closing event, None for other lines."""
    if not line.startswith("data:"):
        return None
    data = line[len("data:") :].strip()
    if data == DONE:
        return DONE
    return json.loads(data) if data else None


async def stream_request(
    client: httpx.AsyncClient, url: str, body: dict, started: float, timeout_s: float
) -> RequestTiming:
    timing = RequestTiming(sent_s=time.perf_counter() - started)
    t0 = time.perf_counter()
    last = t0
    try:
        async with client.stream("POST", f"{url}/v1/completions", json=body, timeout=timeout_s) as reply:
            if reply.status_code != 200:
                detail = (await reply.aread()).decode("utf-8", "replace")[:200]
                timing.error = f"HTTP {reply.status_code}: {' '.join(detail.split())}"
                return timing
            finished = False
            async for line in reply.aiter_lines():
                event = parse_event(line)
                if event is DONE:
                    finished = True
                if not isinstance(event, dict):
                    continue
                if "error" in event or event.get("object") == "error":  # vLLM streams a failure, then [DONE]
                    failure = event.get("error") if isinstance(event.get("error"), dict) else event
                    timing.error = f"the server failed the request: {' '.join(str(failure.get('message')).split())}"
                    return timing
                now = time.perf_counter()
                choices = event.get("choices") or []
                if choices:
                    if timing.ttft_s is None:
                        timing.ttft_s = now - t0
                    else:
                        timing.itl_s.append(now - last)
                    last = now
                    timing.text += "".join(choice.get("text") or "" for choice in choices)
                    timing.token_ids += [t for choice in choices for t in choice.get("token_ids") or []]
                    timing.finish_reason = choices[-1].get("finish_reason") or timing.finish_reason
                usage = event.get("usage")
                if usage:
                    timing.output_tokens = int(usage.get("completion_tokens") or 0)
                sd = (event.get("metrics") or {}).get("speculative_decoding") or {}
                histogram, drafted = sd.get("acceptance_histogram"), sd.get("num_draft_tokens")
                if isinstance(histogram, list) and all(type(n) is int for n in histogram) and type(drafted) is int:
                    timing.acceptance = {"histogram": histogram, "drafted": drafted}
                if any(choice.get("finish_reason") == "abort" for choice in choices):
                    timing.error = "the server aborted the request"
                    return timing
            if not finished:
                timing.error = f"the stream ended before {DONE} (the server went away)"
                return timing
        if timing.ttft_s is None:
            timing.error = "the stream carried no token"
            return timing
        if timing.finish_reason is None:
            timing.error = "the stream closed without a finish reason (the server stopped mid-request)"
            return timing
        timing.e2e_s = last - t0
    except (httpx.HTTPError, json.JSONDecodeError, OSError) as err:
        timing.error = f"{type(err).__name__}: {' '.join(str(err).split()) or 'no detail'}"
    return timing


async def _round(
    url: str,
    model: str,
    prompts: list[Prompt],
    max_tokens: int,
    concurrency: int,
    request_rate: float | None,
    seed: int,
    timeout_s: float,
    params: list[dict] | None,
) -> tuple[list[RequestTiming], float]:
    rng = random.Random(seed)
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=timeout_s) as client:
        started = time.perf_counter()

        async def send(prompt: Prompt, delay_s: float, sampling: dict) -> RequestTiming:
            await asyncio.sleep(delay_s)
            async with gate:
                body = {
                    "model": model,
                    "prompt": prompt,
                    "max_tokens": max_tokens,
                    "temperature": 0.0,
                    **sampling,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    "return_token_ids": True,  # vLLM's: outputs compared token by token; older ones ignore it
                }
                return await stream_request(client, url, body, started, timeout_s)

        arrivals, at = [], 0.0
        for _ in prompts:
            arrivals.append(at)
            if request_rate:
                at += rng.expovariate(request_rate)
        sampled = params or [{}] * len(prompts)
        timings = await asyncio.gather(*(send(p, d, s) for p, d, s in zip(prompts, arrivals, sampled)))
        return list(timings), time.perf_counter() - started


def run_round(
    url: str,
    model: str,
    prompts: list[Prompt],
    max_tokens: int,
    concurrency: int,
    request_rate: float | None = None,
    seed: int = 42,
    timeout_s: float = 600.0,
    params: list[dict] | None = None,
) -> LoadRound:
    """Send every prompt once (`params`: each request's sampling keywords; None: greedy); returns when
    all have finished or failed."""
    cpu0 = time.process_time()
    timings, wall_s = asyncio.run(
        _round(url, model, prompts, max_tokens, concurrency, request_rate, seed, timeout_s, params)
    )
    return LoadRound(timings, wall_s, time.process_time() - cpu0)
