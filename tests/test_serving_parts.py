"""The serving mode's pure parts: the server's command line, its SD counters read from Prometheus
text, server-sent events, and what a round of streamed requests comes to."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from specperf.judge.metrics import acceptance, counter_delta
from specperf.run.builds.arguments import VllmFacts
from specperf.run.engines.engine import EngineConfig, EngineError
from specperf.run.serving.load import DONE, LoadRound, RequestTiming, parse_event, stream_request
from specperf.run.serving.server import SERVER_MODULE, Server, server_arguments, server_command
from specperf.run.serving.server_metrics import spec_counters

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 3, "prompt_lookup_max": 7}


def config(**engine_args) -> EngineConfig:
    return EngineConfig("/ckpt/smollm2", None, 1, 42, NGRAM, engine_args, {"OMP_NUM_THREADS": "1"})


VLLM_0_32 = VllmFacts("0.32.0", frozenset({"model", "enforce_eager", "attention_backend"}))


def test_the_server_gets_the_offline_engines_arguments_and_the_mapped_speculative_config():
    args = server_arguments(config(enforce_eager=True, dtype="float32", max_num_seqs=None), VLLM_0_32).kwargs
    assert args["enforce-eager"] is True and args["dtype"] == "float32" and "max-num-seqs" not in args
    assert args["enable-prefix-caching"] is False and args["seed"] == 42  # pinned and set as offline
    assert args["speculative-config"]["method"] == "ngram" and "model" not in args
    command = server_command("/env/bin/python", config(), 8123, Path("/run/server.args.json"))
    assert command[:3] == ["/env/bin/python", "-m", SERVER_MODULE]
    assert command[3:] == [
        "--model",
        "/ckpt/smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--config",
        "/run/server.args.json",
    ]


def test_the_server_runs_its_engine_core_beside_it_not_in_process():
    env = server_arguments(config(), VLLM_0_32).env
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env and env["OMP_NUM_THREADS"] == "1"


def test_a_method_the_servers_vllm_cannot_run_fails_its_start_in_one_line_as_offline(tmp_path):
    draft = {"method": "draft_model", "model": "/ckpt/draft", "num_speculative_tokens": 3}
    cfg = EngineConfig("/ckpt/smollm2", None, 1, 42, draft)
    server = Server(cfg, tmp_path / "server.log", VllmFacts("0.14.0", frozenset()))
    with pytest.raises(
        EngineError, match=r"^unsupported: method draft_model needs vLLM >= 0.15.0 \(installed 0.14.0\)$"
    ):
        server.start()
    assert server.process is None and not server.commands  # nothing was launched


METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 40.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 120.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 66.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 14.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 22.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1.0
"""


def test_the_sd_counters_are_read_from_prometheus_text_per_position_by_label():
    assert spec_counters(METRICS) == {
        "drafts": 40,
        "draft_tokens": 120,
        "accepted": 66,
        "accepted_per_pos": [30, 22, 14],
    }


def test_a_rounds_acceptance_is_the_difference_of_two_readings_as_offline():
    before = spec_counters(METRICS)
    after = spec_counters(METRICS.replace("} 40.0", "} 50.0").replace("} 66.0", "} 81.0").replace("} 30.0", "} 38.0"))
    delta = counter_delta(before, after)
    assert (delta.drafts, delta.accepted, delta.accepted_per_pos) == (10, 15, [8, 0, 0])
    assert acceptance(delta)["mean_acceptance_length"] == pytest.approx(2.5)


def test_a_server_without_sd_has_no_counters():
    assert spec_counters("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n") == {
        "drafts": 0,
        "draft_tokens": 0,
        "accepted": 0,
        "accepted_per_pos": [],
    }


def test_server_sent_events_are_parsed_and_the_closing_line_ends_them():
    assert parse_event('data: {"choices": [{"text": "hi"}]}') == {"choices": [{"text": "hi"}]}
    assert parse_event("data: [DONE]") == DONE
    assert parse_event(": keep-alive") is None and parse_event("") is None


def streamed(*events: dict | str) -> RequestTiming:
    """What the client makes of a server that streams these events (a dict is JSON, a str as is)."""
    body = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)

    async def ask() -> RequestTiming:
        transport = httpx.MockTransport(lambda request: httpx.Response(200, text=body))
        async with httpx.AsyncClient(transport=transport) as client:
            return await stream_request(client, "http://server", {}, 0.0, 5.0)

    return asyncio.run(ask())


TOKEN = {"choices": [{"text": "a", "token_ids": [7], "finish_reason": None}]}
LAST = {"choices": [{"text": "b", "token_ids": [8], "finish_reason": "length"}]}
USAGE = {"choices": [], "usage": {"completion_tokens": 2}}


