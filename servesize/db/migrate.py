"""Run Alembic programmatically (no alembic.ini: configuration lives in pyproject.toml)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, insert, select

from servesize.db.connection import create_db_engine
from servesize.db.models import HardwareProfile
from servesize.db.seed import GPUS_JSON, datasheet_rows

MIGRATIONS_DIR = Path(str(files("servesize") / "migrations"))
"""The Alembic scripts, shipped inside the package (a built wheel carries them)."""


def alembic_config(database_url: str) -> Config:
    """An Alembic config pointing at our migrations and at ``database_url``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply the migrations up to ``revision``; at head, also add any datasheet GPU the database
    lacks (:func:`insert_missing_datasheets`)."""
    command.upgrade(alembic_config(database_url), revision)
    if revision == "head":
        db_engine = create_db_engine(database_url)
        try:
            insert_missing_datasheets(db_engine)
        finally:
            db_engine.dispose()


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def head_revisions(database_url: str) -> set[str]:
    return set(ScriptDirectory.from_config(alembic_config(database_url)).get_heads())


def current_revisions(db_engine: Engine) -> set[str]:
    with db_engine.connect() as connection:
        return set(MigrationContext.configure(connection).get_current_heads())


def is_at_head(db_engine: Engine) -> bool:
    """True when the database's revision is the newest migration."""
    return current_revisions(db_engine) == head_revisions(db_engine.url.render_as_string(False))


def insert_missing_datasheets(db_engine: Engine, path: Path = GPUS_JSON) -> list[str]:
    """Insert the datasheet profiles of ``gpus.json`` that the database lacks; return their ids.

    Migration 0003 seeds the table once. A GPU added to ``gpus.json`` later reaches an existing
    database here, run after every upgrade to head, so adding a GPU is an edit of that one file.
    Rows already present are left as they are (prices and edits made through the API stay).
    """
    with db_engine.begin() as connection:
        present = set(connection.execute(select(HardwareProfile.id)).scalars())
        missing = [row for row in datasheet_rows(path) if row["id"] not in present]
        if missing:
            connection.execute(insert(HardwareProfile), missing)
    return [row["id"] for row in missing]
