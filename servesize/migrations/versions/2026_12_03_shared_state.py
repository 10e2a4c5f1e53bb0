"""state shared by several API processes: rate-limit counters, sizing answers, job leases

``rate_limit`` and ``sizing_answer`` back ``STATE_STORE=database``; ``job.owner_process`` and
``job.lease_expires_at`` let a process tell a job another live process runs from one whose
process stopped. Rows of earlier jobs keep their data and get NULL in both columns.

Revision ID: 2026_12_03_shared_state
Revises: 2026_12_02_inter_node
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.types import UTCDateTime

revision: str = "2026_12_03_shared_state"
down_revision: str | None = "2026_12_02_inter_node"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS: tuple[str, ...] = ()
"""``downgrade`` drops nothing that is not recomputed: counters of the current minute, cached
answers (recomputed on the next request) and the process names of jobs; every job row and its
result is kept."""


def upgrade() -> None:
    op.create_table(
        "rate_limit",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rate_limit")),
    )
    op.create_index(op.f("ix_rate_limit_expires_at"), "rate_limit", ["expires_at"])
    op.create_table(
        "sizing_answer",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_sizing_answer")),
    )
    op.create_index(op.f("ix_sizing_answer_expires_at"), "sizing_answer", ["expires_at"])
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("owner_process", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", UTCDateTime(), nullable=True))
        batch.create_index(batch.f("ix_job_owner_process"), ["owner_process"])


def downgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.drop_index(batch.f("ix_job_owner_process"))
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner_process")
    op.drop_index(op.f("ix_sizing_answer_expires_at"), table_name="sizing_answer")
    op.drop_table("sizing_answer")
    op.drop_index(op.f("ix_rate_limit_expires_at"), table_name="rate_limit")
    op.drop_table("rate_limit")
