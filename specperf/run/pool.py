"""Engines by engine key: one alive at a time, started on first use, never restarted after a failure.

Scenarios arrive grouped by engine key, so each engine starts once.  A key whose engine failed
(start failure, crash, timeout) fails its later scenarios at once with the same one-line cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..profiles import checkpoints
from ..profiles.scenarios import Scenario
from ..status import ERROR_ENGINE, ERROR_INPUT, ERROR_TIMEOUT
from .engine import Engine, EngineConfig, EngineError, EngineTimeout, default_env

DEFAULT_START_TIMEOUT_S = 1800.0


class EngineKeyFailed(EngineError):
    """This key's engine failed earlier in the run; `kind` is the status.ERROR_* of that failure."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class PoolStats:
    starts: int = 0
    start_s: float = 0.0


def engine_config(scenario: Scenario) -> EngineConfig:
    """The engine of a scenario, with builtin checkpoints resolved (built on first use)."""
    spec = scenario.method.speculative_config()
    if spec is not None and isinstance(spec.get("model"), str):
        spec["model"] = checkpoints.resolve(spec["model"])
    tokenizer = scenario.model.tokenizer
    return EngineConfig(
        model=checkpoints.resolve(scenario.model.path),
        tokenizer=checkpoints.resolve(tokenizer) if tokenizer else None,
        tensor_parallel_size=scenario.model.tp, seed=scenario.seed,
        speculative_config=spec, engine_args=scenario.engine_args, env=default_env(),
    )


class EnginePool:
    def __init__(self, start: Callable[[EngineConfig, float], Engine] = Engine,
                 configure: Callable[[Scenario], EngineConfig] = engine_config,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S, log: Callable[[str], None] = print):
        self._start = start
        self._configure = configure
        self.start_timeout_s = start_timeout_s
        self.log = log
        self.stats = PoolStats()
        self.keys_seen: set[str] = set()
        self._failed: dict[str, EngineKeyFailed] = {}
        self._engine: Engine | None = None
        self._key: str | None = None

    def engine_for(self, scenario: Scenario) -> tuple[Engine, float]:
        """The engine of this scenario's key, started if needed; returns it and the start time spent."""
        key = scenario.engine_key
        self.keys_seen.add(key)
        if key in self._failed:
            raise self._failed[key]
        if self._key == key and self._engine is not None:
            return self._engine, 0.0
        self.close()
        self.log(f"starting engine: {scenario.model.name} / {scenario.method.label}")
        try:
            config = self._configure(scenario)      # may build a local checkpoint: not engine time
        except checkpoints.CheckpointError as err:
            raise self.fail(key, str(err), ERROR_INPUT) from None
        t0 = time.monotonic()
        try:
            self._engine = self._start(config, self.start_timeout_s)
        except EngineTimeout as err:
            raise self.fail(key, f"engine start did not finish within {self.start_timeout_s:g} s; engine killed",
                            ERROR_TIMEOUT) from err
        except EngineError as err:
            raise self.fail(key, str(err), ERROR_ENGINE) from None
        finally:
            self.stats.starts += 1
            self.stats.start_s += time.monotonic() - t0
        self._key = key
        return self._engine, time.monotonic() - t0

    def fail(self, key: str, message: str, kind: str) -> EngineKeyFailed:
        """Remember that this key's engine failed (its later scenarios fail at once) and close it."""
        failure = self._failed.setdefault(key, EngineKeyFailed(message, kind))
        if self._key == key:
            self.close()
        return failure

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
        self._engine, self._key = None, None
