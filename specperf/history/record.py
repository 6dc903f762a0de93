"""Recording runs into the history store: a finished run's results, or a run directory after the fact.

A run is keyed by its run id.  Recording inserts the results the store does not hold yet, in one
transaction, so re-recording a run is a no-op and a resumed run adds what it measured since; two
processes recording the same run at once collide on the unique keys, and the loser tries again and
finds the rows there.  Results are stored with their metric values, every round's samples and their
verdicts; vector metrics one row per position (`per_position_acceptance[0]`, ...).
"""

from __future__ import annotations

import datetime
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from ..messages import one_line, shown_url
from ..records import SCHEMA_VERSION, RunFile, ScenarioResult
from ..storage import ResultFileError, parse_time, read_run_dir
from .database import HistoryError
from .tables import gate_pairs, metric_values, results, round_values, runs, verdicts

ATTEMPTS = 3


@dataclass
class Recorded:
    run_id: str
    added: int = 0  # results new to the store
    present: int = 0  # results it held already
    problems: list[str] = field(default_factory=list)  # files that could not be recorded, one line each

    def line(self) -> str:
        held = f", {self.present} already there" if self.present else ""
        return f"history: {self.run_id}: {self.added} results recorded{held}"


def utc_time(text: str | None) -> datetime.datetime | None:
    """A stored ISO timestamp in UTC, or None when absent or unreadable."""
    moment = parse_time(text)
    return as_utc(moment) if moment is not None else None


def as_utc(value: datetime.datetime) -> datetime.datetime:
    """Times are stored in UTC (SQLite keeps no zone, so a naive time read back is UTC)."""
    return value.replace(tzinfo=datetime.UTC) if value.tzinfo is None else value.astimezone(datetime.UTC)


def flat(name: str, value) -> list[tuple[str, float | None]]:
    """(metric, value) rows: a number as itself, a vector one row per position."""
    if isinstance(value, list):
        return [(f"{name}[{i}]", v) for i, v in enumerate(value)]
    return [(name, value)]


def _run_row(run_id: str, run: RunFile | None, first: ScenarioResult | None) -> dict:
    source = run if run is not None else first
    provenance = source.provenance if source is not None else {}
    device = source.device if source is not None else None
    finished = run.finished_at if run is not None else None
    return {
        "run_id": run_id,
        "profile": run.profile if run is not None else (first.scenario.profile if first else ""),
        "hardware_key": device.hardware_key if device else "",
        "started_at": utc_time(run and run.started_at),
        "finished_at": utc_time(finished),
        "complete": run is not None and bool(finished) and not run.interrupted,
        "record_schema": SCHEMA_VERSION,
        "vllm": provenance.get("vllm"),
        "git_commit": provenance.get("git_commit"),
        "suite_version": provenance.get("suite_version"),
        "hostname": provenance.get("hostname"),
        "provenance": provenance,
        "recorded_at": datetime.datetime.now(datetime.UTC),
    }


def cost_fields(result: ScenarioResult) -> dict:
    """What a result cost, as the store keeps it and the planner reads it (queries.TimedResult)."""
    timings, prompts = result.timings, result.workload and result.workload.prompt_tokens
    return {
        "engine_start_s": timings.engine_start_s if timings else None,
        "warmup_s": timings.warmup_s if timings else None,
        "measure_s": timings.measure_s if timings else None,
        "rounds": len(result.rounds),
        "output_tokens": sum(r.output_tokens for r in result.rounds),
        "sequences": len(result.output_hashes) if result.output_hashes else None,
        "prompt_tokens": statistics.fmean(prompts) if prompts else None,
    }


def _result_row(run_pk: int, result: ScenarioResult, fallback: datetime.datetime) -> dict:
    scenario = result.scenario
    return {
        "run_pk": run_pk,
        "scenario_id": scenario.id,
        "scenario_hash": scenario.hash,
        "hardware_key": result.device.hardware_key,
        "finished_at": utc_time(result.finished_at) or fallback,
        "vllm": result.provenance.get("vllm"),
        "model": scenario.model.name,
        "method": scenario.method.label,
        "batch_size": scenario.batch_size,
        "dataset": scenario.dataset,
        "status": result.status,
        "valid": result.valid,
        "verdict": result.verdict.status if result.verdict else None,
        **cost_fields(result),
    }


