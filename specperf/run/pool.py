"""Engines by slot (an environment's interpreter and an engine key): started on first use, kept while
wanted, never restarted after a failure.

Scenarios arrive grouped by engine key, so each engine starts once; usually one is alive at a time,
a few when a run pairs them (a gate's two builds, an SD engine and its no-SD reference).  A slot
whose engine failed (start failure, crash, timeout) fails its later scenarios at once with the
same one-line cause.  The hub checkpoints an engine loads are fetched into the Hugging Face cache
before it starts (run/engines/hub_fetch.py), so a download spends none of the start's limit.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from .. import checkpoints
from ..messages import one_line
from ..profiles.scenarios import Scenario
from ..status import ERROR_ENGINE, ERROR_INPUT, ERROR_TIMEOUT
from .builds import methods as vllm_methods
from .engines.engine import DEFAULT_START_TIMEOUT_S, Engine, EngineConfig, EngineError, EngineTimeout, default_env
from .engines.hub_fetch import HubCheckpoint, fetch_checkpoint, hub_checkpoints
from .hardware.device import has_nvidia_gpu
from .serving.served import ServedEngine


class EngineKeyFailed(EngineError):
    """This key's engine failed earlier in the run; `kind` is the status.ERROR_* of that failure."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class PoolStats:
    starts: int = 0
    start_s: float = 0.0
    fetches: int = 0  # hub checkpoints brought into the cache before their engine started
    fetch_s: float = 0.0  # the time that took, no part of start_s


def engine_config(scenario: Scenario) -> EngineConfig:
    """The engine of a scenario, with builtin checkpoints resolved (built on first use)."""
    spec = scenario.method.speculative_config()
    if spec is not None and isinstance(spec.get("model"), str):
        spec["model"] = checkpoints.resolve(spec["model"])
    tokenizer = scenario.model.tokenizer
    return EngineConfig(
        model=checkpoints.resolve(scenario.model.path),
        tokenizer=checkpoints.resolve(tokenizer) if tokenizer else None,
        tensor_parallel_size=scenario.model.tp,
        seed=scenario.seed,
        speculative_config=spec,
        engine_args=scenario.engine_args,
        env={**default_env(), **vllm_methods.method_env(scenario.method.name), **scenario.env},
        trace=scenario.trace,
        serve=scenario.serves,
        request_metrics=not scenario.sampling.greedy,
    )


Slot = tuple[str | None, str]  # (the interpreter of another environment or None, engine key)
Live = tuple[Slot, int]  # a slot's engine instance (a gate may run several of one slot)


