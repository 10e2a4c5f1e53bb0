"""A failed statement's message carries no bound values (hashes, uploaded text)."""

from __future__ import annotations

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from servesize.db.base import Base
from servesize.db.connection import create_db_engine
from servesize.db.types import utc_now


def test_failed_insert_hides_its_parameters(database_url: str) -> None:
    api_key = Base.metadata.tables["api_key"]
    row = {
        "key_id": "0123456789abcdef",
        "name": "dup",
        "key_hash": "d3adb33f" * 8,
        "scopes": ["admin"],
        "created_at": utc_now(),
    }
    db_engine = create_db_engine(database_url)
    try:
        with pytest.raises(IntegrityError) as failed, db_engine.begin() as connection:
            connection.execute(insert(api_key), [row, {**row, "key_hash": "c0ffee00" * 8}])
    finally:
        db_engine.dispose()
    message = str(failed.value)
    assert "d3adb33f" not in message
    assert "c0ffee00" not in message
