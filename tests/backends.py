"""Test databases: SQLite always, PostgreSQL when reachable (mandatory when ``CI=true``).

Each PostgreSQL run works in a schema of its own (``servesize_test_<random>``), selected through
``search_path`` in the connection URL, and drops only that schema at the end.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from urllib.parse import quote

import psycopg

POSTGRES_TEST_URL = os.environ.get(
    "POSTGRES_TEST_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def ci_requires_postgres() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def postgres_unreachable_reason() -> str | None:
    """``None`` when PostgreSQL answers, else why not."""
    try:
        with psycopg.connect(_libpq_url(POSTGRES_TEST_URL), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at {POSTGRES_TEST_URL} is unreachable: {exc}"
    return None


def _libpq_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@dataclass(frozen=True)
class PostgresSchema:
    """A throw-away schema; ``url`` makes it the only one on the search path."""

    name: str

    @property
    def url(self) -> str:
        sep = "&" if "?" in POSTGRES_TEST_URL else "?"
        return f"{POSTGRES_TEST_URL}{sep}options={quote(f'-csearch_path={self.name}')}"

    @classmethod
    def create(cls) -> PostgresSchema:
        schema = cls(name=f"servesize_test_{secrets.token_hex(6)}")
        with psycopg.connect(_libpq_url(POSTGRES_TEST_URL), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema.name}"')
        return schema

    def drop(self) -> None:
        with psycopg.connect(_libpq_url(POSTGRES_TEST_URL), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')
