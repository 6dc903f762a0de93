"""The history store: runs, results, metric values, round samples, verdicts.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("profile", sa.String(200), nullable=False),
        sa.Column("hardware_key", sa.String(200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("complete", sa.Boolean, nullable=False),
        sa.Column("record_schema", sa.Integer, nullable=False),
        sa.Column("vllm", sa.String(100)),
        sa.Column("git_commit", sa.String(100)),
        sa.Column("suite_version", sa.String(50)),
        sa.Column("hostname", sa.String(200)),
        sa.Column("provenance", sa.JSON),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("run_id", name="uq_runs_run_id"),
    )
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_pk", sa.Integer, nullable=False),
        sa.Column("scenario_id", sa.String(300), nullable=False),
        sa.Column("scenario_hash", sa.String(100), nullable=False),
        sa.Column("hardware_key", sa.String(200), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("vllm", sa.String(100)),
        sa.Column("model", sa.String(200)),
        sa.Column("method", sa.String(100)),
        sa.Column("batch_size", sa.Integer),
        sa.Column("dataset", sa.String(100)),
        sa.Column("status", sa.String(30), nullable=False),
        sa.Column("valid", sa.Boolean, nullable=False),
        sa.Column("verdict", sa.String(30)),
        sa.PrimaryKeyConstraint("id", name="pk_results"),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_results_run_pk", ondelete="CASCADE"),
        sa.UniqueConstraint("run_pk", "scenario_id", name="uq_results_run_pk_scenario_id"),
    )
    op.create_index("ix_results_trend", "results", ["scenario_id", "hardware_key", "finished_at"])
    op.create_index("ix_results_finished_at", "results", ["finished_at"])
    op.create_table(
        "metric_values",
        sa.Column("result_pk", sa.Integer, nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("value", sa.Float),
        sa.PrimaryKeyConstraint("result_pk", "metric", name="pk_metric_values"),
        sa.ForeignKeyConstraint(["result_pk"], ["results.id"], name="fk_metric_values_result_pk",
                                ondelete="CASCADE"),
    )
    op.create_table(
        "round_values",
        sa.Column("result_pk", sa.Integer, nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("value", sa.Float),
        sa.PrimaryKeyConstraint("result_pk", "metric", "round", name="pk_round_values"),
        sa.ForeignKeyConstraint(["result_pk"], ["results.id"], name="fk_round_values_result_pk",
                                ondelete="CASCADE"),
    )
    op.create_table(
        "verdicts",
        sa.Column("result_pk", sa.Integer, nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("status", sa.String(30), nullable=False),
        sa.Column("change", sa.Float),
        sa.Column("ci_low", sa.Float),
        sa.Column("ci_high", sa.Float),
        sa.Column("p_value", sa.Float),
        sa.Column("tolerance", sa.Float),
        sa.Column("judged_by", sa.String(30)),
        sa.Column("note", sa.Text),
        sa.PrimaryKeyConstraint("result_pk", "metric", name="pk_verdicts"),
        sa.ForeignKeyConstraint(["result_pk"], ["results.id"], name="fk_verdicts_result_pk", ondelete="CASCADE"),
    )


def downgrade() -> None:
    for table in ("verdicts", "round_values", "metric_values", "results", "runs"):
        op.drop_table(table)
