"""An upgrade gate's pairs of rounds: the engine pair each ran on and the current build's throughput, so that the gates on record can estimate the offset between fresh engines.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gate_pairs",
        sa.Column("result_pk", sa.Integer, nullable=False),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("cluster", sa.Integer, nullable=False),
        sa.Column("current", sa.Float),
        sa.ForeignKeyConstraint(["result_pk"], ["results.id"], name="fk_gate_pairs_result_pk", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("result_pk", "round", name="pk_gate_pairs"),
    )


def downgrade() -> None:
    op.drop_table("gate_pairs")
