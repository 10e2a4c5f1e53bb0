"""State shared by API processes, in-process: two apps over one database (and one Redis) stand
for two processes. Rate limits count against one budget, a sizing answer computed by one is a
hit in the other, counters are atomic, an unreachable store is a 503, and job ownership:
leases, jobs of stopped owners failed at start-up, cancel across processes, and an
Idempotency-Key that two processes race on."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from servesize.api.jobs import INTERRUPTED_REASON
from servesize.api.shared_state import DatabaseCounters, RedisCounters, redis_client
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.models import ApiKey, Job
from servesize.db.repository import JobRepository
from servesize.db.types import utc_now
from servesize.security import Scope
from tests.api.test_hardware import bearer
from tests.api.test_jobs import LONG_SIMULATE, POLL_LIMIT_S, SIMULATE, SIZING, submit, wait_for
from tests.backends_redis import REDIS_TEST_URL, redis_prefix

WINDOW_START_S = 999_960.0
"""A Unix time on a 60 s boundary (16 666 × 60): the fixed window runs to 1 000 020."""


@pytest.fixture(params=["database", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Settings overrides selecting each shared store."""
    if request.param == "database":
        yield {"state_store": "database"}
        return
    prefixes = redis_prefix()
    prefix = next(prefixes)
    yield {"state_store": "redis", "redis_url": REDIS_TEST_URL, "redis_key_prefix": prefix}
    next(prefixes, None)


def _freeze(client: TestClient, now: list[float]) -> None:
    """Make the app's limiters and their store read ``now[0]`` as the time."""
    limits = client.app.state.rate_limits  # type: ignore[attr-defined]
    for limiter in (limits.requests, limits.auth_failures):
        if limiter is not None:
            limiter._clock = lambda: now[0]
            limiter.store._clock = lambda: now[0]


