"""Redis for the shared-state tests: the machine's 127.0.0.1:6379 (``REDIS_TEST_URL``);
with ``CI=true`` a test that needs it fails when it is unreachable, else it is skipped."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
import redis

from tests.backends import ci_requires_postgres

REDIS_TEST_URL = os.environ.get("REDIS_TEST_URL", "redis://127.0.0.1:6379/0")


def redis_unreachable_reason() -> str | None:
    client = redis.Redis.from_url(REDIS_TEST_URL, socket_timeout=3, socket_connect_timeout=3)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"Redis at {REDIS_TEST_URL} is unreachable: {exc}"
    finally:
        client.close()
    return None


def require_redis() -> None:
    reason = redis_unreachable_reason()
    if reason is None:
        return
    if ci_requires_postgres():  # CI=true: every backend the suite needs is mandatory
        pytest.fail(f"CI=true requires Redis: {reason}", pytrace=False)
    pytest.skip(reason)


def redis_prefix() -> Iterator[str]:
    """A key prefix of its own for one test; its keys are deleted at the end."""
    require_redis()
    prefix = f"servesize-test-{secrets.token_hex(6)}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_TEST_URL)
    try:
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
