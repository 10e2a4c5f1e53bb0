"""Every error is an RFC 9457 problem: 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from httpx2 import Response

from servesize.api.deps import SessionDep
from servesize.db.models import ApiKey
from servesize.security import Scope

PROBLEM = "application/problem+json"


def assert_problem(response: Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["type"] == f"urn:servesize:problem:{slug}"
    assert isinstance(body["title"], str)
    assert isinstance(body["detail"], str)
    assert body["detail"]
    return body


def test_404_unknown_path(client: TestClient) -> None:
    body = assert_problem(client.get("/v1/nothing-here"), 404, "not-found")
    assert body["instance"] == "/v1/nothing-here"


def test_405_wrong_method(client: TestClient) -> None:
    response = client.put("/livez")
    assert_problem(response, 405, "method-not-allowed")
    assert "GET" in response.headers["allow"]


def test_400_malformed_json(client: TestClient, create_key: Callable[..., str]) -> None:
    key = create_key(Scope.ADMIN)
    response = client.post(
        "/v1/keys",
        content=b'{"name": ',
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    assert_problem(response, 400, "malformed-json")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_400_nan_and_infinity_rejected(client: TestClient, constant: str) -> None:
    response = client.post(
        "/v1/keys",
        content=f'{{"name": "x", "scopes": ["admin"], "weight": {constant}}}'.encode(),
        headers={"Content-Type": "application/json"},
    )
    body = assert_problem(response, 400, "malformed-json")
    assert constant.lstrip("-") in body["detail"]


def test_413_body_over_limit(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_body_bytes=2048)
    response = client.post("/v1/keys", json={"name": "x" * 4000, "scopes": ["admin"]})
    body = assert_problem(response, 413, "body-too-large")
    assert body["max_body_bytes"] == 2048


def test_413_streamed_body_without_length(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_body_bytes=2048)

    def chunks() -> Any:
        for _ in range(10):
            yield b" " * 1000

    response = client.post(
        "/v1/keys", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 413, "body-too-large")


def test_415_wrong_media_type(client: TestClient) -> None:
    response = client.post(
        "/v1/keys", content=b"name=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert_problem(response, 415, "unsupported-media-type")


def test_422_lists_each_failing_field_with_its_pointer(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.ADMIN)
    response = client.post(
        "/v1/keys",
        json={"name": "", "scopes": ["admin", "root"], "extra": 1},
        headers={"Authorization": f"Bearer {key}"},
    )
    body = assert_problem(response, 422, "validation-error")
    pointers = {e["pointer"] for e in body["errors"]}
    assert pointers == {"/name", "/scopes/1", "/extra"}
    assert all(e["location"] == "body" for e in body["errors"])


def test_409_duplicate_name(client: TestClient, create_key: Callable[..., str]) -> None:
    key = create_key(Scope.ADMIN, name="root")
    response = client.post(
        "/v1/keys",
        json={"name": "root", "scopes": ["models:write"]},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert_problem(response, 409, "conflict")


def test_429_rate_limit(make_client: Callable[..., TestClient]) -> None:
    client = make_client(rate_limit_per_minute=3)
    statuses = [client.get("/v1/keys").status_code for _ in range(4)]
    assert statuses[:3] == [401, 401, 401]
    response = client.get("/v1/keys")
    assert_problem(response, 429, "rate-limited")
    assert int(response.headers["retry-after"]) >= 1
    assert client.get("/livez").status_code == 200  # probes are never limited


def test_500_leaks_nothing(make_client: Callable[..., TestClient]) -> None:
    client = make_client()
    router = APIRouter()

    @router.get("/v1/boom")
    def boom() -> None:
        raise RuntimeError("secret internals: password=hunter2")

    client.app.include_router(router)  # type: ignore[attr-defined]
    response = client.get("/v1/boom")
    body = assert_problem(response, 500, "internal-error")
    assert "hunter2" not in response.text
    assert "Traceback" not in response.text
    assert body["request_id"] == response.headers["x-request-id"]


def test_failed_commit_is_an_error_not_a_200(
    make_client: Callable[..., TestClient], create_key: Callable[..., str]
) -> None:
    """The session commits before the response is sent, so a commit that fails is reported."""
    create_key(Scope.ADMIN, name="taken")
    client = make_client()
    router = APIRouter()

    @router.post("/v1/duplicate")
    def duplicate(session: SessionDep) -> dict[str, bool]:
        # No flush: the unique violation surfaces only at commit time.
        session.add(ApiKey(key_id="f" * 16, name="taken", key_hash="x", scopes=[]))
        return {"ok": True}

    client.app.include_router(router)  # type: ignore[attr-defined]
    assert_problem(client.post("/v1/duplicate"), 409, "conflict")


def test_401_and_403_are_problems(client: TestClient, create_key: Callable[..., str]) -> None:
    body = assert_problem(client.get("/v1/keys"), 401, "unauthorized")
    assert "admin" in body["detail"]
    key = create_key(Scope.MODELS_WRITE)
    forbidden = client.get("/v1/keys", headers={"Authorization": f"Bearer {key}"})
    assert assert_problem(forbidden, 403, "forbidden")["required_scope"] == "admin"


def test_503_when_the_database_goes_away(make_client: Callable[..., TestClient]) -> None:
    client = make_client(database_url="postgresql+psycopg://nobody@127.0.0.1:1/none")
    response = client.get("/v1/hardware/h100-sxm")
    body = assert_problem(response, 503, "database-unavailable")
    assert "psycopg" not in body["detail"]
    assert response.headers["retry-after"] == "5"
