"""the GPU-to-host link and host memory of a hardware profile, for KV offload

Revision ID: 2026_12_03_host_link
Revises: 2026_12_03_shared_state
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.seed import datasheet_host_links

revision: str = "2026_12_03_host_link"
down_revision: str | None = "2026_12_03_shared_state"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("hardware_profile.host_link_bytes_per_s", "hardware_profile.host_memory_bytes")
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""

_PROFILE = sa.table(
    "hardware_profile",
    sa.column("id", sa.String()),
    sa.column("kind", sa.String()),
    sa.column("host_link_bytes_per_s", sa.BigInteger()),
)


def upgrade() -> None:
    with op.batch_alter_table("hardware_profile") as batch:
        batch.add_column(sa.Column("host_link_bytes_per_s", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("host_memory_bytes", sa.BigInteger(), nullable=True))
    # The datasheet rows' PCIe generation or NVLink-C2C (core.hardware.hostlink).
    for profile_id, bandwidth in datasheet_host_links().items():
        op.execute(
            _PROFILE.update()
            .where(_PROFILE.c.id == profile_id, _PROFILE.c.kind == "datasheet")
            .values(host_link_bytes_per_s=bandwidth)
        )


def downgrade() -> None:
    with op.batch_alter_table("hardware_profile") as batch:
        batch.drop_column("host_memory_bytes")
        batch.drop_column("host_link_bytes_per_s")
