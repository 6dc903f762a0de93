"""A server as the measuring loop's engine: what run/engine.Engine is to LLM.generate, this is to
vLLM's OpenAI-compatible server (run/serving/server.py) under streamed load (run/serving/load.py).

The pool starts one per engine key of serve scenarios (its concurrencies and workloads share it).
`generate(load, ...)` runs one round, a protocol.Load, and answers a protocol.Reply as the offline
engine does: wall time, output tokens, the greedy outputs (token ids where the server returns
them, else the texts' bytes, for the lossless check against the no-SD server), the SD counters
read from /metrics before and after, and the round's latency percentiles.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..builds import fixes as vllm_fixes
from ..builds.environments import EnvironmentProblem, vllm_facts
from ..engines.engine import EngineConfig, EngineError, EngineTimeout
from ..engines.protocol import Load, Reply
from . import remote
from .load import run_round
from .server import Server
from .server_metrics import read_spec_counters


class ServedEngine:
    """One started server (or, with `url`, one already running: run/serving/remote.py), measured a Load at a time."""

    def __init__(
        self,
        config: EngineConfig,
        start_timeout_s: float,
        log_path: Path,
        python: str | None = None,
        url: str | None = None,
    ):
        self.config = config
        self.server: Server | remote.RunningServer
        if url is not None:
            self.server = remote.RunningServer(url)
            wants_sd = config.speculative_config is not None
            self.model_name, self.provenance, self.effective_config = remote.describe(
                url, wants_sd, log_path.with_suffix(".metrics.txt")
            )
        else:
            try:
                vllm = vllm_facts(python)
            except EnvironmentProblem as err:
                raise EngineError(str(err)) from None
            self.server = Server(config, log_path, vllm, python or sys.executable, start_timeout_s).start()
            self.model_name = config.model  # the server's default model name: the path it loaded
            self.provenance = {
                "vllm": vllm.version,
                "served_by": "vllm.entrypoints.openai.api_server",
                **vllm_fixes.provenance(vllm.distribution, vllm.version),
            }
            self.effective_config = {"server_command": " ".join(self.server.commands[-1])}
        self.start_s = self.server.start_s
        self.pid = self.server.process.pid if self.server.process else None

    def generate(self, load: Load, max_tokens: int, timeout_s: float = 3600.0) -> Reply:
        if not isinstance(load, Load):
            raise TypeError("a served engine measures a protocol.Load, not a batch of prompts")
        if not self.server.alive():
            raise EngineError(f"the server died: {self.server.log_tail()}")
        url = self.server.url
        try:
            before = read_spec_counters(url)
            measured = run_round(
                url,
                self.model_name,
                list(load.prompts),
                max_tokens,
                load.concurrency,
                load.request_rate,
                load.seed,
                timeout_s,
                load.params,
            )
            after = read_spec_counters(url)
        except OSError as err:
            raise EngineError(f"the server stopped answering ({err}): {self.server.log_tail()}") from None
        if not self.server.alive():
            raise EngineError(f"the server died during the round: {self.server.log_tail()}")
        if measured.wall_s > timeout_s:
            raise EngineTimeout(f"the round did not finish within {timeout_s:.0f} s", "generate")
        requests = measured.requests
        return Reply(
            wall_s=measured.wall_s,
            output_tokens=measured.output_tokens,
            token_ids=[r.token_ids or list(r.text.encode("utf-8")) for r in requests],
            texts=[r.text for r in requests],
            counters_before=before,
            counters_after=after,
            finish_reasons=[r.finish_reason for r in requests],
            latency=measured.percentiles(),
            client_bound=measured.client_bound,
            errors=measured.errors,
            request_acceptance=[r.acceptance for r in requests] if self.config.speculative_config else None,
        )

    def close(self) -> None:
        self.server.stop()

    kill = close