@pytest.mark.parametrize(
    "events, error",
    [
        ((TOKEN, LAST, USAGE, DONE), None),
        ((TOKEN, LAST, USAGE), "ended before [DONE]"),
        ((TOKEN, {"error": {"message": "engine  dead", "code": 500}}, DONE), "failed the request: engine dead"),
        ((TOKEN, {"object": "error", "message": "engine dead"}, DONE), "failed the request: engine dead"),
        ((TOKEN, USAGE, DONE), "without a finish reason"),
        ((USAGE, DONE), "carried no token"),
    ],
    ids=["complete", "cut-off", "error-event", "old-error-event", "no-finish-reason", "no-token"],
)
def test_a_streamed_request_is_an_error_unless_it_finished(events, error):
    timing = streamed(*events)
    if error is None:
        assert timing.error is None and timing.token_ids == [7, 8] and timing.output_tokens == 2
        assert timing.finish_reason == "length" and timing.e2e_s is not None
    else:
        assert timing.error and error in timing.error and "\n" not in timing.error


def test_tpot_excludes_the_first_token():
    request = RequestTiming(ttft_s=0.5, e2e_s=2.5, output_tokens=5)
    assert request.tpot_s == pytest.approx(0.5)  # (2.5 - 0.5) / 4
    assert RequestTiming(ttft_s=0.5, e2e_s=0.5, output_tokens=1).tpot_s is None
    assert RequestTiming(ttft_s=0.5, e2e_s=2.5, output_tokens=5, error="HTTP 500").tpot_s is None


def test_a_round_counts_its_tokens_and_latencies_over_the_requests_that_succeeded():
    done = [RequestTiming(ttft_s=0.1 * i, itl_s=[0.05, 0.07], e2e_s=1.0 + i, output_tokens=10) for i in range(1, 5)]
    failed = RequestTiming(error="ReadTimeout: timed out", output_tokens=3)
    round_ = LoadRound(done + [failed], wall_s=4.0, client_cpu_s=0.4)
    assert round_.output_tokens == 40 and round_.throughput == 10.0 and round_.errors == 1
    assert len(round_.latencies("itl_s")) == 8
    shown = round_.percentiles()
    assert shown["ttft_s_p50"] == pytest.approx(0.25) and shown["e2e_s_p99"] == pytest.approx(4.97)
    assert not round_.client_bound
    assert LoadRound(done, wall_s=1.0, client_cpu_s=0.9).client_bound
    assert LoadRound([failed], wall_s=1.0, client_cpu_s=0.0).percentiles()["tpot_s_p90"] is None


SERVE_PROFILE = """
[profile]
name = "serving"
tier = "cpu"
rounds = 3
num_requests = 4
output_len = 16
trace = true

[models.smollm2-135m]
path = "builtin:smollm2-135m"

[methods.ngram-k3]
method = "ngram"
num_speculative_tokens = 3

[[cells]]
model = "smollm2-135m"
methods = ["ngram-k3"]
batch_sizes = [1]
datasets = ["instructcoder"]

[[cells]]
model = "smollm2-135m"
methods = ["ngram-k3"]
mode = "serve"
concurrencies = [1, 4]
datasets = ["instructcoder", "gsm8k"]
"""


def serving_profile(tmp_path, text=SERVE_PROFILE):
    from specperf.profiles.scenarios import load_profile

    path = tmp_path / "serving.toml"
    path.write_text(text)
    return load_profile(str(path))


def test_serve_cells_expand_by_concurrency_with_ids_that_say_so_and_share_one_server_per_key(tmp_path):
    scenarios = {s.id: s for s in serving_profile(tmp_path).scenarios}
    served = [s for s in scenarios.values() if s.serves]
    assert sorted(s.id for s in served) == sorted(
        f"smollm2-135m-{m}-c{c}-{d}-serve"
        for m in ("nosd", "ngram-k3")
        for c in (1, 4)
        for d in ("instructcoder", "gsm8k")
    )
    sd = scenarios["smollm2-135m-ngram-k3-c4-gsm8k-serve"]
    assert sd.reference_id == "smollm2-135m-nosd-c4-gsm8k-serve" and sd.reference_id in scenarios
    assert not sd.trace and sd.batch_size == 1 and sd.concurrency == 4  # the profile traces; a server is not
    keys = {s.engine_key for s in served if not s.is_reference}
    assert len(keys) == 1 and keys != {scenarios["smollm2-135m-ngram-k3-bs1-instructcoder-traced"].engine_key}
    assert sd.hash != scenarios["smollm2-135m-ngram-k3-c1-gsm8k-serve"].hash  # the load changes what is measured


