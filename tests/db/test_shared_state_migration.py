"""Migration 2026_12_03_shared_state: jobs stored before it keep every field (and name no owner
process), the new tables take counters and answers, and a downgrade keeps every job."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text

from servesize.db import migrate
from servesize.db.connection import create_db_engine

RESULT = {"answer": 42, "rows": [1.5, 2.25]}
JOB_COLUMNS = "id, kind, state, request, request_sha256, idempotency_key, result, error"


def _jobs(url: str) -> dict[str, tuple[Any, ...]]:
    db_engine = create_db_engine(url)
    try:
        with db_engine.connect() as connection:
            rows = connection.execute(text(f"SELECT {JOB_COLUMNS} FROM job ORDER BY id")).all()
    finally:
        db_engine.dispose()
    decoded = {}
    for row in rows:
        values = [json.loads(v) if isinstance(v, str) and v[:1] in "{[" else v for v in row]
        decoded[row[0]] = tuple(values)
    return decoded


def _execute(url: str, statement: str, **params: Any) -> list[Any]:
    db_engine = create_db_engine(url)
    try:
        with db_engine.begin() as connection:
            result = connection.execute(text(statement), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        db_engine.dispose()


def test_jobs_survive_the_upgrade_and_the_downgrade(fresh_url: str) -> None:
    migrate.upgrade(fresh_url, "2026_12_02_inter_node")
    insert = (
        "INSERT INTO job (id, kind, state, request, request_sha256, idempotency_key, created_at,"
        " result, error) VALUES (:id, 'simulate', :state, :request, :sha, :ikey, :at, :result,"
        " :error)"
    )
    for job_id, state, result, error in (
        ("job_00000000000000c1", "succeeded", json.dumps(RESULT), None),
        ("job_00000000000000c2", "failed", None, json.dumps({"status": 422, "detail": "no"})),
    ):
        _execute(
            fresh_url,
            insert,
            id=job_id,
            state=state,
            request=json.dumps({"model": "m"}),
            sha="a" * 64,
            ikey=f"key-{job_id}",
            at="2026-12-02 10:00:00.000000",
            result=result,
            error=error,
        )
    before = _jobs(fresh_url)
    assert before["job_00000000000000c1"][6] == RESULT

    migrate.upgrade(fresh_url)
    assert _jobs(fresh_url) == before
    owners = _execute(fresh_url, "SELECT owner_process, lease_expires_at FROM job")
    assert [tuple(r) for r in owners] == [(None, None), (None, None)]
    _execute(
        fresh_url,
        "INSERT INTO rate_limit (key, count, expires_at) VALUES ('requests:x:1', 3, :at)",
        at="2026-12-03 10:01:00.000000",
    )
    _execute(
        fresh_url,
        "INSERT INTO sizing_answer (key, body, expires_at) VALUES (:key, :body, :at)",
        key="b" * 64,
        body=json.dumps(RESULT),
        at="2026-12-03 11:00:00.000000",
    )

    # The revisions above this one (traces, host link) first; then counters, cached answers and
    # process names are all this downgrade drops: no refusal.
    migrate.downgrade(fresh_url, "2026_12_03_shared_state", destroy_data=True)
    assert migrate.downgrade_losses(fresh_url, "2026_12_02_inter_node") == []
    migrate.downgrade(fresh_url, "2026_12_02_inter_node")
    assert _jobs(fresh_url) == before
    migrate.upgrade(fresh_url)
    assert _jobs(fresh_url) == before
