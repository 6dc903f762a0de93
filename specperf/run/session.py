"""A run session: measures scenarios on engines, writes results, judges them against baselines.

The pytest plugin and the command-line tool both drive this class; it knows nothing of pytest.
Scenarios should arrive grouped by engine key (the plugin sorts them) so each engine starts once.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..profiles import checkpoints

from ..judge import metrics

from ..profiles import workloads
from ..judge.baselines import load_baseline, write_baseline
from .engine import Engine, EngineConfig, EngineError, EngineTimeout, default_env
from .gpus import TelemetrySampler, telemetry_problems
from .device import describe_device
from ..judge.noise import load_noise
from ..storage import (SCHEMA_VERSION, ResultFileError, atomic_write_json, new_run_id, now_iso, read_json,
                      suite_provenance, write_result)
from ..profiles.scenarios import Scenario
from ..judge.verdicts import MIN_ROUNDS, judge
from ..records import Verdict as ScenarioVerdict

SHOWN_OUTPUTS = 3          # requests whose prompt and output text are kept for the report
SHOWN_CHARS = 4000
MIN_ROUND_S = 0.05         # shorter rounds measure the timer and the scheduler, not the engine


@dataclass
class RunStats:
    engine_starts: int = 0
    engine_start_s: float = 0.0
    warmup_s: float = 0.0
    measure_s: float = 0.0
    scenarios: int = 0
    errors: int = 0
    resumed: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class _Reference:
    throughput: float | None
    output_hashes: list[str]


@dataclass
class RunSession:
    profile: str
    reports_dir: Path
    baseline_dir: Path
    dataset_dir: Path | None = None
    rounds: int | None = None               # overrides every scenario's rounds
    update_baselines: bool = False
    log: Callable[[str], None] = print
    run_id: str | None = None
    scenario_timeout_s: float | None = None   # warm-up and rounds of one scenario; None: no limit
    resume_dir: Path | None = None          # an earlier run of this profile: keep its finished results
    profile_path: str | None = None
    owns_run_file: bool = True              # False on pytest-xdist workers: the controller merges theirs
    planned: int = 0                        # scenarios expected in this run, for progress lines
    stats: RunStats = field(default_factory=RunStats)

    def __post_init__(self):
        if self.resume_dir is not None:
            self.run_dir = Path(self.resume_dir)
            self.run_id = self.run_dir.name
            self._finished = self._finished_results()
        else:
            self.run_id = self.run_id or new_run_id(self.profile)
            self.run_dir = Path(self.reports_dir) / self.run_id
            self._finished = {}
        self.device = describe_device()
        self.provenance = suite_provenance()
        self.started = time.monotonic()
        self.started_at = now_iso()
        self._engine: Engine | None = None
        self._engine_key: str | None = None
        self._failed_keys: dict[str, str] = {}
        self._keys_seen: set[str] = set()
        self._tokenizers: dict[str, object] = {}
        self._references: dict[str, _Reference] = {}
        self.results: list[dict] = []
        self._noise: dict | None = None
        self.write_run_file(finished=False)

    def _finished_results(self) -> dict[str, dict]:
        """Results of the run being resumed that need no new measurement (ok, with output hashes)."""
        finished = {}
        for path in sorted((self.run_dir / "results").glob("*.json")):
            try:
                record = read_json(path, "result")
            except ResultFileError as err:
                self.log(f"resume: measuring again: {err}")
                continue
            if record.get("status") == "ok" and "output_hashes" in record:
                finished[record["scenario"]["id"]] = record
        return finished

    # ------------------------------------------------------------ engines

    def engine_config(self, scenario: Scenario) -> EngineConfig:
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

    def engine_for(self, scenario: Scenario) -> tuple[Engine, float]:
        """The engine of this scenario's key, started if needed; returns it and the start time spent."""
        key = scenario.engine_key
        self._keys_seen.add(key)
        if key in self._failed_keys:
            raise EngineError(self._failed_keys[key])
        if self._engine_key == key and self._engine is not None:
            return self._engine, 0.0
        self.close_engine()
        self.log(f"starting engine: {scenario.model.name} / {scenario.method.label}")
        try:
            config = self.engine_config(scenario)      # may build a local checkpoint: not engine time
        except checkpoints.CheckpointError as err:
            self._failed_keys[key] = str(err)
            raise
        t0 = time.monotonic()
        try:
            self._engine = Engine(config)
        except EngineError as err:
            self._failed_keys[key] = str(err)      # later scenarios of this key fail at once
            raise
        finally:
            start_s = time.monotonic() - t0
            self.stats.engine_starts += 1
            self.stats.engine_start_s += start_s
        self._engine_key = key
        return self._engine, start_s

    def close_engine(self) -> None:
        if self._engine is not None:
            self._engine.close()
        self._engine, self._engine_key = None, None

    # ------------------------------------------------------------ workloads

    def tokenizer(self, scenario: Scenario):
        path = checkpoints.resolve(scenario.model.tokenizer or scenario.model.path)
        if path not in self._tokenizers:
            from transformers import AutoTokenizer

            self._tokenizers[path] = AutoTokenizer.from_pretrained(path)
        return self._tokenizers[path]

    def prepare(self, scenario: Scenario) -> tuple[list[list[list[int]]], dict, list]:
        """The generate() calls of one round (token-id prompts), the workload facts, and the requests."""
        tokenizer = self.tokenizer(scenario)
        sample = workloads.load(scenario.dataset, scenario.num_requests, scenario.seed,
                                self.dataset_dir, tokenizer=tokenizer)
        requests = list(sample.requests)
        prompts = [
            tokenizer(workloads.render_prompt(r, tokenizer), add_special_tokens=not r.chat).input_ids
            for r in requests
        ]
        b = scenario.batch_size
        if scenario.batching == "replicate":       # the study: one prompt replicated B times per call
            calls = [[ids] * b for ids in prompts]
            call_requests = [[r] * b for r in requests]
        else:                                      # B distinct prompts per call, cycling if too few
            count = -(-len(prompts) // b) * b
            cycled = [i % len(prompts) for i in range(count)]
            calls = [[prompts[i] for i in cycled[s:s + b]] for s in range(0, count, b)]
            call_requests = [[requests[i] for i in cycled[s:s + b]] for s in range(0, count, b)]
        facts = {
            "source": sample.source, "checksum": sample.checksum, "stand_in": sample.stand_in,
            "request_ids": [r.id for r in requests], "prompt_tokens": [len(p) for p in prompts],
            "output_len": scenario.output_len,
        }
        return calls, facts, [r for group in call_requests for r in group]

    # ------------------------------------------------------------ measuring

    def run(self, scenario: Scenario, benchmark=None) -> dict:
        """Measure one scenario and write its result; never raises for engine or workload faults."""
        kept = self._finished.get(scenario.id)
        if kept is not None and kept["scenario"].get("hash") == scenario.content_hash:
            return self._keep(scenario, kept)
        self.log(self._progress(scenario))
        record = {"scenario": scenario.to_dict(), "status": "ok", "error": None,
                  "started_at": now_iso(), "device": self.device}
        try:
            self._measure(scenario, record, benchmark)
        except workloads.WorkloadUnavailable as err:
            record.update(status="skipped", error=str(err))
        except EngineTimeout:
            self._engine_failed(scenario, record, "timeout",
                                f"timed out: the scenario did not finish within its {self.scenario_timeout_s:g} s "
                                "limit; engine killed")
        except EngineError as err:
            self._engine_failed(scenario, record, "engine", str(err))
        except (workloads.WorkloadError, checkpoints.CheckpointError) as err:
            record.update(status="error", error=str(err), error_kind="input")
            self.stats.errors += 1
        record["finished_at"] = now_iso()
        record.setdefault("provenance", self.provenance)
        self.stats.scenarios += 1
        write_result(self.run_dir, record)
        if record["status"] == "skipped":
            return record
        self.judge(record)
        self.results.append(record)
        return record

    def engine_gpus(self, scenario: Scenario) -> list[int] | None:
        """NVML indices of the GPUs this scenario's engine uses: the first TP visible ones."""
        gpus = self.device.get("gpus")
        return [g["index"] for g in gpus[:scenario.model.tp]] if gpus else None

    def _keep(self, scenario: Scenario, record: dict) -> dict:
        """A result of the resumed run: not measured again, but judged and reported with this run."""
        self.log(f"[resumed] {scenario.id}: kept from {self.run_dir}")
        if scenario.method.is_reference:
            self._references[scenario.id] = _Reference(record["metrics"]["throughput_tok_s"]["value"],
                                                       record["output_hashes"])
        self.stats.scenarios += 1
        self.stats.resumed += 1
        self.judge(record)
        self.results.append(record)
        return record

    def _engine_failed(self, scenario: Scenario, record: dict, kind: str, message: str) -> None:
        """The engine of this key failed: its other scenarios fail at once; the next key starts afresh."""
        record.update(status="error", error=message, error_kind=kind)
        self.stats.errors += 1
        self._failed_keys.setdefault(scenario.engine_key, message)
        self.close_engine()

    def _measure(self, scenario: Scenario, record: dict, benchmark) -> None:
        calls, facts, call_requests = self.prepare(scenario)
        record["workload"] = facts
        engine, start_s = self.engine_for(scenario)
        record["provenance"] = {**self.provenance, **engine.provenance, "engine_env": engine.config.env}
        record["effective_config"] = engine.effective_config

        deadline = time.monotonic() + (self.scenario_timeout_s or float("inf"))

        def generate(prompts: list[list[int]]) -> dict:
            return engine.generate(prompts, scenario.output_len, max(0.0, deadline - time.monotonic()))

        t0 = time.monotonic()
        for _ in range(scenario.warmup):
            generate(calls[0])
        warmup_s = time.monotonic() - t0

        rounds: list[dict] = []

        def one_round() -> None:
            replies = [generate(c) for c in calls]
            rounds.append({
                "memory": replies[-1]["memory"],
                "wall_s": sum(r["wall_s"] for r in replies),
                "output_tokens": sum(r["output_tokens"] for r in replies),
                "counters": metrics.sum_counters(
                    [metrics.counter_delta(r["counters_before"], r["counters_after"]) for r in replies]),
                "token_ids": [ids for r in replies for ids in r["token_ids"]],
                "texts": [t for r in replies for t in r["texts"]],
            })

        n_rounds = self.rounds or scenario.rounds
        t0 = time.monotonic()
        with TelemetrySampler(self.engine_gpus(scenario)) as sampler:
            if benchmark is not None and not getattr(benchmark, "disabled", True):
                benchmark.pedantic(one_round, rounds=n_rounds, iterations=1, warmup_rounds=0)
            else:                   # no pytest-benchmark, or disabled (it is under xdist): same rounds
                for _ in range(n_rounds):
                    one_round()
        measure_s = time.monotonic() - t0
        record["gpu_telemetry"] = sampler.summary()
        self.stats.warmup_s += warmup_s
        self.stats.measure_s += measure_s
        record["timings"] = {"engine_start_s": start_s, "warmup_s": warmup_s, "measure_s": measure_s}
        self._summarise(scenario, record, rounds, call_requests, n_rounds)
        if benchmark is not None:
            benchmark.extra_info.update({k: v["value"] for k, v in record["metrics"].items()})

    def _summarise(self, scenario: Scenario, record: dict, rounds: list[dict], call_requests: list,
                   n_rounds: int) -> None:
        throughputs = metrics.round_throughputs(rounds)
        first = rounds[0]
        record["rounds"] = [
            {"wall_s": r["wall_s"], "output_tokens": r["output_tokens"], "throughput": t, "counters": r["counters"]}
            for r, t in zip(rounds, throughputs)
        ]
        record["counters"] = metrics.sum_counters([r["counters"] for r in rounds])
        record["memory"] = rounds[-1]["memory"]
        record["output_hashes"] = [metrics.output_hash(ids) for ids in first["token_ids"]]
        shown = {}
        for req, text in zip(call_requests, first["texts"]):     # distinct requests, not replicas
            if req.id not in shown and len(shown) < SHOWN_OUTPUTS:
                shown[req.id] = {"request_id": req.id, "prompt": req.text[:SHOWN_CHARS], "output": text[:SHOWN_CHARS]}
        record["outputs"] = list(shown.values())
        record["workload"]["overlap_bleu4"] = [
            workloads.overlap_bleu4(req.text, text) for req, text in zip(call_requests, first["texts"])
        ]
        values = {"throughput_tok_s": {"value": _median(throughputs), "samples": throughputs}}
        record["lossless"] = None
        if scenario.method.is_reference:
            self._references[scenario.id] = _Reference(_median(throughputs), record["output_hashes"])
        else:
            per_round = [metrics.acceptance(r["counters"]) for r in rounds]
            overall = metrics.acceptance(record["counters"])
            for name in ("mean_acceptance_length", "draft_acceptance_rate", "per_position_acceptance"):
                values[name] = {"value": overall[name], "samples": [a[name] for a in per_round]}
            reference = self._references.get(scenario.reference_id)
            if reference is not None and reference.throughput:
                speedups = [t / reference.throughput for t in throughputs]
                values["speedup"] = {"value": _median(speedups), "samples": speedups}
                fraction = metrics.lossless_fraction(record["output_hashes"], reference.output_hashes)
                values["lossless_fraction"] = {"value": fraction, "samples": [fraction]}
                record["lossless"] = {"identical": round(fraction * len(first["token_ids"])),
                                      "total": len(first["token_ids"]), "reference_id": scenario.reference_id}
        record["metrics"] = values
        reasons = []
        if len(rounds) < n_rounds:
            reasons.append(f"only {len(rounds)} of {n_rounds} rounds finished")
        if n_rounds < MIN_ROUNDS:
            reasons.append(f"{n_rounds} rounds are too few for the significance test (it needs {MIN_ROUNDS})")
        shortest = min(r["wall_s"] for r in rounds)
        if shortest < MIN_ROUND_S:
            reasons.append(f"a round took {shortest * 1000:.1f} ms, too short to time (minimum {MIN_ROUND_S} s)")
        if any(r["output_tokens"] == 0 for r in rounds):
            reasons.append("a round produced no output tokens")
        if not scenario.method.is_reference and "speedup" not in values:
            reasons.append(f"no reference result {scenario.reference_id} in this run")
        stable = all(r["token_ids"] == first["token_ids"] for r in rounds)
        if not stable:
            reasons.append("greedy outputs differ between rounds")
        preflight_pids = [p["pid"] for p in self.device.get("foreign_processes") or []]
        reasons += telemetry_problems(record.get("gpu_telemetry"), preflight_pids)
        record["validity"] = {"valid": not reasons, "reasons": reasons}

    def _progress(self, scenario: Scenario) -> str:
        done = self.stats.scenarios
        line = f"[{done + 1}/{self.planned or '?'}] {scenario.id}"
        if done and self.planned > done:
            remaining = (time.monotonic() - self.started) / done * (self.planned - done)
            line += f" (about {remaining / 60:.1f} min left)"
        return line

    # ------------------------------------------------------------ judging

    def noise(self) -> dict:
        if self._noise is None:
            self._noise = load_noise(self.baseline_dir, self.device["hardware_key"])
        return self._noise

    def judge(self, record: dict) -> ScenarioVerdict:
        baseline, note = None, ""
        try:
            baseline = load_baseline(self.baseline_dir, self.device["hardware_key"], record["scenario"]["id"])
        except ResultFileError as err:
            note = str(err)
        try:
            noise = self.noise().get(record["scenario"]["id"])
        except ResultFileError as err:
            noise, note = None, str(err)
        verdict = judge(record, baseline, noise)
        if note:
            verdict.status, verdict.note = "error", note
        record["verdict"] = {
            "status": verdict.status, "note": verdict.note, "failed": verdict.failed,
            "message": verdict.failure_message() if verdict.failed else "",
            "metrics": [m.__dict__ for m in verdict.metrics],
        }
        if baseline is not None:
            record["baseline"] = {
                "vllm": baseline.get("provenance", {}).get("vllm"),
                "recorded_at": baseline.get("recorded_at"),
                "effective_config": baseline.get("effective_config"),
                "device": baseline.get("device"),
                "metric_medians": {k: v.get("value") for k, v in baseline["metrics"].items()},
                "metric_samples": {k: v.get("samples") for k, v in baseline["metrics"].items()},
                "memory_peak_mib": (baseline.get("memory") or {}).get("peak_mib"),
            }
        write_result(self.run_dir, record)
        return verdict

    # ------------------------------------------------------------ the end

    def finish(self, interrupted: bool = False) -> list[str]:
        """Close the engine, refresh baselines if asked (only after a complete run), write run.json.

        Returns one line per baseline written or refused."""
        self.close_engine()
        lines = []
        if self.update_baselines:
            if interrupted:
                lines.append("baselines not updated: the run was interrupted")
            else:
                for record in self.results:
                    try:
                        path = write_baseline(self.baseline_dir, record)
                        lines.append(f"baseline written: {path}")
                    except ValueError as err:
                        lines.append(f"baseline kept: {err}")
        self.write_run_file(finished=True, interrupted=interrupted)
        return lines

    def run_file(self, finished: bool, interrupted: bool = False) -> dict:
        """run.json: what ran, where, and how long each phase took."""
        return {
            "schema_version": SCHEMA_VERSION, "run_id": self.run_id, "profile": self.profile,
            "profile_path": self.profile_path,
            "started_at": self.started_at, "finished_at": now_iso() if finished else None,
            "interrupted": interrupted, "device": self.device, "provenance": self.provenance,
            "stats": {**self.stats.as_dict(), "wall_s": time.monotonic() - self.started},
            "engine_keys": sorted(self._keys_seen),
        }

    def write_run_file(self, finished: bool, interrupted: bool = False) -> None:
        if self.owns_run_file:
            atomic_write_json(self.run_dir / "run.json", self.run_file(finished, interrupted))


def merge_run_files(parts: list[dict]) -> dict:
    """One run.json from those of several pytest-xdist workers that wrote into one run directory."""
    merged = dict(parts[0])
    stats = {key: sum(p["stats"].get(key, 0) for p in parts) for key in parts[0]["stats"]}
    stats["wall_s"] = max(p["stats"]["wall_s"] for p in parts)
    merged.update(
        started_at=min(p["started_at"] for p in parts), finished_at=now_iso(),
        interrupted=any(p["interrupted"] for p in parts), stats=stats, workers=len(parts),
        engine_keys=sorted({key for p in parts for key in p["engine_keys"]}),
    )
    return merged


def summary_lines(run: dict, results: list[dict] | None = None) -> list[str]:
    s = run["stats"]
    lines = [
        f"specperf run {run['run_id']}: {s['scenarios']} scenarios ({s.get('resumed', 0)} resumed), "
        f"{s['errors']} errors, {s['engine_starts']} engine starts for {len(run['engine_keys'])} engine keys",
        f"time: engine start {s['engine_start_s']:.1f} s, warm-up {s['warmup_s']:.1f} s, "
        f"measurement {s['measure_s']:.1f} s, total {s['wall_s']:.1f} s",
    ]
    improved = [r["scenario"]["id"] for r in results or [] if r.get("verdict", {}).get("status") == "improvement"]
    if improved:
        lines.append(f"{len(improved)} improved: consider refreshing their baselines (--update-baselines): "
                     + ", ".join(improved))
    return lines


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
