"""API keys: 401 without a key, 403 with the wrong scope, revoked keys stop working."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from servesize.security import Scope


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_write_without_key_is_401(client: TestClient) -> None:
    response = client.post("/v1/keys", json={"name": "a", "scopes": ["admin"]})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_malformed_authorization_header_is_401(client: TestClient) -> None:
    response = client.get("/v1/keys", headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert response.status_code == 401


def test_unknown_key_is_401(client: TestClient) -> None:
    response = client.get("/v1/keys", headers=bearer("ssk_0123456789abcdef_notarealsecret"))
    assert response.status_code == 401


def test_wrong_secret_for_real_key_id_is_401(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.ADMIN)
    forged = key.rsplit("_", 1)[0] + "_" + "A" * 43
    assert client.get("/v1/keys", headers=bearer(forged)).status_code == 401


def test_wrong_scope_is_403(client: TestClient, create_key: Callable[..., str]) -> None:
    key = create_key(Scope.PROFILES_WRITE)
    response = client.get("/v1/keys", headers=bearer(key))
    assert response.status_code == 403
    assert response.json()["required_scope"] == "admin"


def test_admin_creates_lists_and_revokes_keys(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    admin = create_key(Scope.ADMIN)
    created = client.post(
        "/v1/keys", json={"name": "uploader", "scopes": ["profiles:write"]}, headers=bearer(admin)
    )
    assert created.status_code == 201
    new_key = created.json()["key"]
    assert new_key.startswith("ssk_")

    listed = client.get("/v1/keys", headers=bearer(admin)).json()
    assert {k["name"] for k in listed} == {"test-admin", "uploader"}
    assert all("key" not in k and "key_hash" not in k for k in listed)

    # The new key authenticates (wrong scope for this admin route: 403, not 401).
    assert client.get("/v1/keys", headers=bearer(new_key)).status_code == 403

    key_id = created.json()["key_id"]
    revoked = client.delete(f"/v1/keys/{key_id}", headers=bearer(admin))
    assert revoked.status_code == 200
    assert revoked.json()["revoked"] is True
    assert client.get("/v1/keys", headers=bearer(new_key)).status_code == 401


def test_revoking_unknown_key_is_404(client: TestClient, create_key: Callable[..., str]) -> None:
    admin = create_key(Scope.ADMIN)
    assert client.delete("/v1/keys/0000000000000000", headers=bearer(admin)).status_code == 404


def test_reads_can_require_a_key(
    make_client: Callable[..., TestClient], create_key: Callable[..., str]
) -> None:
    client = make_client(read_requires_key=True)
    assert client.get("/livez").status_code == 200  # probes stay open
    assert client.get("/v1/keys").status_code == 401
    key = create_key(Scope.ADMIN)
    assert client.get("/v1/keys", headers=bearer(key)).status_code == 200


def test_secret_key_setting_keys_the_hash(
    make_client: Callable[..., TestClient], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.ADMIN)  # hashed with the instance secret from the migration
    with_other_secret = make_client(secret_key="a-different-secret")
    assert with_other_secret.get("/v1/keys", headers=bearer(key)).status_code == 401
