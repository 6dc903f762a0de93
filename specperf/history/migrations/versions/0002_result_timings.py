"""Each result's timings, output tokens, sequences and prompt length, so a run's cost can be predicted from history (specperf plan).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COLUMNS = (("engine_start_s", sa.Float), ("warmup_s", sa.Float), ("measure_s", sa.Float),
           ("rounds", sa.Integer), ("output_tokens", sa.Integer), ("sequences", sa.Integer),
           ("prompt_tokens", sa.Float))


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
