"""Keys: the last admin key stays; an unknown key id costs what a known one does. Headers:
nosniff everywhere, no-store on a new secret. ``If-Match`` takes a list of entity tags."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.orm import Session

import servesize.db.repository as repository
from servesize import security
from servesize.api.routes.hardware import if_match_tags
from servesize.db.connection import create_db_engine, make_sessionmaker
from servesize.db.repository import ApiKeyRepository
from servesize.security import Scope


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_last_admin_key_cannot_revoke_itself(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    root = create_key(Scope.ADMIN, name="root")
    root_id = root.split("_")[1]
    refused = client.delete(f"/v1/keys/{root_id}", headers=bearer(root))
    assert refused.status_code == 409
    assert refused.headers["content-type"] == "application/problem+json"
    assert client.get("/v1/keys", headers=bearer(root)).status_code == 200  # still works

    # With a second live admin key it may go.
    second = client.post(
        "/v1/keys", json={"name": "second", "scopes": ["admin"]}, headers=bearer(root)
    )
    assert second.status_code == 201
    assert client.delete(f"/v1/keys/{root_id}", headers=bearer(root)).status_code == 200
    assert client.get("/v1/keys", headers=bearer(second.json()["key"])).status_code == 200


def test_new_secret_is_not_cached(client: TestClient, create_key: Callable[..., str]) -> None:
    root = create_key(Scope.ADMIN, name="root")
    created = client.post(
        "/v1/keys", json={"name": "agent", "scopes": ["profiles:write"]}, headers=bearer(root)
    )
    assert created.status_code == 201
    assert created.headers["cache-control"] == "no-store"


def test_every_response_says_nosniff(make_client: Callable[..., TestClient]) -> None:
    client = make_client(rate_limit_per_minute=3, max_body_bytes=1024)
    responses = [
        client.get("/livez"),
        client.get("/metrics"),
        client.get("/v1/models"),  # 200
        client.get("/v1/nowhere"),  # 404
        client.post("/v1/keys", json={"name": "x", "scopes": ["admin"]}),  # 401
        client.get("/v1/models"),  # 429 from the rate limiter
    ]
    assert [r.status_code for r in responses] == [200, 200, 200, 404, 401, 429]
    big = make_client(max_body_bytes=1024).post(
        "/v1/memory", content=b"x" * 2048, headers={"content-type": "application/json"}
    )
    assert big.status_code == 413
    for response in [*responses, big]:
        assert response.headers["x-content-type-options"] == "nosniff"


@pytest.fixture
def counted_session(database_url: str) -> Iterator[tuple[Session, list[str]]]:
    """A session whose SQL statements are recorded."""
    db_engine = create_db_engine(database_url)
    statements: list[str] = []

    @event.listens_for(db_engine, "before_cursor_execute")
    def _record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement.split()[0].upper() + " " + statement.split("FROM")[-1][:40])

    try:
        with make_sessionmaker(db_engine)() as session:
            yield session, statements
    finally:
        db_engine.dispose()


def test_unknown_key_id_costs_what_a_known_one_does(
    counted_session: tuple[Session, list[str]],
    create_key: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Same statements and the same keyed HMAC for an id that exists and one that does not,
    so response time cannot tell them apart (compared by work done, not by a clock)."""
    session, statements = counted_session
    known = create_key(Scope.ADMIN)
    key_id = known.split("_")[1]
    unknown_id = "f" * 16 if key_id != "f" * 16 else "e" * 16
    secrets_used: list[tuple[bytes, int]] = []
    real_verify = security.verify_secret

    def spy(secret: str, stored_hash: str, *, instance_secret: bytes) -> bool:
        secrets_used.append((instance_secret, len(stored_hash)))
        return real_verify(secret, stored_hash, instance_secret=instance_secret)

    monkeypatch.setattr(repository, "verify_secret", spy)
    keys = ApiKeyRepository(session)
    runs: list[tuple[list[str], list[tuple[bytes, int]]]] = []
    for token in (f"ssk_{key_id}_wrong-secret", f"ssk_{unknown_id}_wrong-secret"):
        statements.clear()
        secrets_used.clear()
        session.expunge_all()
        assert keys.authenticate(token) is None
        runs.append((list(statements), list(secrets_used)))
    (known_sql, known_hmac), (unknown_sql, unknown_hmac) = runs
    assert unknown_sql == known_sql
    assert unknown_hmac == known_hmac
    assert len(known_hmac) == 1


def test_if_match_lists_are_parsed_per_rfc_9110() -> None:
    assert if_match_tags('"a"') == ['"a"']
    assert if_match_tags('"a", W/"b" ,"c,d"') == ['"a"', 'W/"b"', '"c,d"']
    assert if_match_tags(" * ") == ["*"]
    assert if_match_tags(', "a",,') == ['"a"']  # empty list elements are allowed
    assert if_match_tags("a") is None
    assert if_match_tags('"a" "b"') is None
    assert if_match_tags("") is None


def test_if_match_with_a_list_of_etags(client: TestClient, create_key: Callable[..., str]) -> None:
    admin = bearer(create_key(Scope.ADMIN, name="root"))
    etag = client.get("/v1/hardware/h100-sxm").headers["etag"]
    assert etag == '"h100-sxm-v1"'

    def patch(if_match: str) -> int:
        headers = {**admin, "If-Match": if_match}
        return client.patch(
            "/v1/hardware/h100-sxm", json={"notes": "n"}, headers=headers
        ).status_code

    assert patch(f'W/"{etag[1:-1]}"') == 412  # weak tags never match strongly
    assert patch('"h100-sxm-v0", "elsewhere"') == 412
    assert patch(f'"h100-sxm-v0", {etag}') == 200  # any listed tag that matches
    assert patch("no-quotes") == 400
    assert patch('"h100-sxm-v1"') == 412  # the version moved on
