"""uploaded request traces (``POST /v1/traces``, ``traffic.trace_id``)

Revision ID: 2026_12_03_traces
Revises: 2026_12_03_host_link
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.types import UTCDateTime

revision: str = "2026_12_03_traces"
down_revision: str | None = "2026_12_03_host_link"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("stored_trace",)
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""


def upgrade() -> None:
    op.create_table(
        "stored_trace",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner_key_id", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_key_id"],
            ["api_key.id"],
            name=op.f("fk_stored_trace_owner_key_id_api_key"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stored_trace")),
    )
    op.create_index(op.f("ix_stored_trace_owner_key_id"), "stored_trace", ["owner_key_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_stored_trace_owner_key_id"), table_name="stored_trace")
    op.drop_table("stored_trace")
