"""owner_key_id on custom models, hardware profiles and measurements

The API key that created a row owns it: only that key or a key with scope ``admin`` may change
or delete it. Rows that existed before this revision get NULL, which means owned by no key:
only ``admin`` keys may change them. A deleted owner key leaves NULL (``ON DELETE SET NULL``).

Revision ID: 2026_12_02_ownership
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "2026_12_02_ownership"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OWNED_TABLES = ("custom_model", "hardware_profile", "hardware_measurement")
DESTROYS = tuple(f"{table}.owner_key_id" for table in OWNED_TABLES)
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""


def upgrade() -> None:
    for table in OWNED_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("owner_key_id", sa.Integer(), nullable=True))
            batch.create_foreign_key(
                op.f(f"fk_{table}_owner_key_id_api_key"),
                "api_key",
                ["owner_key_id"],
                ["id"],
                ondelete="SET NULL",
            )


def downgrade() -> None:
    for table in OWNED_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"fk_{table}_owner_key_id_api_key"), type_="foreignkey")
            batch.drop_column("owner_key_id")
