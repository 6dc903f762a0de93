"""A server that is already running (`--serve-url`, a team's staging deployment): measured as a
server the suite started is (run/serving/served.py), but nothing is started or stopped, and the record says
what the server says about itself (/v1/models, /version, the `*_info` gauges of /metrics) instead of
engine arguments.  Its results file under a hardware key of their own, one per server address."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ...messages import shown_url
from ..engines.engine import EngineError
from .server import healthy
from .server_metrics import read_metrics, serves_sd

ASK_TIMEOUT_S = 10.0


def hardware_key(url: str) -> str:
    """The baseline key of a running server: its address, as a file name ("server-host-8000")."""
    netloc = (urllib.parse.urlsplit(url).netloc or url).rpartition("@")[2]  # never user:password
    return "server-" + "".join(c if c.isalnum() else "-" for c in netloc.lower()).strip("-")


def check_url(url: str) -> str | None:
    """What is wrong with a --serve-url value, or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"{shown_url(url)!r} is not an http(s) URL such as http://127.0.0.1:8000"
    return None


def _ask(url: str, path: str) -> dict:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=ASK_TIMEOUT_S) as reply:
            return json.loads(reply.read().decode("utf-8"))
    except (OSError, ValueError) as err:
        raise EngineError(f"the server at {shown_url(url)} did not answer {path} ({err})") from None


def config_gauges(metrics_text: str) -> dict[str, list[dict[str, str]]]:
    """The `*_info` gauges of /metrics (vLLM's cache and engine settings, as labels)."""
    return {
        family.name: [dict(sample.labels) for sample in family.samples]
        for family in text_string_to_metric_families(metrics_text)
        if family.name.endswith("_info")
    }


@dataclass
class RunningServer:
    """What run/served.ServedEngine needs of a server, for one it did not start."""

    url: str
    process: None = None
    start_s: float = 0.0

    def alive(self) -> bool:
        return healthy(self.url, ASK_TIMEOUT_S)

    def log_tail(self) -> str:
        return f"(the server at {shown_url(self.url)} is not the suite's: its log is where it runs)"

    def stop(self) -> None:
        """Not the suite's to stop."""


def describe(url: str, wants_sd: bool, metrics_file: Path | None = None) -> tuple[str, dict, dict]:
    """The model id to send, the provenance and the effective configuration of a running server;
    the /metrics text is kept in `metrics_file`.  A server that does not match the scenario (SD
    counters where no-SD is measured, none where SD is) is an EngineError."""
    models = _ask(url, "/v1/models").get("data") or []
    if not models or "id" not in models[0]:
        raise EngineError(f"the server at {shown_url(url)} lists no model in /v1/models")
    version = _ask(url, "/version").get("version")
    try:
        text = read_metrics(url)
    except OSError as err:
        raise EngineError(f"the server at {shown_url(url)} did not answer /metrics ({err})") from None
    if metrics_file is not None:
        metrics_file.parent.mkdir(parents=True, exist_ok=True)
        metrics_file.write_text(text, encoding="utf-8")
    if (sd := serves_sd(text)) != wants_sd:
        has = "shows SD counters in /metrics" if sd else "shows no SD counters in /metrics"
        wanted = "an SD scenario" if wants_sd else "a no-SD scenario"
        raise EngineError(f"the server at {shown_url(url)} {has}: it cannot be measured as {wanted}")
    provenance = {"vllm": version, "served_by": shown_url(url)}
    effective = {"serve_url": shown_url(url), "models": models, "config_gauges": config_gauges(text)}
    return models[0]["id"], provenance, effective
