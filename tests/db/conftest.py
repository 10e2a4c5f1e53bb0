"""Fixtures shared by the migration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import PostgresSchema, ci_requires_postgres, postgres_unreachable_reason


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (no migrations applied) of each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    reason = postgres_unreachable_reason()
    if reason is not None:
        if ci_requires_postgres():
            pytest.fail(f"CI=true requires PostgreSQL: {reason}", pytrace=False)
        pytest.skip(reason)
    schema = PostgresSchema.create()
    try:
        yield schema.url
    finally:
        schema.drop()
