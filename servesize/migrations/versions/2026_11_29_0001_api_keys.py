"""api keys and the instance secret that keys their hashes

The instance secret outlives a downgrade: ``downgrade`` keeps its table and ``upgrade`` keeps a
secret it finds, so keys hashed under it (restored from a backup, say) still verify after a
downgrade and upgrade.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from servesize.db.types import UTCDateTime

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("api_key",)
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""


def _secret_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("secret_hex", sa.String(length=128), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    ]


def upgrade() -> None:
    connection = op.get_bind()
    if not sa.inspect(connection).has_table("instance_secret"):
        op.create_table(
            "instance_secret",
            *_secret_columns(),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_secret")),
        )
    secret_table = sa.table(
        "instance_secret",
        sa.column("id", sa.Integer()),
        sa.column("secret_hex", sa.String()),
        sa.column("created_at", UTCDateTime()),
    )
    if connection.execute(sa.select(sa.func.count()).select_from(secret_table)).scalar() == 0:
        op.bulk_insert(
            secret_table,
            [{"id": 1, "secret_hex": secrets.token_hex(32), "created_at": datetime.now(UTC)}],
        )
    op.create_table(
        "api_key",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("key_hash", sa.String(length=128), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["api_key.id"],
            name=op.f("fk_api_key_created_by_api_key"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_key")),
        sa.UniqueConstraint("key_id", name=op.f("uq_api_key_key_id")),
        sa.UniqueConstraint("name", name=op.f("uq_api_key_name")),
    )


def downgrade() -> None:
    op.drop_table("api_key")
    # instance_secret stays (see the module docstring); upgrade reuses it.
