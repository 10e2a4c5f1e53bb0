"""background jobs (``POST /v1/jobs``, ``GET /v1/jobs/{id}``)

Revision ID: 2026_12_02_jobs
Revises: 2026_12_02_plan_verifications
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.types import UTCDateTime

revision: str = "2026_12_02_jobs"
down_revision: str | None = "2026_12_02_plan_verifications"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("job",)
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""


def upgrade() -> None:
    op.create_table(
        "job",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner_key_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("request_sha256", sa.String(length=64), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("progress_done", sa.Integer(), nullable=True),
        sa.Column("progress_total", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_key_id"],
            ["api_key.id"],
            name=op.f("fk_job_owner_key_id_api_key"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job")),
        sa.UniqueConstraint("owner_key_id", "idempotency_key", name=op.f("uq_job_owner_key_id")),
    )
    op.create_index(op.f("ix_job_owner_key_id"), "job", ["owner_key_id"])
    op.create_index(op.f("ix_job_state"), "job", ["state"])


def downgrade() -> None:
    op.drop_index(op.f("ix_job_state"), table_name="job")
    op.drop_index(op.f("ix_job_owner_key_id"), table_name="job")
    op.drop_table("job")
