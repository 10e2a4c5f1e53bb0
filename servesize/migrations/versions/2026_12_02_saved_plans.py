"""saved sizing plans (``POST /v1/sizing?save=true``, ``GET /v1/plans/{id}``)

Revision ID: 2026_12_02_saved_plans
Revises: 2026_12_02_ownership
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.types import UTCDateTime

revision: str = "2026_12_02_saved_plans"
down_revision: str | None = "2026_12_02_ownership"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("saved_plan",)
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""


def upgrade() -> None:
    op.create_table(
        "saved_plan",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner_key_id", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("model_config_sha256", sa.String(length=64), nullable=False),
        sa.Column("service_version", sa.String(length=64), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("model_config_json", sa.JSON(), nullable=False),
        sa.Column("hardware", sa.JSON(), nullable=False),
        sa.Column("prices", sa.JSON(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_key_id"],
            ["api_key.id"],
            name=op.f("fk_saved_plan_owner_key_id_api_key"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_plan")),
    )
    op.create_index(op.f("ix_saved_plan_owner_key_id"), "saved_plan", ["owner_key_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_saved_plan_owner_key_id"), table_name="saved_plan")
    op.drop_table("saved_plan")
