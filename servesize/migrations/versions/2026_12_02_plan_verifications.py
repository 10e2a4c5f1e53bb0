"""stored plan verifications (``POST /v1/plans/{id}/verify``, ``GET /v1/accuracy``)

Revision ID: 2026_12_02_plan_verifications
Revises: 2026_12_02_saved_plans
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.types import UTCDateTime

revision: str = "2026_12_02_plan_verifications"
down_revision: str | None = "2026_12_02_saved_plans"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("plan_verification",)
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""


def upgrade() -> None:
    op.create_table(
        "plan_verification",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("verifier_key_id", sa.Integer(), nullable=True),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("hardware", sa.String(length=64), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["saved_plan.id"],
            name=op.f("fk_plan_verification_plan_id_saved_plan"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["verifier_key_id"],
            ["api_key.id"],
            name=op.f("fk_plan_verification_verifier_key_id_api_key"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plan_verification")),
    )
    op.create_index(op.f("ix_plan_verification_plan_id"), "plan_verification", ["plan_id"])
    op.create_index(
        op.f("ix_plan_verification_verifier_key_id"), "plan_verification", ["verifier_key_id"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_plan_verification_verifier_key_id"), table_name="plan_verification")
    op.drop_index(op.f("ix_plan_verification_plan_id"), table_name="plan_verification")
    op.drop_table("plan_verification")
