"""A run session: measures scenarios, writes each result the moment it exists, judges it, closes the run.

It coordinates the parts that do the work: `calls` (the prompts of a scenario), `pool` (engines by
key), `loop` (warm-up and timed rounds), `summary` (figures and validity), `judge.stored` (verdicts)
and `storage` (files).  The pytest plugin and the command-line tool both drive it; it knows nothing
of pytest.  Scenarios should arrive grouped by engine key (the plugin sorts them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import checkpoints
from ..judge.baselines import refresh_baselines
from ..judge.metrics import DISTRIBUTION_MATCH_P
from ..judge.rules import Judge, Rules
from ..messages import one_line
from ..profiles import model_memory, workloads
from ..profiles.scenarios import Scenario
from ..records import Device, Figures, OutputCheck, RunFile, RunStats, ScenarioResult, Timings, Verdict
from ..status import ERROR, ERROR_ENGINE, ERROR_INPUT, ERROR_INTERNAL, ERROR_TIMEOUT, OK, SKIPPED, UNSUPPORTED
from ..storage import new_run_id, now_iso, suite_provenance, write_record, write_result
from .builds import environments
from .calls import CallPreparer, Calls
from .distribution_check import DistributionChecks
from .engines.engine import EngineError, EngineTimeout
from .gate.colocation import blocks_for
from .gate.sides import (
    CANDIDATE,
    CURRENT,
    Role,
    SideSummary,
    current_as_baseline,
    engines_wanted,
    gate_record,
    reference_from_alternating_rounds,
    sequential_looks,
    unsupported_by,
)
from .hardware.device import describe_device
from .hardware.telemetry import telemetry_problems
from .loop import run_rounds
from .measurement import measure_rounds
from .output_check import OutputChecks, chosen_way
from .pool import EngineKeyFailed, EnginePool
from .resume import finished_results
from .settings import Gating, Judging, Measuring, Progress, RunPlace
from .summary import Reference, summarise, validity


@dataclass
class RunSession:
    """One run: what it is told (run/settings.py), and the parts that do the work, replaceable in
    unit tests (a fake pool, canned calls, a described device)."""

    place: RunPlace
    judging: Judging
    measuring: Measuring = field(default_factory=Measuring)
    gating: Gating | None = None  # an upgrade gate: the candidate build is judged against this one
    progress: Progress = field(default_factory=Progress)
    prepare: Callable[[Scenario], Calls] | None = None
    pool: EnginePool | None = None
    device: dict | None = None
    stats: RunStats = field(default_factory=RunStats)

    def __post_init__(self):
        self.device = self.device or describe_device()
        self.log = self.progress.log
        if self.place.resume_dir is not None:
            self.run_dir = Path(self.place.resume_dir)
            self.run_id = self.run_dir.name
            self._finished = finished_results(self.run_dir, self.device["hardware_key"], self.log)
        else:
            self.run_id = self.place.run_id or new_run_id(self.place.profile)
            self.run_dir = Path(self.place.reports_dir) / self.run_id
            self._finished = {}
        self.prepare = self.prepare or CallPreparer(self.measuring.dataset_dir)
        self.pool = self.pool or EnginePool(
            start_timeout_s=self.measuring.start_timeout_s,
            log=self.log,
            logs_dir=self.run_dir / "servers",
            serve_url=self.measuring.serve_url,
        )
        gpu = self.device.get("kind") == "gpu"
        way = chosen_way(self.measuring.output_check, self.device)
        self.checks = OutputChecks(way, self.pool, self.prepare, self.measuring.selection, gpu, self.log)
        self.distributions = DistributionChecks(self.pool, self.log)
        self.history = None  # the run history, opened by the rolling judge on first use
        self._judge_made: Judge | None = None
        self.environments = self.gating and (
            self.gating.environments
            or {CURRENT: environments.describe(), CANDIDATE: environments.describe(self.gating.candidate_python)}
        )
        self.provenance = suite_provenance()
        self.started = time.monotonic()
        self.started_at = now_iso()
        self._references: dict[tuple[str, str], Reference] = {}  # (side, scenario id)
        self._gate_references: dict[str, ScenarioResult] = {}  # a gate's no-SD results, by id
        self.results: list[ScenarioResult] = []
        self._run_file_written = False  # run.json is written when the first scenario starts, and at the end

    @property
    def judge(self) -> Judge:
        """The paired gate's judge; else baselines from baselines/, or with rolling_runs from the
        history (opened on first use, for the rest of the run: constructing a session opens nothing)."""
        if self._judge_made is None:
            if self.gating is not None:
                self._judge_made = self.gating.judge(self.judging.history_url, self.device["hardware_key"], self.log)
            else:
                self._judge_made, self.history = self.judging.judge(self.device["hardware_key"], self.run_id)
        return self._judge_made

    # ------------------------------------------------------------ one scenario

    def run(
        self, scenario: Scenario, rounds_runner: Callable[[Callable[[], None], int], None] = run_rounds
    ) -> ScenarioResult:
        """Measure one scenario, write and judge its result; never raises for engine or workload faults.
        `rounds_runner` runs the timed rounds (the pytest plugin passes one that pytest-benchmark times)."""
        if not self._run_file_written:
            self.write_run_file(finished=False)
        kept = self._finished.get(scenario.id)
        if kept is not None and kept.scenario.hash == scenario.hash:
            return self._keep(scenario, kept)
        measured = [r for r in self.results if r.id not in self._finished]
        self.log(self.progress.line(scenario, self.stats.scenarios, self.results, measured, self.started))
        result = ScenarioResult(
            scenario=scenario,
            status=OK,
            started_at=now_iso(),
            device=Device.model_validate(self.device),
            provenance=self.provenance,
        )
        if reason := unsupported_by(self.environments, scenario):
            return self._set_aside(result, reason)
        wanted = engines_wanted(scenario, self.gating and self.gating.candidate_python)
        try:
            self._measure(scenario, wanted, result, rounds_runner)
        except workloads.WorkloadUnavailable as err:
            result.status, result.error = SKIPPED, str(err)
        except EngineKeyFailed as err:
            self._error(result, str(err), err.kind)
        except EngineTimeout as err:
            limit = self.measuring.scenario_timeout_s
            message = (
                f"timed out: the scenario did not finish within its {limit:g} s limit; engine killed"
                if limit is not None
                else str(err)
            )
            self._error(result, self.pool.fail(self._slot(err, wanted), message, ERROR_TIMEOUT), ERROR_TIMEOUT)
        except EngineError as err:
            self._error(result, self.pool.fail(self._slot(err, wanted), str(err), ERROR_ENGINE), ERROR_ENGINE)
        except (workloads.WorkloadError, checkpoints.CheckpointError) as err:
            self._error(result, str(err), ERROR_INPUT)
        except Exception as err:  # noqa: BLE001 - one scenario's fault must not lose the run's other results
            self._error(result, one_line(err), ERROR_INTERNAL)
        result.finished_at = now_iso()
        self.stats.scenarios += 1
        path = write_result(self.run_dir, result)  # on disk before anything else can go wrong
        if result.status == SKIPPED:
            self._written(result, path)
            return result
        self._judge(result, scenario)
        return result

    def _set_aside(self, result: ScenarioResult, reason: str) -> ScenarioResult:
        """A scenario a build of the gate cannot run: recorded and reported as unsupported, not an error."""
        result.status, result.error, result.finished_at = UNSUPPORTED, reason, now_iso()
        result.verdict = Verdict(scenario_id=result.id, status=UNSUPPORTED, note=reason)
        self.stats.scenarios += 1
        self.results.append(result)
        self._written(result, write_result(self.run_dir, result))
        return result

    @staticmethod
    def _slot(err: EngineError, wanted: dict[Role, tuple[Scenario, str | None]]) -> tuple[str | None, str]:
        """The pool slot (python, engine key) of the engine that failed: the one the measurement
        named, else this build's."""
        scenario, python = wanted.get(err.engine, wanted[Role(CURRENT)])
        return python, scenario.engine_key

    def _error(self, result: ScenarioResult, message, kind: str) -> None:
        result.status, result.error, result.error_kind = ERROR, str(message), kind
        self.stats.errors += 1

    def _keep(self, scenario: Scenario, result: ScenarioResult) -> ScenarioResult:
        """A result of the resumed run: not measured again, but judged and reported with this run."""
        self.log(f"[resumed] {scenario.id}: kept from {self.run_dir}")
        if scenario.method.is_reference:
            checked_by = result.output_check.way if result.output_check else OutputCheck.TIMING
            self._references[(CURRENT, scenario.id)] = Reference.of(result.metrics, result.output_hashes, checked_by)
            self._remember_gate_reference(scenario, result)
        self.stats.scenarios += 1
        self.stats.resumed += 1
        self._judge(result, scenario)
        return result

    def _measure(
        self, scenario: Scenario, wanted: dict[Role, tuple[Scenario, str | None]], result: ScenarioResult, rounds_runner
    ) -> None:
        calls = self.prepare(scenario)
        result.workload = calls.facts
        checks = {role: self.checks.of(s, python, calls) for role, (s, python) in wanted.items()}
        deadline = time.monotonic() + (self.measuring.scenario_timeout_s or float("inf"))
        reference = None if scenario.paired_reference else self._gate_references.get(scenario.reference_id)
        own = {side: self._references.get((side, scenario.reference_id)) for side in (CURRENT, CANDIDATE)}
        gating = self.gating and self.gating.max_sets
        rules = self.judge.rules(Rules.of(scenario)) if gating else None  # a gate's judge (GateJudge)
        looks = sequential_looks(scenario, self.gating.max_sets, own, reference, rules) if rules else None
        measured = measure_rounds(
            self.pool,
            wanted,
            calls.calls,
            scenario.output_len,
            scenario.warmup,
            self.measuring.rounds or scenario.rounds,
            deadline=deadline,
            blocks=blocks_for(scenario, self.gating and self.gating.gate_blocks),
            instances=scenario.gate_instances,
            sets=scenario.gate_engine_sets,
            gpus=self.engine_gpus(scenario),
            rounds_runner=rounds_runner,
            looks=looks,
        )
        result.gpu_telemetry = measured.telemetry[0]
        result.timings = Timings(
            engine_start_s=measured.start_s, warmup_s=measured.warmup_s, measure_s=measured.measure_s
        )
        self.stats.warmup_s += measured.warmup_s
        self.stats.measure_s += measured.measure_s
        preflight_pids = [p["pid"] for p in self.device.get("foreign_processes") or []]
        running_server = self.measuring.serve_url is not None  # preflight saw the measured server's processes
        problems = [p for t in measured.telemetry for p in telemetry_problems(t, preflight_pids, running_server)]
        sides = {}
        for side in [side for side in (CURRENT, CANDIDATE) if Role(side) in wanted]:
            sides[side] = self._side(scenario, side, measured, calls, problems, checks, wanted[Role(side)])
        judged = CANDIDATE if CANDIDATE in sides else CURRENT  # a gate's result is the candidate's
        main, facts = sides[judged], measured.engines[Role(judged)]
        result.provenance = {**self.provenance, **facts.provenance, "engine_env": facts.env}
        result.effective_config = facts.effective_config
        for name in Figures.model_fields:  # what the summary figured, under the result's own names
            setattr(result, name, getattr(main.summary, name))
        # Beside the measured peak, what the checkpoints' configs call for (headers only, cheap).
        result.memory = result.memory.model_copy(
            update=model_memory.estimate(scenario, (facts.effective_config or {}).get("dtype")).fields()
        )
        result.workload.overlap_bleu4 = main.summary.overlap_bleu4
        result.validity = main.validity
        if CANDIDATE in sides:
            result.gate = gate_record(sides[CURRENT], main, measured, self.gating.candidate_python, reference)
            result.baseline = current_as_baseline(sides[CURRENT])
            self._remember_gate_reference(scenario, result)

    def _side(
        self, scenario: Scenario, side: str, measured, calls: Calls, problems: list[str], checks, engine
    ) -> SideSummary:
        """One build's figures: against its paired reference rounds, or its reference measured
        earlier; `checks`: how each engine's greedy outputs were checked (run/output_check.py), by role;
        `engine`: its (scenario, python); a sampled SD scenario's outputs are checked by their
        distribution (run/distribution_check.py)."""
        rounds, check = measured.rounds[Role(side)], checks[Role(side)]
        reference = self._references.get((side, scenario.reference_id))
        if (paired := Role(side, reference=True)) in measured.rounds:
            reference = reference_from_alternating_rounds(measured.rounds[paired], checks.get(paired))
        prompts = [ids for call in calls.calls for ids in call]
        summary = summarise(scenario, rounds, calls.requests, reference, prompts, check)
        if found := self.distributions.of(*engine, calls):
            summary.metrics[DISTRIBUTION_MATCH_P] = found
        if scenario.method.is_reference:
            self._references[(side, scenario.id)] = Reference.of(summary.metrics, summary.output_hashes, check.way)
        # A running server has no no-SD twin to divide by: its SD scenarios are judged without speedup.
        judged = validity(scenario, rounds, summary, problems, self.pool.serve_url is None, check)
        return SideSummary(summary, judged, measured.engines[Role(side)])

    def _remember_gate_reference(self, scenario: Scenario, result: ScenarioResult) -> None:
        """A gate's no-SD result: its SD scenarios' speedup changes are judged relative to its changes."""
        if scenario.method.is_reference and result.gate is not None:
            self._gate_references[scenario.id] = result

    def engine_gpus(self, scenario: Scenario) -> list[int] | None:
        """NVML indices of the GPUs this scenario's engine uses: the first TP visible ones."""
        gpus = self.device.get("gpus")
        return [g["index"] for g in gpus[: scenario.model.tp]] if gpus else None

    def _judge(self, result: ScenarioResult, scenario: Scenario) -> None:
        """Judged by the profile in force: a kept result's own tolerances play no part."""
        judged = self.judge(result, Rules.of(scenario))
        judged.verdict.inconclusive_fails &= self.gating is not None or self.judging.inconclusive_fails  # a gate's own
        result.verdict = judged.verdict
        if judged.baseline is not None:
            result.baseline = judged.baseline
        self.results.append(result)
        self._written(result, write_result(self.run_dir, result))

    def _written(self, result: ScenarioResult, path: Path) -> None:
        self.progress.written(result, path)

    # ------------------------------------------------------------ the end

    def close_engine(self) -> None:
        self.pool.close()

    def finish(self, interrupted: bool = False) -> list[str]:
        """Close the engine, refresh baselines if asked (only after a complete run), write run.json.

        Returns one line per baseline written or refused."""
        self.close_engine()
        if self.history is not None:
            self.history.close()
        lines = []
        if self.judging.update_baselines:
            if interrupted:
                lines.append("baselines not updated: the run was interrupted")
            else:
                lines = refresh_baselines(self.judging.baseline_dir, self.results, self.device["hardware_key"])
        self.write_run_file(finished=True, interrupted=interrupted)
        return lines

    def run_file(self, finished: bool, interrupted: bool = False) -> RunFile:
        """run.json: what ran, where, and how long each phase took."""
        stats = self.stats.model_copy(
            update={
                "engine_starts": self.pool.stats.starts,
                "engine_start_s": self.pool.stats.start_s,
                "checkpoint_fetch_s": self.pool.stats.fetch_s,
                "wall_s": time.monotonic() - self.started,
            }
        )
        return RunFile(
            run_id=self.run_id,
            profile=self.place.profile,
            profile_path=self.place.profile_path,
            started_at=self.started_at,
            finished_at=now_iso() if finished else None,
            interrupted=interrupted,
            device=Device.model_validate(self.device),
            provenance=self.provenance,
            stats=stats,
            engine_keys=sorted(self.pool.keys_seen),
            scenario_hashes=self.place.scenario_hashes,
            environments=self.environments or {},
        )

    def write_run_file(self, finished: bool, interrupted: bool = False) -> None:
        if self.place.owns_run_file:
            write_record(self.run_dir / "run.json", self.run_file(finished, interrupted))
        self._run_file_written = True