def test_two_processes_spend_one_budget(
    make_client: Callable[..., TestClient], store: dict[str, Any]
) -> None:
    first = make_client(rate_limit_per_minute=3, **store)
    second = make_client(rate_limit_per_minute=3, **store)
    now = [WINDOW_START_S + 10.0]
    _freeze(first, now)
    _freeze(second, now)
    responses = [c.get("/v1/models") for c in (first, second, first, second)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    # remaining 3 - n; the window ends at 1 000 020, 50 s after 999 970
    assert [r.headers["ratelimit"] for r in responses] == [
        f'"requests";r={left};t=50' for left in (2, 1, 0, 0)
    ]
    assert responses[3].headers["retry-after"] == "50"
    now[0] = WINDOW_START_S + 60.0  # the next window: a fresh budget in both
    assert first.get("/v1/models").headers["ratelimit"] == '"requests";r=2;t=60'


def test_a_sizing_computed_by_one_process_is_a_hit_in_the_other(
    make_client: Callable[..., TestClient], store: dict[str, Any]
) -> None:
    first = make_client(**store)
    second = make_client(**store)
    computed = first.post("/v1/sizing", json=SIZING)
    assert computed.status_code == 200, computed.text
    assert computed.json()["cached"] is False
    hit = second.post("/v1/sizing", json=SIZING)
    assert hit.status_code == 200, hit.text
    assert hit.json()["cached"] is True
    assert hit.json() | {"cached": False} == computed.json()
    metrics = second.get("/metrics").text
    assert 'servesize_sizing_cache_requests_total{result="hit"} 1.0' in metrics


def _counters(store: dict[str, Any], database_url: str) -> tuple[Any, Callable[[], None]]:
    if store["state_store"] == "redis":
        client = redis_client(REDIS_TEST_URL)
        return RedisCounters(client, store["redis_key_prefix"]), client.close
    db_engine = create_db_engine(database_url)
    return DatabaseCounters(make_sessionmaker(db_engine)), db_engine.dispose


def test_concurrent_hits_are_counted_once_each(
    store: dict[str, Any], database_url: str, make_client: Callable[..., TestClient]
) -> None:
    make_client(**store)  # the database is migrated and the store reachable
    counters, close = _counters(store, database_url)
    seen: list[int] = []
    lock = threading.Lock()

    def hit_many() -> None:
        for _ in range(25):
            value = counters.incr("concurrent", expires_at_s=4_102_444_800.0)  # 2100-01-01
            with lock:
                seen.append(value)

    threads = [threading.Thread(target=hit_many) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # 4 × 25 increments, each answered with a value no other increment got
        assert sorted(seen) == list(range(1, 101))
        assert counters.get("concurrent") == 100
    finally:
        close()


def test_an_unreachable_store_is_a_503_problem(make_client: Callable[..., TestClient]) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens on this port
    client = make_client(
        state_store="redis", redis_url=f"redis://127.0.0.1:{port}/0", rate_limit_per_minute=5
    )
    refused = client.get("/v1/models")
    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["retry-after"] == "5"
    assert refused.json()["type"] == "urn:servesize:problem:state-store-unavailable"
    assert refused.json()["store"] == "redis"
    assert client.get("/livez").status_code == 200  # probes are not rate limited
    no_limits = make_client(
        state_store="redis", redis_url=f"redis://127.0.0.1:{port}/0", rate_limit_per_minute=0
    )
    sizing = no_limits.post("/v1/sizing", json=SIZING)  # the answer cache is the store too
    assert sizing.status_code == 503
    assert sizing.json()["type"] == "urn:servesize:problem:state-store-unavailable"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _add_running(database_url: str, job_id: str, owner: str, lease_s: float) -> None:
    db_engine = create_db_engine(database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            key_id = session.scalars(select(ApiKey.id)).one()
            JobRepository(session).add(
                Job(
                    id=job_id,
                    owner_key_id=key_id,
                    kind="simulate",
                    state="running",
                    request=SIMULATE,
                    request_sha256="0" * 64,
                    created_at=utc_now(),
                    started_at=utc_now(),
                    owner_process=owner,
                    lease_expires_at=utc_now() + timedelta(seconds=lease_s),
                )
            )
    finally:
        db_engine.dispose()


def test_start_up_fails_jobs_of_stopped_owners_and_leaves_live_ones(
    make_client: Callable[..., TestClient], create_key: Callable[..., str], database_url: str
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    here = socket.gethostname()
    _add_running(database_url, "job_00000000000000b1", "elsewhere:41:aaaa", lease_s=-60)
    _add_running(database_url, "job_00000000000000b2", "elsewhere:42:bbbb", lease_s=600)
    _add_running(database_url, "job_00000000000000b3", f"{here}:{_dead_pid()}:cccc", 600)
    client = make_client(job_workers=1)
    for job_id in ("job_00000000000000b1", "job_00000000000000b3"):
        job = client.get(f"/v1/jobs/{job_id}", headers=bearer(key)).json()
        assert job["state"] == "failed"
        assert job["error"]["reason"] == INTERRUPTED_REASON
        assert job["error"]["type"] == "urn:servesize:problem:job-interrupted"
    live = client.get("/v1/jobs/job_00000000000000b2", headers=bearer(key)).json()
    assert live["state"] == "running"  # its lease runs and its host is another


def _job(database_url: str, job_id: str) -> Job:
    db_engine = create_db_engine(database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            row = JobRepository(session).get(job_id)
            assert row is not None
            return row
    finally:
        db_engine.dispose()


def test_the_owner_renews_its_lease_and_stops_a_job_cancelled_by_another_process(
    make_client: Callable[..., TestClient], create_key: Callable[..., str], database_url: str
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    owner = make_client(job_workers=1, job_lease_s=600)  # beats by hand below
    other = make_client(job_workers=1, job_lease_s=600)
    job_id = submit(owner, key, "simulate", LONG_SIMULATE).json()["id"]
    wait_for(owner, key, job_id, {"running"})
    executor = owner.app.state.jobs  # type: ignore[attr-defined]
    row = _job(database_url, job_id)
    assert row.owner_process == executor.process_id
    assert row.lease_expires_at is not None
    before = row.lease_expires_at
    executor.heartbeat()
    renewed = _job(database_url, job_id).lease_expires_at
    assert renewed is not None
    assert renewed >= before

    future = executor.future(job_id)
    assert future is not None
    assert other.delete(f"/v1/jobs/{job_id}", headers=bearer(key)).json()["state"] == "cancelled"
    executor.heartbeat()  # sees the cancel stored by the other process
    assert future.result(timeout=POLL_LIMIT_S)["state"] == "cancelled"  # stopped, not run out


def test_an_idempotency_key_two_processes_race_on_makes_one_job(
    make_client: Callable[..., TestClient],
    create_key: Callable[..., str],
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from servesize.api.routes import jobs as routes

    key = create_key(Scope.JOBS_WRITE)
    first = make_client(job_workers=1)
    second = make_client(job_workers=1)
    won = submit(first, key, "simulate", SIMULATE, **{"Idempotency-Key": "k-1"})
    assert won.status_code == 202
    real = routes._replayed
    calls: list[int] = []

    def checked_before_the_other_committed(*args: Any) -> Any:
        calls.append(1)
        return None if len(calls) == 1 else real(*args)

    monkeypatch.setattr(routes, "_replayed", checked_before_the_other_committed)
    lost = submit(second, key, "simulate", SIMULATE, **{"Idempotency-Key": "k-1"})
    assert lost.status_code == 202
    assert lost.json()["id"] == won.json()["id"]
    assert lost.headers["idempotent-replayed"] == "true"
    calls.clear()
    other_body = submit(
        second,
        key,
        "simulate",
        SIMULATE | {"hardware": "a100-sxm-80gb"},
        **{"Idempotency-Key": "k-1"},
    )
    assert other_body.status_code == 409
    db_engine = create_db_engine(database_url)
    try:
        with db_engine.connect() as connection:
            assert connection.execute(select(func.count()).select_from(Job)).scalar_one() == 1
    finally:
        db_engine.dispose()


def test_with_ci_an_unreachable_redis_fails_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import backends_redis

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    monkeypatch.setattr(backends_redis, "REDIS_TEST_URL", f"redis://127.0.0.1:{port}/0")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires Redis"):
        backends_redis.require_redis()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception):
        backends_redis.require_redis()
