"""Run Alembic programmatically (no alembic.ini: configuration lives in pyproject.toml)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, column, func, insert, inspect, select, table

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


@dataclass(frozen=True, slots=True)
class Loss:
    """What a downgrade would drop: a table (its rows) or a column (its non-null values)."""

    revision: str
    target: str
    """``table`` or ``table.column``; ``""`` when the revision does not say what it drops."""
    rows: int

    def describe(self) -> str:
        if not self.target:
            return f"revision {self.revision}: undeclared (it may drop anything)"
        kind = "column" if "." in self.target else "table"
        unit = "non-null values" if kind == "column" else "rows"
        return f"{kind} {self.target} ({self.rows} {unit}, revision {self.revision})"


class DataLossRefusedError(RuntimeError):
    """A downgrade would drop stored data and ``destroy_data`` was not given."""

    def __init__(self, revision: str, losses: list[Loss]) -> None:
        self.losses = losses
        listed = "; ".join(loss.describe() for loss in losses)
        super().__init__(f"downgrading to {revision} would drop {listed}")


def _count(connection: Connection, target: str) -> int:
    table_name, _, column_name = target.partition(".")
    inspector = inspect(connection)
    if not inspector.has_table(table_name):
        return 0
    if column_name and column_name not in {c["name"] for c in inspector.get_columns(table_name)}:
        return 0
    query = select(func.count()).select_from(table(table_name, column(column_name or "x")))
    if column_name:
        query = query.where(column(column_name).is_not(None))
    return int(connection.execute(query).scalar_one())


def downgrade_losses(database_url: str, revision: str) -> list[Loss]:
    """Everything undoing the revisions above ``revision`` would drop, with row counts, read
    from each revision's ``DESTROYS``; a revision without one is listed as undeclared."""
    script = ScriptDirectory.from_config(alembic_config(database_url))
    db_engine = create_db_engine(database_url)
    try:
        with db_engine.connect() as connection:
            current = tuple(MigrationContext.configure(connection).get_current_heads())
            if not current:
                return []
            losses: list[Loss] = []
            for rev in script.iterate_revisions(current, revision):
                declared = getattr(rev.module, "DESTROYS", None)
                if declared is None:
                    losses.append(Loss(rev.revision, "", 0))
                    continue
                losses.extend(Loss(rev.revision, t, _count(connection, t)) for t in declared)
            return losses
    finally:
        db_engine.dispose()


def downgrade(database_url: str, revision: str, *, destroy_data: bool = False) -> list[Loss]:
    """Downgrade to ``revision``; refuse (:class:`DataLossRefusedError`, nothing changed) when
    that drops stored rows or values and ``destroy_data`` is false. Returns what was dropped.
    The instance secret is never dropped (migration 0001), so API keys stay verifiable."""
    losses = downgrade_losses(database_url, revision)
    at_risk = [loss for loss in losses if loss.rows or not loss.target]
    if at_risk and not destroy_data:
        raise DataLossRefusedError(revision, at_risk)
    command.downgrade(alembic_config(database_url), revision)
    return losses
