"""The history store's schema, as SQLAlchemy Core tables (the migrations create exactly these).

One row per run, per scenario result, per metric value and per round sample, and per verdict; an
upgrade gate's result adds one row per pair of rounds (the engine pair it ran on, the current
build's throughput beside the candidate's round sample), from which the gates on record estimate
the offset between fresh engines (judge/paired.recorded_offset_of).
Results repeat the run's hardware key and finish time, so a trend (one scenario, one metric, one
machine, newest first) is one index range scan.  Vector metrics (per-position acceptance) are
stored one row per position, named `metric[i]`.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", String(200), nullable=False, unique=True),
    Column("profile", String(200), nullable=False),
    Column("hardware_key", String(200), nullable=False),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    Column("complete", Boolean, nullable=False),  # run.json says it finished, uninterrupted
    Column("record_schema", Integer, nullable=False),  # the result files' schema version
    Column("vllm", String(100)),
    Column("git_commit", String(100)),
    Column("suite_version", String(50)),
    Column("hostname", String(200)),
    Column("provenance", JSON),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
)

results = Table(
    "results",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_pk", ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("scenario_id", String(300), nullable=False),
    Column("scenario_hash", String(100), nullable=False),
    Column("hardware_key", String(200), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("vllm", String(100)),
    Column("model", String(200)),
    Column("method", String(100)),
    Column("batch_size", Integer),
    Column("dataset", String(100)),
    Column("status", String(30), nullable=False),
    Column("valid", Boolean, nullable=False),
    Column("verdict", String(30)),
    Column("engine_start_s", Float),  # the result's timings (records.Timings), for specperf plan
    Column("warmup_s", Float),
    Column("measure_s", Float),
    Column("rounds", Integer),  # rounds measured and the output tokens of all of them
    Column("output_tokens", Integer),
    Column("sequences", Integer),  # sequences a round generates (requests x batch)
    Column("prompt_tokens", Float),  # mean prompt tokens of the workload's requests
    UniqueConstraint("run_pk", "scenario_id"),
    Index("ix_results_trend", "scenario_id", "hardware_key", "finished_at"),
    Index("ix_results_finished_at", "finished_at"),
)

metric_values = Table(
    "metric_values",
    metadata,
    Column("result_pk", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("metric", String(100), primary_key=True),
    Column("value", Float),
)

round_values = Table(
    "round_values",
    metadata,
    Column("result_pk", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("metric", String(100), primary_key=True),
    Column("round", Integer, primary_key=True),
    Column("value", Float),
)

verdicts = Table(
    "verdicts",
    metadata,
    Column("result_pk", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("metric", String(100), primary_key=True),  # "" for the scenario's own verdict
    Column("status", String(30), nullable=False),
    Column("change", Float),
    Column("ci_low", Float),
    Column("ci_high", Float),
    Column("p_value", Float),
    Column("tolerance", Float),
    Column("judged_by", String(30)),
    Column("note", Text),
)

gate_pairs = Table(
    "gate_pairs",
    metadata,
    Column("result_pk", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("round", Integer, primary_key=True),  # the candidate's throughput: round_values at this round
    Column("cluster", Integer, nullable=False),  # the engine pair the two rounds ran on
    Column("current", Float),  # the current build's throughput in the pair
)