class EnginePool:
    """Live engines by slot.  A run wants one engine at a time, or a few side by side (a gate's
    current and candidate build, an SD engine and its no-SD reference); the rest are closed."""

    def __init__(
        self,
        start: Callable[..., Engine] = Engine,
        configure: Callable[[Scenario], EngineConfig] = engine_config,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        log: Callable[[str], None] = print,
        parallel_starts: int | None = None,
        logs_dir: Path | None = None,
        serve: Callable[..., ServedEngine] = ServedEngine,
        serve_url: str | None = None,
        fetch: Callable[[HubCheckpoint], None] | None = None,
    ):
        self._start = start
        # A hub checkpoint into the cache before its engine starts (run/engines/hub_fetch.py).  By default only
        # with the suite's own `configure`, whose refs are real checkpoints: a pool given a stand-in
        # `configure` fetches through the `fetch` it is given, or not at all.
        self._fetch = fetch or (fetch_checkpoint if configure is engine_config else None)
        self._fetched: set[HubCheckpoint] = set()
        self._serve = serve
        self.serve_url = serve_url  # a running server that serve scenarios are measured on (run/serving/remote.py)
        self.logs_dir = logs_dir  # where servers keep their logs (the run directory's servers/)
        self._server_numbers = itertools.count(1)  # thread-safe enough: next() on a count is atomic in CPython
        # Engines wanted together start this many at a time: an engine start on the CPU tier is
        # mostly single-threaded imports, so on 2 cores two starts take the time of one.  On a GPU
        # one at a time: engines starting together on one GPU see each other's memory while
        # vLLM profiles what is free.
        self.parallel_starts = parallel_starts or (1 if has_nvidia_gpu() else os.cpu_count() or 1)
        self._configure = configure
        self.start_timeout_s = start_timeout_s
        self.log = log
        self.stats = PoolStats()
        self.keys_seen: set[str] = set()
        self._failed: dict[Slot, EngineKeyFailed] = {}
        self._live: dict[Live, Engine] = {}

    def engines_for(self, wanted: dict[str, tuple]) -> tuple[dict[str, Engine], float]:
        """label -> (scenario, python[, instance]): these engines alive, every other one closed;
        returns them and the seconds spent starting.  `python` None is this environment's vLLM;
        `instance` (default 0) tells apart engines of one slot that run side by side."""
        lives = {
            label: ((spec[1], spec[0].engine_key), spec[2] if len(spec) > 2 else 0) for label, spec in wanted.items()
        }
        self.keys_seen |= {slot[1] for slot, _ in lives.values()}
        for live in [live for live in self._live if live not in lives.values()]:
            self._close(live)
        for slot, _ in lives.values():
            if slot in self._failed:
                raise self._failed[slot]
        missing = [(live, wanted[label][0]) for label, live in lives.items() if live not in self._live]
        configs = []  # from this thread: checkpoints built, one log line each, in start order
        for live, scenario in missing:
            (slot, instance) = live
            where = (f" with {slot[0]}" if slot[0] else "") + (f" (instance {instance + 1})" if instance else "")
            self.log(f"starting engine: {scenario.model.name} / {scenario.method.label}{where}")
            try:
                configs.append((live, self._configure(scenario)))  # may build a checkpoint: not engine time
            except checkpoints.CheckpointError as err:
                raise self.fail(slot, str(err), ERROR_INPUT) from None
        for (slot, _), config in configs:  # downloads are not engine time: the start limit is the start's
            self._fetch_hub_checkpoints(slot, config)
        t0 = time.monotonic()
        if self.parallel_starts > 1 and len(configs) > 1:
            with ThreadPoolExecutor(self.parallel_starts, thread_name_prefix="engine-start") as starts:
                futures = [starts.submit(self._start_slot, live, config) for live, config in configs]
                wait(futures)
            for future in futures:  # every start has ended; the first failure is the run's
                future.result()
        else:
            for live, config in configs:
                self._start_slot(live, config)
        spent = time.monotonic() - t0 if missing else 0.0
        self.stats.start_s += spent
        return {label: self._live[live] for label, live in lives.items()}, spent

    def _fetch_hub_checkpoints(self, slot: Slot, config: EngineConfig) -> None:
        """The hub checkpoints the engine loads, into the Hugging Face cache (each once per pool); a
        failed download fails the slot's engine key, naming the repository."""
        if self._fetch is None or (config.serve and self.serve_url):  # a running server: nothing starts here
            return
        for checkpoint in hub_checkpoints(config):
            if checkpoint in self._fetched:
                continue
            self.log(f"fetching {checkpoint.repo_id} into the Hugging Face cache (not engine start time)")
            t0 = time.monotonic()
            try:
                self._fetch(checkpoint)
            except Exception as err:  # noqa: BLE001 - HTTP, a gated repository, a full disk: this key's failure
                message = f"{checkpoint.repo_id}: download into the Hugging Face cache failed: {one_line(err, 300)}"
                raise self.fail(slot, message, ERROR_ENGINE) from None
            spent = time.monotonic() - t0
            self.stats.fetches += 1
            self.stats.fetch_s += spent
            self._fetched.add(checkpoint)
            self.log(f"fetched {checkpoint.repo_id} in {spent:.1f} s")

    def _start_slot(self, live: Live, config: EngineConfig) -> None:
        slot = live[0]
        python = slot[0]
        try:
            options: dict = {"python": python} if python else {}
            if config.serve:
                if self.serve_url:
                    options["url"] = self.serve_url
                self._live[live] = self._serve(config, self.start_timeout_s, self._server_log(), **options)
            else:
                self._live[live] = self._start(config, self.start_timeout_s, **options)
        except EngineTimeout as err:
            raise self.fail(
                slot, f"engine start did not finish within {self.start_timeout_s:g} s; engine killed", ERROR_TIMEOUT
            ) from err
        except EngineError as err:
            raise self.fail(slot, str(err), ERROR_ENGINE) from None
        finally:
            self.stats.starts += 1

    def _server_log(self) -> Path:
        folder = self.logs_dir or Path(tempfile.mkdtemp(prefix="specperf-servers-"))
        return folder / f"server-{next(self._server_numbers):03d}.log"

    def fail(self, slot: Slot, message: str, kind: str) -> EngineKeyFailed:
        """Remember that this slot's engine failed (its later scenarios fail at once) and close it."""
        failure = self._failed.setdefault(slot, EngineKeyFailed(message, kind))
        for live in [live for live in self._live if live[0] == slot]:
            self._close(live)
        return failure

    def _close(self, live: Live) -> None:
        self._live.pop(live).close()

    def close(self) -> None:
        for live in list(self._live):
            self._close(live)
