"""A downgrade that would drop data asks first; the key-hashing secret survives one."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select, text

from servesize.db import migrate
from servesize.db.base import Base
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.repository import ApiKeyRepository
from servesize.security import Scope
from tests.api.test_models import llama_config

API_KEY = Base.metadata.tables["api_key"]


def _secret_hex(url: str) -> str:
    db_engine = create_db_engine(url)
    try:
        with db_engine.connect() as connection:
            return str(connection.execute(text("SELECT secret_hex FROM instance_secret")).scalar())
    finally:
        db_engine.dispose()


def test_downgrade_refuses_to_drop_data_and_says_what(fresh_url: str) -> None:
    migrate.upgrade(fresh_url)
    db_engine = create_db_engine(fresh_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            row, _ = ApiKeyRepository(session).create(name="w", scopes=[Scope.MODELS_WRITE])
            session.execute(
                insert(Base.metadata.tables["custom_model"]).values(
                    model_id="acme/m",
                    config=llama_config(),
                    created_at=row.created_at,
                    owner_key_id=row.id,
                )
            )
        with db_engine.connect() as connection:
            count = connection.execute(text("SELECT count(*) FROM hardware_profile"))
            profiles = int(count.scalar_one())
    finally:
        db_engine.dispose()
    assert profiles > 0

    with pytest.raises(migrate.DataLossRefusedError) as refused:
        migrate.downgrade(fresh_url, "base")
    described = {(loss.target, loss.rows) for loss in refused.value.losses}
    assert described == {
        # the NVL72 datasheet rows (gb200, gb300) store their NVLink domain
        ("hardware_profile.inter_node", 2),
        # the 16 datasheet rows naming a PCIe generation or NVLink-C2C store their host link
        ("hardware_profile.host_link_bytes_per_s", 16),
        ("custom_model.owner_key_id", 1),
        ("hardware_profile", profiles),
        ("custom_model", 1),
        ("api_key", 1),
    }
    assert "table api_key (1 rows" in str(refused.value)
    db_engine = create_db_engine(fresh_url)
    try:
        assert migrate.is_at_head(db_engine)  # nothing was changed
    finally:
        db_engine.dispose()

    # Each revision declares what it drops: the newest the (empty) stored_trace table, then the
    # host-link columns (16 values, the empty host memory), then the shared state (nothing
    # stored), then the inter_node column (2 values, the NVL72 rows), then the (empty)
    # engine_calibration table, job, plan_verification and saved_plan, then the owner columns.
    def losses(steps: str) -> list[tuple[str, int]]:
        return [(loss.target, loss.rows) for loss in migrate.downgrade_losses(fresh_url, steps)]

    traces = [("stored_trace", 0)]
    host_link = [
        ("hardware_profile.host_link_bytes_per_s", 16),
        ("hardware_profile.host_memory_bytes", 0),
    ]
    assert losses("-1") == traces
    assert losses("-2") == traces + host_link
    assert losses("-3") == traces + host_link
    assert losses("-4")[3] == ("hardware_profile.inter_node", 2)
    assert [loss.target for loss in migrate.downgrade_losses(fresh_url, "-7")] == [
        "stored_trace",
        "hardware_profile.host_link_bytes_per_s",
        "hardware_profile.host_memory_bytes",
        "hardware_profile.inter_node",
        "engine_calibration",
        "job",
        "plan_verification",
    ]
    assert migrate.downgrade_losses(fresh_url, "-8")[7].target == "saved_plan"
    assert migrate.downgrade_losses(fresh_url, "-9")[8].target == "custom_model.owner_key_id"


def test_instance_secret_survives_downgrade_and_upgrade(fresh_url: str) -> None:
    """A key hashed before a downgrade to base verifies after the upgrade (restored rows)."""
    migrate.upgrade(fresh_url)
    before = _secret_hex(fresh_url)
    db_engine = create_db_engine(fresh_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            _, new = ApiKeyRepository(session).create(name="root", scopes=[Scope.ADMIN])
        with db_engine.connect() as connection:
            backup = [dict(r._mapping) for r in connection.execute(select(API_KEY))]
    finally:
        db_engine.dispose()

    migrate.downgrade(fresh_url, "base", destroy_data=True)
    migrate.upgrade(fresh_url)
    assert _secret_hex(fresh_url) == before

    db_engine = create_db_engine(fresh_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            session.execute(insert(API_KEY), backup)
        with transaction(make_sessionmaker(db_engine)) as session:
            assert ApiKeyRepository(session).authenticate(new.token) is not None
    finally:
        db_engine.dispose()
