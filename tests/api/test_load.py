"""Requests under load: planning routes hold no database connection while they compute, heavy
work is bounded (503 with Retry-After when full), a deadline interrupts it, a disconnected
client's work stops, and cached lookups follow writes at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import event

from servesize.api.app import create_app
from servesize.core.memory import plan_memory
from servesize.security import Scope
from servesize.settings import Settings

PLAN_MEMORY = "servesize.api.routes.memory.plan_memory"
MODEL = "meta-llama/Llama-3.1-8B"
MEMORY = {"model": MODEL, "hardware": "h100-sxm"}
PERFORMANCE = {"model": MODEL, "hardware": "h100-sxm"}
QUEUE = {"model": "mmc", "arrival_rate_per_s": 8, "service_time_s": 1, "servers": 10}
SIMULATE = {
    "model": MODEL,
    "hardware": "h100-sxm",
    "traffic": {
        "arrival": {"process": "poisson", "rate_per_s": 4},
        "input_tokens": 128,
        "output_tokens": 8,
        "num_requests": 20,
        "warmup_requests": 0,
    },
}


def _app(database_url: str, **overrides: Any) -> FastAPI:
    fields: dict[str, Any] = {
        "database_url": database_url,
        "rate_limit_per_minute": 0,
        "lookup_cache_ttl_s": 3600,
    }
    return create_app(Settings.model_validate(fields | overrides))


@pytest.fixture
def checkouts() -> Iterator[Callable[[FastAPI], list[int]]]:
    """Count the connections each app takes from its pool."""
    attached: list[tuple[Any, Callable[..., None]]] = []

    def attach(app: FastAPI) -> list[int]:
        taken: list[int] = []

        def on_checkout(*_: Any) -> None:
            taken.append(1)

        event.listen(app.state.db_engine, "checkout", on_checkout)
        attached.append((app.state.db_engine, on_checkout))
        return taken

    yield attach
    for db_engine, listener in attached:
        event.remove(db_engine, "checkout", listener)


def test_planning_routes_take_no_database_connection_once_the_lookups_are_cached(
    database_url: str, checkouts: Callable[[FastAPI], list[int]]
) -> None:
    app = _app(database_url)
    with TestClient(app) as client:
        # First calls may read the profile; later ones must not touch the database at all.
        assert client.post("/v1/memory", json=MEMORY).status_code == 200
        taken = checkouts(app)
        for _ in range(5):
            assert client.post("/v1/memory", json=MEMORY).status_code == 200
            assert client.post("/v1/performance", json=PERFORMANCE).status_code == 200
            assert client.post("/v1/queueing", json=QUEUE).status_code == 200
            assert client.get(f"/v1/models/{MODEL}").status_code == 200
        assert client.post("/v1/simulate", json=SIMULATE).status_code == 200
        assert taken == []


def test_no_connection_is_held_while_a_route_computes(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile is looked up (cold cache) and the session closed before the ledger runs."""
    app = _app(database_url)
    held: list[int] = []
    real = plan_memory

    def spying_plan(*args: Any, **kwargs: Any) -> Any:
        held.append(app.state.db_engine.pool.checkedout())
        return real(*args, **kwargs)

    monkeypatch.setattr(PLAN_MEMORY, spying_plan)
    with TestClient(app) as client:
        response = client.post("/v1/memory", json=MEMORY)
    assert response.status_code == 200, response.text
    assert held == [0]


def test_sixty_concurrent_requests_through_a_pool_of_two_all_succeed(database_url: str) -> None:
    app = _app(database_url, db_pool_size=2, db_max_overflow=0, db_pool_timeout_s=30)
    calls: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", "/v1/memory", MEMORY),
        ("POST", "/v1/performance", PERFORMANCE),
        ("GET", "/v1/models", None),
        ("GET", "/v1/hardware/h100-sxm", None),
        ("POST", "/v1/queueing", QUEUE),
    ]
    statuses: list[int] = []

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

            async def one(i: int) -> None:
                method, path, body = calls[i % len(calls)]
                response = await client.request(method, path, json=body)
                statuses.append(response.status_code)

            async with anyio.create_task_group() as group:
                for i in range(60):
                    group.start_soon(one, i)

    anyio.run(scenario)
    app.state.db_engine.dispose()
    assert statuses == [200] * 60


