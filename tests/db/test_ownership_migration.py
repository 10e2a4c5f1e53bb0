"""Rows older than ownership get no owner (NULL): only admin keys may change them."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import insert, select

from servesize.api.app import create_app
from servesize.db import migrate
from servesize.db.base import Base
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.repository import ApiKeyRepository
from servesize.db.types import utc_now
from servesize.security import Scope
from servesize.settings import Settings
from tests.api.test_models import llama_config

CUSTOM_MODEL = Base.metadata.tables["custom_model"]


def test_rows_before_ownership_are_admin_only(fresh_url: str) -> None:
    migrate.upgrade(fresh_url, "0003")
    db_engine = create_db_engine(fresh_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            creator, creator_key = ApiKeyRepository(session).create(
                name="creator", scopes=[Scope.MODELS_WRITE]
            )
            _, admin_key = ApiKeyRepository(session).create(name="root", scopes=[Scope.ADMIN])
            session.execute(
                insert(CUSTOM_MODEL).values(
                    model_id="acme/old",
                    config=llama_config(),
                    created_at=utc_now(),
                    created_by=creator.id,
                )
            )
    finally:
        db_engine.dispose()

    migrate.upgrade(fresh_url)
    db_engine = create_db_engine(fresh_url)
    try:
        with db_engine.connect() as connection:
            owner = connection.execute(
                select(CUSTOM_MODEL.c.owner_key_id).where(CUSTOM_MODEL.c.model_id == "acme/old")
            ).scalar_one()
        assert owner is None
    finally:
        db_engine.dispose()

    settings = Settings(database_url=fresh_url, rate_limit_per_minute=0)
    with TestClient(create_app(settings)) as client:
        as_creator = {"Authorization": f"Bearer {creator_key.token}"}
        as_admin = {"Authorization": f"Bearer {admin_key.token}"}
        assert client.delete("/v1/models/acme/old", headers=as_creator).status_code == 403
        assert client.delete("/v1/models/acme/old", headers=as_admin).status_code == 204
