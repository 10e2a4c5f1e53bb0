"""hardware profiles (seeded from the datasheet table) and their measurements

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.seed import datasheet_rows
from servesize.db.types import UTCDateTime

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("hardware_measurement", "hardware_profile")
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""


def upgrade() -> None:
    profile = op.create_table(
        "hardware_profile",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("vendor", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("memory_type", sa.String(length=32), nullable=True),
        sa.Column("memory_bandwidth_bytes_per_s", sa.BigInteger(), nullable=False),
        sa.Column("peak_tflop_per_s", sa.JSON(), nullable=False),
        sa.Column("interconnect_kind", sa.String(length=32), nullable=True),
        sa.Column("interconnect_bandwidth_bytes_per_s", sa.BigInteger(), nullable=True),
        sa.Column("gpus_per_node", sa.Integer(), nullable=False),
        sa.Column("tdp_w", sa.Float(), nullable=True),
        sa.Column("price_per_gpu_hour", sa.Float(), nullable=True),
        sa.Column("price_currency", sa.String(length=3), nullable=True),
        sa.Column("price_as_of", sa.Date(), nullable=True),
        sa.Column("price_source", sa.Text(), nullable=True),
        sa.Column("identity_tokens", sa.JSON(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("unverified_fields", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hardware_profile")),
    )
    op.create_table(
        "hardware_measurement",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("profile_id", sa.String(length=64), nullable=False),
        sa.Column("api_key_id", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("request_sha256", sa.String(length=64), nullable=False),
        sa.Column("received_at", UTCDateTime(), nullable=False),
        sa.Column("measured_at", UTCDateTime(), nullable=False),
        sa.Column("agent_version", sa.String(length=64), nullable=False),
        sa.Column("method_version", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("device", sa.String(length=64), nullable=False),
        sa.Column("gpu_name", sa.String(length=255), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=128), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["api_key_id"],
            ["api_key.id"],
            name=op.f("fk_hardware_measurement_api_key_id_api_key"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["profile_id"],
            ["hardware_profile.id"],
            name=op.f("fk_hardware_measurement_profile_id_hardware_profile"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hardware_measurement")),
        sa.UniqueConstraint(
            "api_key_id", "idempotency_key", name=op.f("uq_hardware_measurement_api_key_id")
        ),
    )
    op.create_index(
        op.f("ix_hardware_measurement_profile_id"),
        "hardware_measurement",
        ["profile_id"],
        unique=False,
    )
    op.bulk_insert(profile, datasheet_rows())


def downgrade() -> None:
    op.drop_index(op.f("ix_hardware_measurement_profile_id"), table_name="hardware_measurement")
    op.drop_table("hardware_measurement")
    op.drop_table("hardware_profile")
