"""engine recalibrations per hardware profile (``POST /v1/hardware/{id}/recalibration``)

Revision ID: 2026_12_02_recalibration
Revises: 2026_12_02_jobs
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.types import UTCDateTime

revision: str = "2026_12_02_recalibration"
down_revision: str | None = "2026_12_02_jobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("engine_calibration",)
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""


def upgrade() -> None:
    op.create_table(
        "engine_calibration",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("profile_id", sa.String(length=64), nullable=False),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("owner_key_id", sa.Integer(), nullable=True),
        sa.Column("measurement_ids", sa.JSON(), nullable=False),
        sa.Column("fitted", sa.JSON(), nullable=False),
        sa.Column("constants", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["profile_id"],
            ["hardware_profile.id"],
            name=op.f("fk_engine_calibration_profile_id_hardware_profile"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["owner_key_id"],
            ["api_key.id"],
            name=op.f("fk_engine_calibration_owner_key_id_api_key"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_engine_calibration")),
    )
    op.create_index(op.f("ix_engine_calibration_profile_id"), "engine_calibration", ["profile_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_engine_calibration_profile_id"), table_name="engine_calibration")
    op.drop_table("engine_calibration")
