"""Alembic environment: the URL comes from ``config.attributes`` (tests, CLI) or settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from servesize.db import models as _models  # noqa: F401  (registers every table)
from servesize.db.base import Base
from servesize.db.connection import create_db_engine, is_sqlite

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    url = config.attributes.get("database_url")
    if isinstance(url, str):
        return url
    from servesize.settings import get_settings

    return get_settings().database_url


def _configure(connection: Connection, url: str) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=is_sqlite(url),  # SQLite has almost no ALTER TABLE
        compare_type=True,
        transaction_per_migration=True,
    )


def run_migrations_online() -> None:
    url = _database_url()
    connection = config.attributes.get("connection")
    if isinstance(connection, Connection):
        _configure(connection, url)
        with context.begin_transaction():
            context.run_migrations()
        return
    db_engine = create_db_engine(url)
    try:
        with db_engine.connect() as conn:
            _configure(conn, url)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        db_engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
