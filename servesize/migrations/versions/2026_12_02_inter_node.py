"""the link between nodes of a hardware profile (``inter_node``); NVL72 trays of 4 GPUs

Revision ID: 2026_12_02_inter_node
Revises: 2026_12_02_recalibration
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from servesize.db.seed import datasheet_inter_nodes

revision: str = "2026_12_02_inter_node"
down_revision: str | None = "2026_12_02_recalibration"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DESTROYS = ("hardware_profile.inter_node",)
"""What ``downgrade`` drops (``servesize db downgrade`` counts it before asking)."""

_PROFILE = sa.table(
    "hardware_profile",
    sa.column("id", sa.String()),
    sa.column("kind", sa.String()),
    sa.column("gpus_per_node", sa.Integer()),
    sa.column("inter_node", sa.JSON()),
)


def upgrade() -> None:
    with op.batch_alter_table("hardware_profile") as batch:
        batch.add_column(sa.Column("inter_node", sa.JSON(), nullable=True))
    # The NVL72 datasheet rows: compute trays of 4 GPUs in a 72-GPU NVLink domain (before
    # this revision their node was the whole domain).
    for profile_id, link in datasheet_inter_nodes().items():
        op.execute(
            _PROFILE.update()
            .where(_PROFILE.c.id == profile_id, _PROFILE.c.kind == "datasheet")
            .values(inter_node=link, gpus_per_node=4)
        )


def downgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(_PROFILE.c.id, _PROFILE.c.inter_node).where(_PROFILE.c.inter_node.is_not(None))
    ).all()
    for profile_id, link in rows:
        if link and link.get("kind") == "nvlink_domain" and link.get("domain_gpus"):
            connection.execute(
                _PROFILE.update()
                .where(_PROFILE.c.id == profile_id)
                .values(gpus_per_node=int(link["domain_gpus"]))
            )
    with op.batch_alter_table("hardware_profile") as batch:
        batch.drop_column("inter_node")