@pytest.mark.parametrize(
    "cell, error",
    [
        ('mode = "serve"\nbatch_sizes = [1]', "cells[1].concurrencies: a serve cell needs concurrencies"),
        (
            'mode = "serve"\nconcurrencies = [2]\nbatch_sizes = [1]',
            "cells[1].batch_sizes: a serve cell has concurrencies instead",
        ),
        ('mode = "serve"\nconcurrencies = [2]\ntrace = true', "cells[1].trace: serve scenarios are not traced"),
        ("batch_sizes = [1]\nconcurrencies = [2]", 'cells[1].concurrencies: a serve setting (mode = "serve")'),
        ("batch_sizes = [1]\nrequest_rate = 2.0", 'cells[1].request_rate: a serve setting (mode = "serve")'),
        ('mode = "serve"\nconcurrencies = [0]', "cells[1].concurrencies[0]"),
        ('mode = "served"\nconcurrencies = [2]', "cells[1].mode"),
    ],
)
def test_a_serve_cell_that_cannot_work_is_one_line_naming_its_field(tmp_path, cell, error):
    from specperf.profiles.scenarios import ProfileError

    text = SERVE_PROFILE.split("[[cells]]")[0] + "[[cells]]" + SERVE_PROFILE.split("[[cells]]")[1]
    text += f'\n[[cells]]\nmodel = "smollm2-135m"\nmethods = ["ngram-k3"]\ndatasets = ["gsm8k"]\n{cell}\n'
    with pytest.raises(ProfileError) as raised:
        serving_profile(tmp_path, text)
    assert error in str(raised.value) and "\n" not in str(raised.value)


def served_rounds(tpots_ms: list[float], tokens: int = 32) -> list:
    from specperf.records import Counters
    from specperf.run.loop import RoundResult

    latency = {f"{n}_s_p{p}": 0.01 for n in ("ttft", "tpot", "itl", "e2e") for p in (50, 90, 99)}
    return [
        RoundResult(
            engine="current#1",
            wall_s=1.0,
            output_tokens=tokens,
            counters=Counters(),
            token_ids=[[1] * tokens],
            texts=["x"],
            latency={**latency, "tpot_s_p50": t / 1000},
        )
        for t in tpots_ms
    ]


def test_a_serve_sd_scenario_gets_its_tpot_speedup_against_the_no_sd_servers_tpot(tmp_path):
    from specperf.run.gate.sides import reference_from_alternating_rounds
    from specperf.run.summary import Reference, summarise

    scenarios = {s.id: s for s in serving_profile(tmp_path).scenarios}
    ref_scenario, sd = scenarios["smollm2-135m-nosd-c4-gsm8k-serve"], scenarios["smollm2-135m-ngram-k3-c4-gsm8k-serve"]
    reference = summarise(ref_scenario, served_rounds([20.0, 22.0, 24.0, 20.0]), [], None)
    assert "tpot_speedup" not in reference.metrics
    unpaired = Reference.of(reference.metrics, reference.output_hashes)
    assert unpaired.tpot_ms == 21.0
    judged = summarise(sd, served_rounds([10.0, 14.0, 7.0, 10.5]), [], unpaired)
    assert judged.metrics["tpot_speedup"].samples == pytest.approx([2.1, 1.5, 3.0, 2.0])
    assert judged.metrics["tpot_speedup"].value == pytest.approx(2.05)
    # paired: each SD round over the no-SD round that alternated with it, not over their median
    paired = reference_from_alternating_rounds(served_rounds([20.0, 22.0, 24.0, 20.0]))
    judged = summarise(sd, served_rounds([10.0, 11.0, 12.0, 10.0]), [], paired)
    assert judged.metrics["tpot_speedup"].samples == pytest.approx([2.0, 2.0, 2.0, 2.0])


def test_an_offline_reference_gives_no_tpot_speedup(tmp_path):
    from specperf.run.gate.sides import reference_from_alternating_rounds
    from specperf.run.summary import Reference

    assert Reference.of({}, []).tpot_ms is None
    offline = served_rounds([20.0, 20.0])
    for r in offline:
        r.latency = None
    assert reference_from_alternating_rounds(offline).paired_tpot_ms is None


def test_a_server_launched_from_a_thread_that_ends_lives_on_and_dies_with_its_group():
    # The pool starts engines from short-lived threads; the parent-death signal must not follow them.
    import os
    import signal
    import threading
    import time

    from specperf.run.serving.server import launch

    started = []
    thread = threading.Thread(target=lambda: started.append(launch(["sleep", "30"])))
    thread.start()
    thread.join()
    (process,) = started
    try:
        time.sleep(0.5)
        assert process.poll() is None, "the server died with the thread that launched it"
        assert os.getpgid(process.pid) == process.pid  # a process group of its own
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