def _gate_pairs(pk: int, result: ScenarioResult) -> list[dict]:
    """An upgrade gate's pairs: each round's engine pair and the current build's throughput."""
    current = result.gate.current.metrics.get("throughput_tok_s") if result.gate is not None else None
    if current is None or len(current.samples) != len(result.rounds):
        return []
    return [
        {"result_pk": pk, "round": i, "cluster": r.engine_instance, "current": value}
        for i, (r, value) in enumerate(zip(result.rounds, current.samples))
    ]


def _children(pk: int, result: ScenarioResult) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """The metric value, round sample, verdict and gate pair rows of one stored result."""
    values, samples, judged = [], [], []
    for name, metric in result.metrics.items():
        values += [{"result_pk": pk, "metric": m, "value": v} for m, v in flat(name, metric.value)]
        for i, sample in enumerate(metric.samples):
            samples += [{"result_pk": pk, "metric": m, "round": i, "value": v} for m, v in flat(name, sample)]
    if result.verdict is not None:
        verdict = result.verdict
        judged.append(
            {
                "result_pk": pk,
                "metric": "",
                "status": verdict.status,
                "change": None,
                "ci_low": None,
                "ci_high": None,
                "p_value": None,
                "tolerance": None,
                "judged_by": None,
                "note": verdict.note,
            }
        )
        judged += [
            {
                "result_pk": pk,
                "metric": m.metric,
                "status": m.status,
                "change": m.change,
                "ci_low": m.ci_low,
                "ci_high": m.ci_high,
                "p_value": m.p_value,
                "tolerance": m.tolerance,
                "judged_by": m.judged_by,
                "note": m.note,
            }
            for m in verdict.metrics
        ]
    return values, samples, judged, _gate_pairs(pk, result)


def _record_once(
    connection: Connection, run_id: str, run: RunFile | None, found: list[ScenarioResult], recorded: Recorded
) -> None:
    row = _run_row(run_id, run, found[0] if found else None)
    stored = connection.execute(select(runs.c.id, runs.c.complete).where(runs.c.run_id == run_id)).first()
    if stored is None:
        run_pk = connection.execute(insert(runs).returning(runs.c.id), row).scalar_one()
    else:
        run_pk = stored.id
        if row["complete"] and not stored.complete:  # a resumed run has finished since
            connection.execute(
                update(runs).where(runs.c.id == run_pk).values(complete=True, finished_at=row["finished_at"])
            )
    held = set(connection.execute(select(results.c.scenario_id).where(results.c.run_pk == run_pk)).scalars())
    new = [r for r in found if r.id not in held]
    recorded.present, recorded.added = len(found) - len(new), len(new)
    if not new:
        return
    fallback = row["finished_at"] or row["recorded_at"]
    keys = connection.execute(
        insert(results).returning(results.c.id, results.c.scenario_id, sort_by_parameter_order=True),
        [_result_row(run_pk, r, fallback) for r in new],
    ).all()
    tables = (metric_values, round_values, verdicts, gate_pairs)
    rows: dict = {table: [] for table in tables}
    for (pk, _), result in zip(keys, new):
        for table, children in zip(tables, _children(pk, result)):
            rows[table] += children
    for table in tables:
        if rows[table]:
            connection.execute(insert(table), rows[table])


def record_results(engine: Engine, url: str, run_id: str, run: RunFile | None, found: list[ScenarioResult]) -> Recorded:
    """Store a run's results (those already there are left alone); HistoryError when the database fails."""
    recorded = Recorded(run_id)
    for attempt in range(ATTEMPTS):
        try:
            with engine.begin() as connection:
                _record_once(connection, run_id, run, found, recorded)
            return recorded
        except IntegrityError:  # another process recorded the same run meanwhile: look again
            if attempt == ATTEMPTS - 1:
                raise HistoryError(
                    f"history {shown_url(url)}: {run_id}: kept colliding with another recording"
                ) from None
        except SQLAlchemyError as err:
            raise HistoryError(f"history {shown_url(url)}: cannot record {run_id}: {one_line(err, 300)}") from None
    return recorded


def record_run_dir(engine: Engine, url: str, run_dir: Path) -> Recorded:
    """Record a run directory as it is on disk; unreadable files are skipped and named in `problems`."""
    run_dir = Path(run_dir)
    try:
        found = read_run_dir(run_dir)
    except ResultFileError as err:
        return Recorded(run_dir.name, problems=[str(err)])
    run_id = found.run.run_id if found.run is not None else run_dir.name
    recorded = record_results(engine, url, run_id, found.run, found.results)
    recorded.problems = found.problems
    return recorded
