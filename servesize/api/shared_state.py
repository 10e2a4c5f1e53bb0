"""State the API processes share (``STATE_STORE``): rate-limit counters and sizing answers,
in the service's database or in Redis, never in one process's memory.

* Counters: one fixed-window counter per policy, client and window, incremented atomically —
  Redis ``INCR`` and ``PEXPIRE`` in one Lua script (:data:`INCR_SCRIPT`), or one
  ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` on SQLite and PostgreSQL
  (:class:`~servesize.db.repository.RateLimitRepository`). Expired rows are purged at most once
  a window per process.
* Answers: the sizing response as JSON by its input hash, with a TTL (``SIZING_CACHE_TTL_S``):
  Redis ``SET ... PX`` or a ``sizing_answer`` row.

A store that does not answer raises :class:`StateStoreUnavailableError`, rendered as a 503
``state-store-unavailable`` problem with ``Retry-After``: a limit that cannot be counted is not
silently lifted.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import redis
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from servesize.api.exceptions import ApiError
from servesize.db.connection import transaction
from servesize.db.repository import RateLimitRepository, SizingAnswerRepository
from servesize.settings import Settings

__all__ = [
    "INCR_SCRIPT",
    "AnswerStore",
    "CounterStore",
    "DatabaseAnswers",
    "DatabaseCounters",
    "RedisAnswers",
    "RedisCounters",
    "SharedStores",
    "StateStoreUnavailableError",
    "shared_stores",
]

log = logging.getLogger("servesize.api")

RETRY_AFTER_S = 5
REDIS_TIMEOUT_S = 2.0
INCR_SCRIPT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
"""
"""One round trip, atomic: the first hit of a window creates the key and gives it the window's
remaining lifetime, so the key disappears with its window."""


class StateStoreUnavailableError(ApiError):
    status, slug = 503, "state-store-unavailable"

    def __init__(self, store: str) -> None:
        super().__init__(
            f"the shared state store ({store}) is unavailable; retry later",
            headers={"Retry-After": str(RETRY_AFTER_S)},
            store=store,
        )


class CounterStore(Protocol):
    """Atomic counters that vanish at a given wall-clock time."""

    name: str

    def incr(self, key: str, expires_at_s: float) -> int:
        """Add one (a new key starts at 1); the new value. ``expires_at_s``: Unix time."""
        ...

    def get(self, key: str) -> int: ...


class AnswerStore(Protocol):
    name: str

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, body: dict[str, Any], ttl_s: float) -> None: ...


def _utc(unix_s: float) -> datetime:
    return datetime.fromtimestamp(unix_s, UTC)


@contextmanager
def _database(factory: sessionmaker[Session]) -> Iterator[Session]:
    try:
        with transaction(factory) as session:
            yield session
    except SQLAlchemyError as exc:
        log.error("state store unavailable: database %s", type(exc).__name__)
        raise StateStoreUnavailableError("database") from None


@contextmanager
def _redis() -> Iterator[None]:
    try:
        yield
    except (redis.RedisError, OSError) as exc:
        log.error("state store unavailable: redis %s", type(exc).__name__)
        raise StateStoreUnavailableError("redis") from None


class DatabaseCounters:
    """Counters in the ``rate_limit`` table."""

    name = "database"

    def __init__(
        self, factory: sessionmaker[Session], *, clock: Callable[[], float] = time.time
    ) -> None:
        self._factory = factory
        self._clock = clock
        self._purged_until_s = 0.0
        self._lock = threading.Lock()

    def _purge_due(self, expires_at_s: float) -> bool:
        with self._lock:
            if self._clock() < self._purged_until_s:
                return False
            self._purged_until_s = expires_at_s
            return True

    def incr(self, key: str, expires_at_s: float) -> int:
        purge = self._purge_due(expires_at_s)
        with _database(self._factory) as session:
            repo = RateLimitRepository(session)
            if purge:
                repo.purge(_utc(self._clock()))
            return repo.hit(key, _utc(expires_at_s))

    def get(self, key: str) -> int:
        with _database(self._factory) as session:
            return RateLimitRepository(session).count(key)


class RedisCounters:
    """Counters as Redis keys ``<prefix>rl:<key>``."""

    name = "redis"

    def __init__(
        self, client: redis.Redis, prefix: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._prefix = prefix + "rl:"
        self._clock = clock
        self._incr = client.register_script(INCR_SCRIPT)

    def incr(self, key: str, expires_at_s: float) -> int:
        ttl_ms = max(1, int((expires_at_s - self._clock()) * 1000))
        with _redis():
            return int(self._incr(keys=[self._prefix + key], args=[ttl_ms]))

    def get(self, key: str) -> int:
        with _redis():
            value = self._client.get(self._prefix + key)
        return int(value) if value is not None else 0


class DatabaseAnswers:
    """Answers in the ``sizing_answer`` table."""

    name = "database"

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self._factory = factory

    def get(self, key: str) -> dict[str, Any] | None:
        with _database(self._factory) as session:
            return SizingAnswerRepository(session).get(key, datetime.now(UTC))

    def put(self, key: str, body: dict[str, Any], ttl_s: float) -> None:
        expires_at = datetime.now(UTC) + timedelta(seconds=ttl_s)
        with _database(self._factory) as session:
            SizingAnswerRepository(session).put(key, body, expires_at)


class RedisAnswers:
    """Answers as Redis keys ``<prefix>sizing:<key>`` holding JSON."""

    name = "redis"

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix + "sizing:"

    def get(self, key: str) -> dict[str, Any] | None:
        with _redis():
            value = self._client.get(self._prefix + key)
        if value is None:
            return None
        body = json.loads(value)
        return body if isinstance(body, dict) else None

    def put(self, key: str, body: dict[str, Any], ttl_s: float) -> None:
        text = json.dumps(body, separators=(",", ":"))
        with _redis():
            self._client.set(self._prefix + key, text, px=max(1, int(ttl_s * 1000)))


@dataclass(frozen=True)
class SharedStores:
    counters: CounterStore
    answers: AnswerStore
    close: Callable[[], None]


def redis_client(url: str) -> redis.Redis:
    """A client that fails within :data:`REDIS_TIMEOUT_S` when Redis does not answer."""
    return redis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
    )


def shared_stores(settings: Settings, factory: sessionmaker[Session]) -> SharedStores | None:
    """The stores ``settings`` select; ``None`` for ``memory`` (this process only)."""
    store = settings.shared_store()
    if store == "memory":
        return None
    if store == "redis":
        assert settings.redis_url is not None  # Settings refuses redis without a URL
        client = redis_client(settings.redis_url)
        prefix = settings.redis_key_prefix
        counters = RedisCounters(client, prefix)
        return SharedStores(counters, RedisAnswers(client, prefix), client.close)
    return SharedStores(DatabaseCounters(factory), DatabaseAnswers(factory), lambda: None)
