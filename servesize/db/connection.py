"""SQLAlchemy connection and session factories; SQLite gets foreign keys, WAL and a busy timeout.

``db_engine`` is SQLAlchemy's connection pool (:class:`sqlalchemy.Engine`); the word ``engine``
alone means the serving engine (vLLM, SGLang, TensorRT-LLM) everywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def create_db_engine(url: str, **kwargs: Any) -> Engine:
    """Create SQLAlchemy's connection pool for ``url``.

    SQLite: ``check_same_thread=False`` (uvicorn serves sync routes from a thread pool),
    ``PRAGMA foreign_keys=ON`` on every connection (SQLite ignores foreign keys otherwise),
    WAL journaling (readers do not block the writer) and a 5 s busy timeout.

    ``hide_parameters=True`` on every backend: a failed statement's message (logged, or
    raised) never carries its bound values, which include key hashes and uploaded text.
    """
    kwargs.setdefault("hide_parameters", True)
    if not is_sqlite(url):
        return create_engine(url, pool_pre_ping=True, **kwargs)
    db_engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": 5.0}, **kwargs
    )

    @event.listens_for(db_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        if ":memory:" not in url:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    return db_engine


def make_sessionmaker(db_engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(db_engine, expire_on_commit=False)


def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One session per unit of work: commit on success, roll back on any exception."""
    with factory() as session, session.begin():
        yield session


transaction = contextmanager(session_scope)
"""``with transaction(factory) as session:`` — the same unit of work for scripts and the CLI."""
