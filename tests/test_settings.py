"""Settings come from the environment; PostgreSQL URLs are normalised to psycopg 3."""

from __future__ import annotations

import pytest

from servesize.settings import Settings


def test_defaults_are_embedded_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    settings = Settings(_env_file=None)
    assert settings.database_url == "sqlite:///servesize.db"
    assert settings.max_body_bytes == 1024 * 1024
    assert settings.read_requires_key is False


def test_database_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://u:pw@db:5432/servesize")
    assert Settings().database_url == "postgresql+psycopg://u:pw@db:5432/servesize"


def test_secret_key_is_not_in_repr() -> None:
    assert "hunter2" not in repr(Settings(secret_key="hunter2"))


def test_body_limit_has_a_floor() -> None:
    with pytest.raises(ValueError, match="max_body_bytes"):
        Settings(max_body_bytes=10)
