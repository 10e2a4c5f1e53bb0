"""A GPU added to gpus.json reaches a database that was migrated before it was added."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import delete, select, update

from servesize.db import migrate
from servesize.db.connection import create_db_engine
from servesize.db.migrate import insert_missing_datasheets
from servesize.db.models import HardwareProfile
from servesize.db.seed import GPUS_JSON, datasheet_entries


def _profiles(url: str) -> dict[str, float | None]:
    db_engine = create_db_engine(url)
    try:
        with db_engine.connect() as connection:
            rows = connection.execute(
                select(HardwareProfile.id, HardwareProfile.price_per_gpu_hour)
            )
            return {row.id: row.price_per_gpu_hour for row in rows}
    finally:
        db_engine.dispose()


@pytest.fixture
def table_with_new_gpu(tmp_path: Path) -> Path:
    """The shipped gpus.json with one more (invented) GPU appended."""
    table = json.loads(GPUS_JSON.read_text())
    extra = dict(table["gpus"][0], name="Test GPU 9000")
    table["gpus"].append(extra)
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(table))
    return path


def test_upgrade_to_head_seeds_every_datasheet_gpu(database_url: str) -> None:
    ids = set(_profiles(database_url))
    assert len(ids) == len(datasheet_entries())


def test_a_new_datasheet_gpu_is_inserted_and_edited_rows_are_kept(
    database_url: str, table_with_new_gpu: Path
) -> None:
    db_engine = create_db_engine(database_url)
    try:
        with db_engine.begin() as connection:
            connection.execute(
                update(HardwareProfile)
                .where(HardwareProfile.id == "h100-sxm")
                .values(price_per_gpu_hour=2.5)
            )
        assert insert_missing_datasheets(db_engine, table_with_new_gpu) == ["test-gpu-9000"]
        assert insert_missing_datasheets(db_engine, table_with_new_gpu) == []
    finally:
        db_engine.dispose()
    profiles = _profiles(database_url)
    assert "test-gpu-9000" in profiles
    assert profiles["h100-sxm"] == 2.5
    assert len(profiles) == len(datasheet_entries()) + 1


def test_upgrade_restores_a_missing_datasheet_row(database_url: str) -> None:
    db_engine = create_db_engine(database_url)
    try:
        with db_engine.begin() as connection:
            connection.execute(delete(HardwareProfile).where(HardwareProfile.id == "l4"))
    finally:
        db_engine.dispose()
    assert "l4" not in _profiles(database_url)
    migrate.upgrade(database_url)
    assert "l4" in _profiles(database_url)
