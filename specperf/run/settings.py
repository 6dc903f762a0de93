"""What a run session is told: where the run's files go, how its scenarios are measured, judged and
gated, and what it says as it goes.  The pytest plugin and the command-line tools fill these in;
run/session.py reads them and keeps to measuring."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..judge.gate import GateJudge
from ..judge.paired import recorded_offset_of
from ..judge.stored import StoredJudge
from ..profiles.scenarios import Scenario
from ..records import ScenarioResult
from .engines.engine import DEFAULT_START_TIMEOUT_S
from .output_check import AUTO


@dataclass(frozen=True)
class RunPlace:
    """Where a run's files go: reports_dir/run_id (a new run id where None), or the run directory
    being resumed; and what run.json says of the run."""

    profile: str
    reports_dir: Path
    run_id: str | None = None
    resume_dir: Path | None = None  # an earlier run of this profile: keep its finished results
    profile_path: str | None = None
    scenario_hashes: dict[str, str] = field(default_factory=dict)  # the profile's scenarios, for --resume
    owns_run_file: bool = True  # False on pytest-xdist workers: the controller merges theirs


@dataclass(frozen=True)
class Measuring:
    """How the scenarios are measured."""

    dataset_dir: Path | None = None  # workload samples (None: the dataset hub)
    rounds: int | None = None  # overrides every scenario's rounds
    scenario_timeout_s: float | None = None  # warm-up and rounds of one scenario; None: no limit
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    serve_url: str | None = None  # serve scenarios measured on this running server (run/serving/remote.py)
    output_check: str = AUTO  # how greedy outputs are checked (run/output_check.py)
    selection: tuple[Scenario, ...] = ()  # the run's scenarios, for the output checks per engine key


@dataclass(frozen=True)
class Judging:
    """How results are judged and kept: against baselines/ (refreshed after a complete run with
    update_baselines), or against the last `rolling_runs` runs in the history."""

    baseline_dir: Path
    update_baselines: bool = False
    history_url: str | None = None  # the run history database (history.database.history_url)
    rolling_runs: int | None = None  # judge against the last N runs in the history, not baselines/
    two_strike: bool = False  # with rolling_runs: a speed regression fails once confirmed
    inconclusive_fails: bool = True  # --inconclusive fail: a sampled scenario's acceptance shown neither way

    def judge(self, hardware_key: str, run_id: str):
        """The judge these settings make, and the history it reads (to be closed; None without one)."""
        if not self.rolling_runs:
            return StoredJudge(self.baseline_dir, hardware_key), None
        from ..history import History
        from ..judge.rolling import RollingJudge

        history = History(self.history_url)
        return RollingJudge(history.reader(), hardware_key, self.rolling_runs, run_id, self.two_strike), history


@dataclass(frozen=True)
class Gating:
    """An upgrade gate: the candidate build's interpreter is judged against this environment's."""

    candidate_python: str
    gate_blocks: int | None = None  # alternate blocks of this many rounds, one engine alive
    environments: dict | None = None  # both builds by side (run.builds.environments.describe); None: ask them
    inconclusive_fails: bool = True  # --inconclusive fail
    max_sets: int | None = None  # --gate-max-sets: a sequential gate

    def judge(self, history_url: str | None, hardware_key: str, log: Callable[[str], None]) -> GateJudge:
        """The gate's judge, with the offset between fresh engines that the gates on record in the
        history estimate (a history that cannot be read is one line, and the profile's floor stands)."""
        if history_url is None:
            return GateJudge(self.inconclusive_fails)
        from ..history import HistoryError, recorded_gate_pairs

        try:
            recorded = recorded_offset_of(recorded_gate_pairs(history_url, hardware_key))
        except HistoryError as err:
            log(f"{err}; the gate's engine-offset floor is the profile's")
            recorded = None
        return GateJudge(self.inconclusive_fails, recorded)


@dataclass
class Progress:
    """What the session says as it goes: a line before each scenario (with the time the run has left,
    where `time_left` can tell), and each result once judged and written (`on_result`)."""

    log: Callable[[str], None] = print
    planned: int = 0  # scenarios expected in this run
    # Seconds the run has left (plan/progress.py), from the finished results, those of them measured
    # in this run, and the seconds since it started.
    time_left: Callable[[list[ScenarioResult], list[ScenarioResult], float], float | None] | None = None
    on_result: Callable[[ScenarioResult, Path], None] | None = None

    def line(self, scenario: Scenario, done: int, results: list[ScenarioResult], measured, started: float) -> str:
        """The line before `scenario`, the run's `done`+1-th; `measured`: the results measured in this run."""
        line = f"[{done + 1}/{self.planned or '?'}] {scenario.id}"
        if self.time_left is not None and measured and self.planned > done:
            left = self.time_left(results, measured, time.monotonic() - started)
            if left is not None:
                line += f" (about {left / 60:.1f} min left)"
        return line

    def written(self, result: ScenarioResult, path: Path) -> None:
        if self.on_result is not None:
            self.on_result(result, path)
