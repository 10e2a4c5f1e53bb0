"""Liveness, readiness, metrics and the request id."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from servesize.db import migrate


def test_livez_needs_nothing(client: TestClient) -> None:
    response = client.get("/livez")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_200_at_head(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["migrations"] == "head"


def test_readyz_is_503_when_database_unreachable() -> None:
    from servesize.api.app import create_app
    from servesize.settings import Settings

    unreachable = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1"
    with TestClient(create_app(Settings(database_url=unreachable))) as client:
        response = client.get("/readyz")
        assert client.get("/livez").status_code == 200
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"].endswith("database-unavailable")


def test_readyz_is_503_when_migrations_pending(
    database_url: str, make_client: Callable[..., TestClient]
) -> None:
    migrate.downgrade(database_url, "base", destroy_data=True)
    response = make_client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["type"].endswith("migrations-pending")
    migrate.upgrade(database_url)


def test_request_id_is_generated_and_echoed(client: TestClient) -> None:
    generated = client.get("/livez").headers["x-request-id"]
    assert len(generated) == 32
    echoed = client.get("/livez", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"]
    assert echoed == "abc-123"


def test_unsafe_request_id_is_replaced(client: TestClient) -> None:
    response = client.get("/livez", headers={"X-Request-ID": "bad id\twith spaces"})
    assert response.headers["x-request-id"] != "bad id\twith spaces"


def test_metrics_count_requests_by_route_template_and_status(client: TestClient) -> None:
    client.get("/livez")
    client.get("/v1/keys/abcdef")  # 405: the template exists, GET does not
    client.get("/v1/keys")
    body = client.get("/metrics").text
    assert 'servesize_http_requests_total{method="GET",route="/livez",status="200"} 1.0' in body
    assert 'servesize_http_requests_total{method="GET",route="/v1/keys",status="401"} 1.0' in body
    assert "servesize_http_request_duration_seconds_bucket" in body


def test_openapi_and_docs_are_served(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["info"]["title"] == "servesize"
    assert "/v1/keys" in spec["paths"]
    assert client.get("/docs").status_code == 200
