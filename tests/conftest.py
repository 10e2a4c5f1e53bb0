"""Fixtures: every API test runs once on SQLite and once on PostgreSQL.

SQLite tests get a per-test copy of a migrated template file; PostgreSQL tests share one
migrated schema per run and have the application tables truncated after each test.

Tests marked ``slow`` (the accuracy replays) run only with ``CI=true``, ``SLOW=1`` or
``--slow``, or when ``-m`` names them; a slow test never takes a database, so it runs once.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import settings as hypothesis_settings
from sqlalchemy import insert, text

from servesize.api.app import create_app
from servesize.db import migrate
from servesize.db.base import Base
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.models import HardwareProfile
from servesize.db.repository import ApiKeyRepository
from servesize.db.seed import datasheet_rows
from servesize.security import Scope
from servesize.settings import Settings
from tests.backends import PostgresSchema, ci_requires_postgres, postgres_unreachable_reason

# Property tests: no per-example deadline (a loaded CI machine is slow, not wrong) and a fixed
# example sequence, so a run is reproducible.
hypothesis_settings.register_profile("servesize", deadline=None, derandomize=True)
hypothesis_settings.load_profile("servesize")

BACKENDS = ("sqlite", "postgresql")
# Rows the migrations write: the instance secret is kept, datasheet profiles are re-seeded.
KEPT_TABLES = {"instance_secret"}


@pytest.fixture(scope="session")
def postgres_schema() -> Iterator[PostgresSchema]:
    """A migrated schema for the whole run, dropped at the end."""
    reason = postgres_unreachable_reason()
    if reason is not None:
        if ci_requires_postgres():
            pytest.fail(f"CI=true requires PostgreSQL: {reason}", pytrace=False)
        pytest.skip(reason)
    schema = PostgresSchema.create()
    try:
        migrate.upgrade(schema.url)
        yield schema
    finally:
        schema.drop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the newest migration, built once; running the migrations tests them."""
    path = tmp_path_factory.mktemp("template") / "servesize.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database of each backend."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        db = tmp_path / "servesize.db"
        shutil.copyfile(template, db)
        yield f"sqlite:///{db}"
        return
    schema: PostgresSchema = request.getfixturevalue("postgres_schema")
    yield schema.url
    db_engine = create_db_engine(schema.url)
    try:
        with db_engine.begin() as conn:
            tables = [t.name for t in Base.metadata.sorted_tables if t.name not in KEPT_TABLES]
            conn.execute(text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))
            conn.execute(insert(HardwareProfile), datasheet_rows())
    finally:
        db_engine.dispose()


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, rate_limit_per_minute=0, sync_pool=False)


@pytest.fixture
def make_client(database_url: str) -> Iterator[Callable[..., TestClient]]:
    """Build clients over the test database with settings overrides."""
    clients: list[TestClient] = []

    def build(**overrides: object) -> TestClient:
        fields: dict[str, object] = {
            "database_url": database_url,
            "rate_limit_per_minute": 0,
            "sync_pool": False,  # a pool of processes per test app is seconds; opted into
        }
        fields.update(overrides)
        client = TestClient(create_app(Settings.model_validate(fields)))
        client.__enter__()
        clients.append(client)
        return client

    yield build
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


@pytest.fixture
def create_key(database_url: str) -> Callable[..., str]:
    """Create an API key directly in the database; returns the full key string."""

    def create(*scopes: Scope, name: str | None = None) -> str:
        db_engine = create_db_engine(database_url)
        try:
            with transaction(make_sessionmaker(db_engine)) as session:
                label = name or "test-" + "-".join(s.value for s in scopes)
                _, new = ApiKeyRepository(session).create(name=label, scopes=scopes)
                return new.token
        finally:
            db_engine.dispose()

    return create


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow", action="store_true", help="also run tests marked slow (as CI=true or SLOW=1 do)"
    )


def runs_slow_tests(config: pytest.Config) -> bool:
    """``--slow``, ``SLOW=1``, ``CI=true``, or a ``-m`` expression that names ``slow``."""
    return (
        bool(config.getoption("--slow"))
        or os.environ.get("SLOW", "").lower() in {"1", "true", "yes"}
        or ci_requires_postgres()
        or "slow" in (config.getoption("markexpr", "") or "")
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect slow tests unless asked for; refuse a slow test that takes a database (it
    would run once per backend)."""
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    on_databases = [i.nodeid for i in slow if "database_url" in getattr(i, "fixturenames", ())]
    if on_databases:
        raise pytest.UsageError(f"slow tests must not run on every database: {on_databases}")
    if slow and not runs_slow_tests(config):
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how many tests ran on each database."""
    counts: Counter[tuple[str, str]] = Counter()
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            for backend in BACKENDS:
                if f"[{backend}" in nodeid or f"-{backend}]" in nodeid or f"-{backend}-" in nodeid:
                    counts[(backend, outcome)] += 1
    if counts:
        terminalreporter.section("tests by database")
        for backend in BACKENDS:
            parts = [
                f"{counts[(backend, o)]} {o}" for o in ("passed", "failed", "error", "skipped")
            ]
            terminalreporter.write_line(f"{backend}: " + ", ".join(parts))
