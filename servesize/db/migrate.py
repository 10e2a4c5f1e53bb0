"""Run Alembic programmatically (no alembic.ini: configuration lives in pyproject.toml)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS_DIR = Path(str(files("servesize") / "migrations"))
"""The Alembic scripts, shipped inside the package (a built wheel carries them)."""


def alembic_config(database_url: str) -> Config:
    """An Alembic config pointing at our migrations and at ``database_url``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


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
