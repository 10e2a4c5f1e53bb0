"""Ownership: the key that created a resource, or an admin key, changes or deletes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.models import ApiKey, CustomModel, HardwareMeasurement, HardwareProfile
from servesize.security import Scope, parse_key
from tests.api.test_hardware import h100_upload
from tests.api.test_models import llama_config


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _row_id(database_url: str, token: str) -> int:
    parts = parse_key(token)
    assert parts is not None
    db_engine = create_db_engine(database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            key_row = session.scalar(select(ApiKey).where(ApiKey.key_id == parts.key_id))
            assert key_row is not None
            return key_row.id
    finally:
        db_engine.dispose()


def _owner(database_url: str, table: Any, *where: Any) -> int | None:
    db_engine = create_db_engine(database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            row = session.scalar(select(table).where(*where))
            assert row is not None
            owner: int | None = row.owner_key_id
            return owner
    finally:
        db_engine.dispose()


def _register(client: TestClient, key: str, model_id: str) -> None:
    response = client.post(
        "/v1/models", json={"id": model_id, "hf_config": llama_config()}, headers=bearer(key)
    )
    assert response.status_code == 201, response.text


def test_another_writer_cannot_delete_a_model(
    client: TestClient, create_key: Callable[..., str], database_url: str
) -> None:
    alice = create_key(Scope.MODELS_WRITE, name="alice")
    mallory = create_key(Scope.MODELS_WRITE, name="mallory")
    _register(client, alice, "acme/alice-model")
    refused = client.delete("/v1/models/acme/alice-model", headers=bearer(mallory))
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["type"] == "urn:servesize:problem:forbidden"
    assert client.get("/v1/models/acme/alice-model").status_code == 200
    assert _owner(database_url, CustomModel, CustomModel.model_id == "acme/alice-model") == (
        _row_id(database_url, alice)
    )

    assert client.delete("/v1/models/acme/alice-model", headers=bearer(alice)).status_code == 204
    assert client.get("/v1/models/acme/alice-model").status_code == 404


def test_admin_deletes_any_model(client: TestClient, create_key: Callable[..., str]) -> None:
    alice = create_key(Scope.MODELS_WRITE, name="alice")
    admin = create_key(Scope.ADMIN, name="root")
    _register(client, alice, "acme/alice-model")
    assert client.delete("/v1/models/acme/alice-model", headers=bearer(admin)).status_code == 204


def test_profiles_and_measurements_record_their_owner(
    client: TestClient, create_key: Callable[..., str], database_url: str
) -> None:
    admin = create_key(Scope.ADMIN, name="root")
    uploader = create_key(Scope.PROFILES_WRITE, name="agent")
    profile = {
        "id": "cpu-host",
        "vendor": "Generic",
        "name": "CPU host",
        "memory_bytes": 64 * 2**30,
        "memory_bandwidth_bytes_per_s": 50_000_000_000,
        "peak_tflop_per_s": {"fp32": 2.0},
        "identity_tokens": [],
    }
    assert client.post("/v1/hardware", json=profile, headers=bearer(admin)).status_code == 201
    assert _owner(database_url, HardwareProfile, HardwareProfile.id == "cpu-host") == (
        _row_id(database_url, admin)
    )
    stored = client.post(
        "/v1/hardware/h100-sxm/measurements",
        json=h100_upload(),
        headers={**bearer(uploader), "Idempotency-Key": "k-1"},
    )
    assert stored.status_code == 201, stored.text
    assert _owner(
        database_url, HardwareMeasurement, HardwareMeasurement.id == stored.json()["id"]
    ) == _row_id(database_url, uploader)
    # Datasheet profiles belong to no key.
    assert _owner(database_url, HardwareProfile, HardwareProfile.id == "h100-sxm") is None
