"""Reading the history store: a metric's series, what moved most, the values a rolling baseline uses.

Only results of complete runs of this suite's record schema count; rows of another schema (a newer
or older suite wrote them), of a half-written or interrupted run, or holding no finite value are
skipped, each such run named once in `skipped`.
"""

from __future__ import annotations

import datetime
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from ..messages import one_line, shown_url
from ..records import SCHEMA_VERSION
from ..records.scenario import MAX_BATCH_SIZE
from ..status import OK
from .database import HistoryError
from .record import as_utc
from .tables import gate_pairs, metric_values, results, round_values, runs, verdicts

RECORDED_GATES = 40  # the gates on record that estimate the offset between fresh engines


@dataclass
class Point:
    run_id: str
    finished_at: datetime.datetime
    vllm: str | None
    value: float
    verdict: str | None = None  # the metric's verdict in that run


@dataclass
class Series:
    scenario_id: str
    metric: str
    hardware_key: str
    points: list[Point] = field(default_factory=list)  # oldest first

    def version_changes(self) -> list[int]:
        """Indexes of points whose vLLM differs from the point before."""
        return [i for i in range(1, len(self.points)) if self.points[i].vllm != self.points[i - 1].vllm]


@dataclass
class Drift:
    scenario_id: str
    metric: str
    hardware_key: str
    before: float  # median of the window's first runs
    after: float  # median of its last runs
    runs: int

    @property
    def change(self) -> float:
        return (self.after - self.before) / self.before if self.before else math.inf


def skip_reason(complete: bool, record_schema: int) -> str | None:
    if record_schema != SCHEMA_VERSION:
        return f"record schema {record_schema} (this suite reads {SCHEMA_VERSION})"
    if not complete:
        return "incomplete (interrupted or half-written)"
    return None


@dataclass
class TimedResult:
    """What one stored result cost: its throughput and timings (for `specperf plan`).  Results
    recorded before the store kept timings have None there."""

    run_id: str
    run_started_at: datetime.datetime | None
    run_finished_at: datetime.datetime | None
    scenario_hash: str
    model: str | None
    method: str | None
    batch_size: int | None
    dataset: str | None
    throughput: float | None
    speedup: float | None
    engine_start_s: float | None
    warmup_s: float | None
    measure_s: float | None
    rounds: int | None
    output_tokens: int | None
    sequences: int | None = None  # per round
    prompt_tokens: float | None = None  # mean per request


def _number(value) -> float | None:
    """A finite number from a column, else None (SQLite keeps any type in any column)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _batch_size(value: Any) -> int | None:
    """A row's batch size where it is one a scenario can have (SQLite keeps any value in any column)."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return value if is_int and 1 <= value <= MAX_BATCH_SIZE else None


