"""Migrations go up, down and up again on each backend, and agree with the ORM models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from servesize.db import migrate
from servesize.db.base import Base
from servesize.db.connection import create_db_engine


def _tables(url: str) -> set[str]:
    db_engine = create_db_engine(url)
    try:
        return set(inspect(db_engine).get_table_names())
    finally:
        db_engine.dispose()


def test_upgrade_downgrade_upgrade(fresh_url: str) -> None:
    migrate.upgrade(fresh_url)
    assert {t.name for t in Base.metadata.sorted_tables} <= _tables(fresh_url)
    migrate.downgrade(fresh_url, "base", destroy_data=True)
    assert _tables(fresh_url) <= {"alembic_version", "instance_secret"}
    migrate.upgrade(fresh_url)
    db_engine = create_db_engine(fresh_url)
    try:
        assert migrate.is_at_head(db_engine)
    finally:
        db_engine.dispose()


def test_models_and_migrations_agree(fresh_url: str) -> None:
    """Autogenerate finds no difference between the ORM tables and the migrated schema."""
    migrate.upgrade(fresh_url)
    db_engine = create_db_engine(fresh_url)
    try:
        with db_engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        db_engine.dispose()