class _Blocker:
    """A stand-in for a computation: waits in pure Python until released or interrupted."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.interrupted = threading.Event()
        self.finished = threading.Event()

    def __call__(self, *_args: Any, **_kwargs: Any) -> Any:
        self.entered.set()
        deadline = time.monotonic() + 60
        try:
            while not self.release.is_set() and time.monotonic() < deadline:
                sum(range(1000))  # bytecode, so an interruption lands here
        except BaseException:
            self.interrupted.set()
            raise
        self.finished.set()
        raise RuntimeError("released")


def test_a_full_queue_is_a_503_problem_with_retry_after(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = _Blocker()
    monkeypatch.setattr(PLAN_MEMORY, blocker)
    app = _app(database_url, compute_workers=1, compute_queue=0)
    responses: list[httpx.Response] = []

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

            async def first() -> None:
                responses.append(await client.post("/v1/memory", json=MEMORY))

            async with anyio.create_task_group() as group:
                group.start_soon(first)
                while not blocker.entered.is_set():
                    await anyio.sleep(0.01)
                second = await client.post("/v1/memory", json=MEMORY)
                responses.append(second)
                blocker.release.set()

    anyio.run(scenario)
    app.state.db_engine.dispose()
    full = responses[0]
    assert full.status_code == 503
    assert full.headers["content-type"] == "application/problem+json"
    assert full.json()["type"].endswith(":overloaded")
    assert int(full.headers["retry-after"]) >= 1


def test_a_computation_past_the_deadline_is_interrupted_and_answered_503(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = _Blocker()
    with TestClient(_app(database_url, compute_deadline_s=1.0, compute_workers=1)) as client:
        # Warm the lookup cache, so the deadline passes while the blocker computes.
        assert client.post("/v1/memory", json=MEMORY).status_code == 200
        monkeypatch.setattr(PLAN_MEMORY, blocker)
        response = client.post("/v1/memory", json=MEMORY)
        assert response.status_code == 503, response.text
        assert response.json()["type"].endswith(":deadline-exceeded")
        assert blocker.interrupted.wait(10)
        assert not blocker.finished.is_set()
        # The one worker is free again: the next request is served.
        monkeypatch.setattr(PLAN_MEMORY, plan_memory)
        assert client.post("/v1/memory", json=MEMORY).status_code == 200
    blocker.release.set()


def test_the_work_of_a_client_that_disconnected_is_interrupted(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = _Blocker()
    monkeypatch.setattr(PLAN_MEMORY, blocker)
    app = _app(database_url)
    body = httpx.Request("POST", "http://test/v1/memory", json=MEMORY).read()
    sent: list[MutableMapping[str, Any]] = []

    async def scenario() -> None:
        gone = anyio.Event()
        delivered = False

        async def receive() -> MutableMapping[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/memory",
            "raw_path": b"/v1/memory",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"test"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 5000),
            "server": ("test", 80),
        }
        async with anyio.create_task_group() as group:

            async def serve() -> None:
                await app(scope, receive, send)

            group.start_soon(serve)
            while not blocker.entered.is_set():
                await anyio.sleep(0.01)
            gone.set()

    anyio.run(scenario)
    app.state.db_engine.dispose()
    assert blocker.interrupted.wait(10)
    assert not blocker.finished.is_set()
    blocker.release.set()


def test_cached_models_follow_writes_through_the_api_at_once(
    make_client: Callable[..., TestClient], create_key: Callable[..., str]
) -> None:
    client = make_client(lookup_cache_ttl_s=3600)
    headers = {"Authorization": f"Bearer {create_key(Scope.MODELS_WRITE)}"}
    config = client.get(f"/v1/models/{MODEL}").json()["config"]
    assert client.get("/v1/models/acme/tiny").status_code == 404
    created = client.post(
        "/v1/models", json={"id": "acme/tiny", "hf_config": config}, headers=headers
    )
    assert created.status_code == 201, created.text
    assert client.get("/v1/models/acme/tiny").status_code == 200
    listed = client.get("/v1/models", params={"limit": 200}).json()["items"]
    assert "acme/tiny" in {m["id"] for m in listed}
    assert client.post("/v1/memory", json=MEMORY | {"model": "acme/tiny"}).status_code == 200
    assert client.delete("/v1/models/acme/tiny", headers=headers).status_code == 204
    assert client.get("/v1/models/acme/tiny").status_code == 404
    assert client.post("/v1/memory", json=MEMORY | {"model": "acme/tiny"}).status_code == 404
    listed = client.get("/v1/models", params={"limit": 200}).json()["items"]
    assert "acme/tiny" not in {m["id"] for m in listed}


def test_an_exhausted_connection_pool_is_a_503_problem_not_a_500(database_url: str) -> None:
    app = _app(database_url, db_pool_size=1, db_max_overflow=0, db_pool_timeout_s=0.2)
    with TestClient(app) as client:
        held = app.state.db_engine.connect()  # the pool's only connection
        try:
            response = client.get("/v1/hardware/h100-sxm")
        finally:
            held.close()
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["type"].endswith(":database-unavailable")
        assert "retry-after" in response.headers
        assert client.get("/v1/hardware/h100-sxm").status_code == 200