class Reader:
    """Queries over one history database; `skipped` collects one line per run left out."""

    def __init__(self, engine: Engine, url: str):
        self.engine, self.url = engine, url
        self.skipped: dict[str, str] = {}

    def _rows(self, query):
        try:
            with self.engine.connect() as connection:
                return connection.execute(query).all()
        except SQLAlchemyError as err:
            raise HistoryError(f"history {shown_url(self.url)}: {one_line(err, 300)}") from None
        except (ValueError, TypeError) as err:  # a column of the wrong type (a time that is no time)
            raise HistoryError(f"history {shown_url(self.url)}: unreadable row: {one_line(err, 300)}") from None

    def _usable(self, row) -> bool:
        texts = (row.run_id, row.scenario_id, row.hardware_key, row.vllm if row.vllm is not None else "")
        if not all(isinstance(value, str) for value in texts):  # SQLite keeps a BLOB in a text column
            self.skipped.setdefault(
                repr(row.run_id), f"history: run {row.run_id!r}: a text column holds no text: skipped"
            )
            return False
        reason = skip_reason(row.complete, row.record_schema)
        if reason is None and _number(row.value) is not None:
            return True
        self.skipped.setdefault(row.run_id, f"history: run {row.run_id}: {reason or 'no finite value'}: skipped")
        return False

    def _base(self, metric: str):
        return (
            select(
                runs.c.run_id,
                runs.c.complete,
                runs.c.record_schema,
                results.c.scenario_id,
                results.c.hardware_key,
                results.c.finished_at,
                results.c.vllm,
                metric_values.c.metric,
                metric_values.c.value,
            )
            .join(runs, runs.c.id == results.c.run_pk)
            .join(metric_values, and_(metric_values.c.result_pk == results.c.id, metric_values.c.metric == metric))
            .where(results.c.status == OK, results.c.valid.is_(True))
        )

    def hardware_keys(self, scenario_id: str) -> list[str]:
        query = select(results.c.hardware_key).where(results.c.scenario_id == scenario_id).distinct()
        keys = [row.hardware_key for row in self._rows(query)]
        if any(not isinstance(key, str) for key in keys):
            self.skipped.setdefault("hardware_key", "history: a result's hardware_key holds no text: skipped")
        return sorted(key for key in keys if isinstance(key, str))

    def series(
        self,
        scenario_id: str,
        metric: str,
        hardware_key: str,
        last: int | None = None,
        scenario_hash: str | None = None,
        before_run: str | None = None,
    ) -> Series:
        """The metric's value in the last `last` runs of the scenario on that hardware, oldest first
        (only runs of that scenario hash, and none of `before_run` itself or later, where given)."""
        query = (
            self._base(metric)
            .add_columns(verdicts.c.status.label("verdict"))
            .outerjoin(verdicts, and_(verdicts.c.result_pk == results.c.id, verdicts.c.metric == metric))
            .where(results.c.scenario_id == scenario_id, results.c.hardware_key == hardware_key)
            .order_by(results.c.finished_at.desc())
        )
        if scenario_hash is not None:
            query = query.where(results.c.scenario_hash == scenario_hash)
        if before_run is not None:
            query = query.where(runs.c.run_id != before_run)
        points = []
        for row in self._rows(query.limit(None if last is None else 4 * last)):
            if self._usable(row):
                points.append(Point(row.run_id, as_utc(row.finished_at), row.vllm, row.value, row.verdict))
            if last is not None and len(points) == last:
                break
        return Series(scenario_id, metric, hardware_key, points[::-1])

    def timed_results(self, hardware_key: str) -> list[TimedResult]:
        """Every measured result on that hardware with its throughput, speedup and timings, newest first."""
        throughput, speedup = metric_values.alias("throughput"), metric_values.alias("speedup")
        query = (
            select(
                runs.c.run_id,
                runs.c.started_at,
                runs.c.finished_at.label("run_finished_at"),
                results.c.scenario_hash,
                results.c.model,
                results.c.method,
                results.c.batch_size,
                results.c.dataset,
                results.c.engine_start_s,
                results.c.warmup_s,
                results.c.measure_s,
                results.c.rounds,
                results.c.output_tokens,
                results.c.sequences,
                results.c.prompt_tokens,
                throughput.c.value.label("throughput"),
                speedup.c.value.label("speedup"),
            )
            .join(runs, runs.c.id == results.c.run_pk)
            .outerjoin(
                throughput, and_(throughput.c.result_pk == results.c.id, throughput.c.metric == "throughput_tok_s")
            )
            .outerjoin(speedup, and_(speedup.c.result_pk == results.c.id, speedup.c.metric == "speedup"))
            .where(results.c.hardware_key == hardware_key, results.c.status == OK)
            .order_by(results.c.finished_at.desc())
        )
        return [
            TimedResult(
                run_id=row.run_id,
                run_started_at=row.started_at and as_utc(row.started_at),
                run_finished_at=row.run_finished_at and as_utc(row.run_finished_at),
                scenario_hash=row.scenario_hash,
                model=row.model,
                method=row.method,
                batch_size=_batch_size(row.batch_size),
                dataset=row.dataset,
                throughput=_number(row.throughput),
                speedup=_number(row.speedup),
                engine_start_s=_number(row.engine_start_s),
                warmup_s=_number(row.warmup_s),
                measure_s=_number(row.measure_s),
                rounds=_number(row.rounds),
                output_tokens=_number(row.output_tokens),
                sequences=_number(row.sequences),
                prompt_tokens=_number(row.prompt_tokens),
            )
            for row in self._rows(query)
        ]

    def gate_pairs(self, hardware_key: str, newest: int = RECORDED_GATES) -> list[tuple[list[float], list[int]]]:
        """The newest `newest` upgrade gates' throughput pairs on that hardware: per gate, each pair's
        log ratio (candidate over current) and the engine pair it ran on (judge/paired.recorded_offset_of)."""
        candidate = round_values.alias("candidate")
        query = (
            select(
                runs.c.run_id,
                runs.c.complete,
                runs.c.record_schema,
                results.c.id.label("result"),
                results.c.scenario_id,
                results.c.hardware_key,
                results.c.vllm,
                gate_pairs.c.cluster,
                gate_pairs.c.current,
                candidate.c.value,
            )
            .join(runs, runs.c.id == results.c.run_pk)
            .join(gate_pairs, gate_pairs.c.result_pk == results.c.id)
            .join(
                candidate,
                and_(
                    candidate.c.result_pk == results.c.id,
                    candidate.c.metric == "throughput_tok_s",
                    candidate.c.round == gate_pairs.c.round,
                ),
            )
            .where(results.c.hardware_key == hardware_key, results.c.status == OK, results.c.valid.is_(True))
            .order_by(results.c.finished_at.desc(), results.c.id, gate_pairs.c.round)
        )
        gates: dict[int, tuple[list[float], list[int]]] = {}
        for row in self._rows(query):
            current = _number(row.current)
            if not self._usable(row) or current is None or current <= 0 or row.value <= 0:
                continue
            if row.result not in gates and len(gates) == newest:
                break
            log_ratios, clusters = gates.setdefault(row.result, ([], []))
            log_ratios.append(math.log(row.value / current))
            clusters.append(row.cluster)
        return list(gates.values())

    def drift(
        self, since: datetime.datetime, metrics: list[str], hardware_key: str | None = None, edge: int = 3
    ) -> list[Drift]:
        """Per scenario, metric and hardware key since `since`: the median of its last `edge` runs
        against that of its first `edge` (needs 2 x edge runs), largest move first."""
        found: dict[tuple[str, str, str], list[tuple[datetime.datetime, float]]] = {}
        for metric in metrics:
            query = self._base(metric).where(results.c.finished_at >= since)
            if hardware_key is not None:
                query = query.where(results.c.hardware_key == hardware_key)
            for row in self._rows(query):
                if self._usable(row):
                    found.setdefault((row.scenario_id, metric, row.hardware_key), []).append(
                        (row.finished_at, row.value)
                    )
        moved = []
        for (scenario_id, metric, key), points in found.items():
            if len(points) < 2 * edge:
                continue
            values = [v for _, v in sorted(points, key=lambda p: p[0])]
            moved.append(
                Drift(
                    scenario_id,
                    metric,
                    key,
                    statistics.median(values[:edge]),
                    statistics.median(values[-edge:]),
                    len(values),
                )
            )
        return sorted(moved, key=lambda d: -abs(d.change))
