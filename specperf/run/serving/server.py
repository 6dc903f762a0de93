"""vLLM's OpenAI-compatible API server, as the serving mode runs it.

One server per engine key, started with the offline engine's own arguments and environment
(vllm_arguments.py, for the vLLM the server runs) on a free loopback port, in a process group of
its own that also dies with the process that started it (Linux: the parent-death signal), waited
for until /health answers, its log kept in the run directory, stopped with the whole group.  A
server that dies while starting is one line with the last lines of its log.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..builds import methods as vllm_methods
from ..builds.arguments import VllmArguments, VllmFacts, vllm_arguments
from ..engines.engine import EngineConfig, EngineError, EngineTimeout, default_env, engine_pythonpath

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
HOST = "127.0.0.1"
LOG_TAIL_LINES = 12
PORT_TRIES = 3  # a port taken between choosing it and binding it is retried on another
STOP_GRACE_S = 10.0
# The offline engine runs its core in-process (run/engine.default_env); the server's own process
# serves HTTP and its engine core runs beside it, as `vllm serve` runs it.
OFFLINE_ONLY_ENV = ("VLLM_ENABLE_V1_MULTIPROCESSING",)


def healthy(url: str, timeout_s: float = 5.0) -> bool:
    """Whether the server at `url` answers /health with 200."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as reply:
            return reply.status == 200
    except OSError:  # refused, reset, timed out, or an HTTP error status (URLError)
        return False


class ServerError(EngineError):
    """The server did not start, or died; the message ends with the last lines of its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def server_arguments(config: EngineConfig, vllm: VllmFacts) -> VllmArguments:
    """The server's config file (`vllm serve --config FILE`) and environment: the offline engine's
    arguments and environment for `vllm` (vllm_arguments), but for the model, which the command
    names, and the engine core, which runs beside the server rather than in its process.  vLLM
    itself turns the file into flags, so a False boolean becomes `--no-NAME` only where vLLM has one."""
    environ = {**os.environ, **default_env(), **config.env}
    environ["PYTHONPATH"] = engine_pythonpath(environ)
    for name in OFFLINE_ONLY_ENV:
        environ.pop(name, None)
    arguments = vllm_arguments(config, vllm, environ)
    flags = {key.replace("_", "-"): value for key, value in arguments.kwargs.items() if value is not None}
    del flags["model"]
    return VllmArguments(flags, arguments.env)


def server_command(python: str, config: EngineConfig, port: int, args_file: Path) -> list[str]:
    return [
        python,
        "-m",
        SERVER_MODULE,
        "--model",
        config.model,
        "--host",
        HOST,
        "--port",
        str(port),
        "--config",
        str(args_file),
    ]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# The kernel sends the parent-death signal when the *thread* that started the child ends, and the
# pool starts engines from short-lived threads: every server is launched from this one thread,
# which lives as long as the suite's process.
_LAUNCHER = ThreadPoolExecutor(1, thread_name_prefix="server-launch")


def launch(command: list[str], **popen_kwargs: Any) -> subprocess.Popen:
    """Popen in a process group of its own that gets SIGTERM when this process ends."""
    return _LAUNCHER.submit(
        subprocess.Popen, command, start_new_session=True, preexec_fn=_die_with_parent, **popen_kwargs
    ).result()


@dataclass
class Server:
    """One running server; `start()` returns once it is healthy.  `vllm`: what the server's
    environment holds (environments.vllm_facts), read by whoever starts it."""

    config: EngineConfig
    log_path: Path
    vllm: VllmFacts
    python: str = sys.executable
    start_timeout_s: float = 600.0
    process: subprocess.Popen | None = None
    port: int = 0
    start_s: float = 0.0  # from launch to healthy
    commands: list[list[str]] = field(default_factory=list)  # every launch, for the record

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> Server:
        """Raises EngineError where the server's vLLM cannot run the method (as the offline engine
        does), ServerError where the server exits while starting, EngineTimeout when it does not
        answer in time."""
        try:
            arguments = server_arguments(self.config, self.vllm)
        except vllm_methods.UnsupportedMethod as err:
            raise EngineError(str(err)) from None
        t0 = time.monotonic()
        for attempt in range(PORT_TRIES):
            self.port = free_port()
            self._launch(arguments)
            try:
                self._wait_healthy(t0 + self.start_timeout_s)
                self.start_s = time.monotonic() - t0
                return self
            except ServerError as err:
                self.stop()
                if "address already in use" not in str(err).lower() or attempt == PORT_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _launch(self, arguments: VllmArguments) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        args_file = self.log_path.with_suffix(".args.yaml")  # written as JSON, which is YAML too
        args_file.write_text(json.dumps(arguments.kwargs, indent=1), encoding="utf-8")
        command = server_command(self.python, self.config, self.port, args_file)
        self.commands.append(command)
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(command)}\n".encode())
            log.flush()
            # its own process group: stop() takes the engine core too
            self.process = launch(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=arguments.env
            )

    def _wait_healthy(self, deadline: float) -> None:
        while True:
            if not self.alive():
                raise ServerError(f"the server exited with code {self.process.returncode}: {self.log_tail()}")
            if healthy(self.url):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise EngineTimeout(
                    f"the server did not answer /health within {self.start_timeout_s:g} s; killed: {self.log_tail()}",
                    "server start",
                )
            time.sleep(0.5)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the log, joined into one line."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(tail) or "(empty log)"

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after a grace period; idempotent."""
        if self.process is None:
            return
        for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait_s)
                if sig is signal.SIGTERM:
                    os.killpg(self.process.pid, signal.SIGKILL)  # the engine core, if it lingers
                break
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                break
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
