"""Migration 2026_12_02_inter_node: the column, the NVL72 rows made 4-GPU trays of a 72-GPU
NVLink domain, and a downgrade that gives them back their 72-GPU node."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text

from servesize.db import migrate
from servesize.db.connection import create_db_engine


def _rows(url: str) -> dict[str, tuple[int, Any]]:
    db_engine = create_db_engine(url)
    try:
        with db_engine.connect() as connection:
            columns = {
                c["name"] for c in connection.dialect.get_columns(connection, "hardware_profile")
            }
            select = "id, gpus_per_node" + (", inter_node" if "inter_node" in columns else "")
            rows = connection.execute(text(f"SELECT {select} FROM hardware_profile")).all()
    finally:
        db_engine.dispose()
    out: dict[str, tuple[int, Any]] = {}
    for row in rows:
        link = row[2] if len(row) > 2 else "absent"
        if isinstance(link, str) and link != "absent":
            link = json.loads(link)
        out[row[0]] = (int(row[1]), link)
    return out


def test_nvl72_rows_become_trays_of_one_domain_and_back(fresh_url: str) -> None:
    migrate.upgrade(fresh_url, "2026_12_02_recalibration")
    db_engine = create_db_engine(fresh_url)
    try:
        with db_engine.begin() as connection:  # a database seeded before trays: 72 per node
            connection.execute(
                text(
                    "UPDATE hardware_profile SET gpus_per_node = 72 WHERE id IN ('gb200', 'gb300')"
                )
            )
    finally:
        db_engine.dispose()
    migrate.upgrade(fresh_url)
    rows = _rows(fresh_url)
    domain = {
        "kind": "nvlink_domain",
        "bandwidth_bytes_per_s": 900_000_000_000,  # NVLink 5: 1.8 TB/s bidirectional
        "latency_s": 1e-6,
        "domain_gpus": 72,
    }
    assert rows["gb200"] == (4, domain)
    assert rows["gb300"] == (4, domain)
    assert rows["h100-sxm"] == (8, None)  # the default for NVLink 4 applies
    migrate.downgrade(fresh_url, "2026_12_02_recalibration", destroy_data=True)
    back = _rows(fresh_url)
    assert back["gb200"] == (72, "absent")
    assert back["h100-sxm"] == (8, "absent")


def test_host_link_migration_stores_the_datasheet_links_and_drops_them(fresh_url: str) -> None:
    """2026_12_03_host_link: H100 SXM (PCIe Gen5) 5e10 B/s, A10G (Gen4) 2.5e10, GB200
    (NVLink-C2C) 4.5e11; the downgrade drops both columns."""
    migrate.upgrade(fresh_url)
    db_engine = create_db_engine(fresh_url)
    try:
        with db_engine.connect() as connection:
            rows: dict[str, int | None] = dict(
                connection.execute(
                    text("SELECT id, host_link_bytes_per_s FROM hardware_profile")
                ).all()
            )
    finally:
        db_engine.dispose()
    assert rows["h100-sxm"] == 50_000_000_000
    assert rows["a10g"] == 25_000_000_000
    assert rows["gb200"] == 450_000_000_000
    assert rows["h200-sxm"] is None  # its entry names no PCIe generation: the default applies
    migrate.downgrade(fresh_url, "2026_12_02_inter_node", destroy_data=True)
    db_engine = create_db_engine(fresh_url)
    try:
        with db_engine.connect() as connection:
            columns = {
                c["name"] for c in connection.dialect.get_columns(connection, "hardware_profile")
            }
    finally:
        db_engine.dispose()
    assert "host_link_bytes_per_s" not in columns
    assert "host_memory_bytes" not in columns
