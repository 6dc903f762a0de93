"""--serve-url: a running server measured as it says it is, asked over real HTTP (a small stand-in
server here; tests/cpu_tier/test_server.py measures a real vLLM server this way)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from specperf.run.engines.engine import EngineError
from specperf.run.serving.remote import RunningServer, check_url, config_gauges, describe, hardware_key
from specperf.run.serving.server_metrics import serves_sd

SD_METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 12.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",prefix_caching="False"} 1.0
"""
PLAIN_METRICS = SD_METRICS.split("# HELP vllm:cache_config_info")[0].replace("spec_decode_num_drafts", "num_requests")


def answering(metrics: str, models: list[dict]):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            replies = {
                "/health": ("text/plain", ""),
                "/v1/models": ("application/json", json.dumps({"object": "list", "data": models})),
                "/version": ("application/json", json.dumps({"version": "0.32.0"})),
                "/metrics": ("text/plain", metrics),
            }
            if self.path not in replies:
                self.send_error(404)
                return
            kind, body = replies[self.path]
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    return Handler


@pytest.fixture
def server():
    started = []

    def start(metrics=SD_METRICS, models=({"id": "staging-model", "max_model_len": 2048},)) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), answering(metrics, list(models)))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in started:
        httpd.shutdown()


def test_a_running_server_is_recorded_as_it_describes_itself(server, tmp_path):
    url = server()
    model, provenance, effective = describe(url, wants_sd=True, metrics_file=tmp_path / "servers" / "s.metrics.txt")
    assert model == "staging-model"
    assert provenance == {"vllm": "0.32.0", "served_by": url}
    assert effective["models"][0]["max_model_len"] == 2048
    assert effective["config_gauges"] == {
        "vllm:cache_config_info": [{"block_size": "16", "engine": "0", "prefix_caching": "False"}]
    }
    assert (tmp_path / "servers" / "s.metrics.txt").read_text() == SD_METRICS
    assert RunningServer(url).alive() and not RunningServer("http://127.0.0.1:1").alive()


def test_a_running_server_that_does_not_match_the_scenario_is_one_line(server):
    with pytest.raises(EngineError, match="shows no SD counters in /metrics: it cannot be measured as an SD scenario"):
        describe(server(PLAIN_METRICS), wants_sd=True)
    with pytest.raises(EngineError, match="shows SD counters in /metrics: it cannot be measured as a no-SD"):
        describe(server(), wants_sd=False)
    with pytest.raises(EngineError, match="lists no model in /v1/models"):
        describe(server(models=()), wants_sd=True)
    with pytest.raises(EngineError, match=r"did not answer /v1/models \("):
        describe("http://127.0.0.1:1", wants_sd=True)


def test_prometheus_text_says_whether_the_server_drafts_and_how_it_is_configured():
    assert serves_sd(SD_METRICS) and not serves_sd(PLAIN_METRICS)
    assert config_gauges(PLAIN_METRICS) == {}


def test_a_running_servers_results_file_under_its_address():
    assert hardware_key("http://Staging.example:8000/") == "server-staging-example-8000"
    assert check_url("https://staging:8000") is None
    assert "not an http(s) URL" in check_url("ftp://x")


def test_a_servers_password_is_never_printed_stored_or_in_its_baseline_key():
    """A staging server behind basic authentication: its password is in no message, no stored fact
    and no baseline folder name (the key was once the whole user:password@host)."""
    url = "http://me:hunter2@staging:8000"
    assert hardware_key(url) == "server-staging-8000"
    assert "hunter2" not in check_url("ftp://me:hunter2@x")
    with pytest.raises(EngineError) as err:
        describe("http://me:hunter2@127.0.0.1:1", wants_sd=True)
    assert "hunter2" not in str(err.value) and "me:***@127.0.0.1:1" in str(err.value)
