"""Liveness, readiness and Prometheus metrics (unversioned, as probes expect)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError
from starlette.responses import Response

from servesize.api.problems import problem_response
from servesize.db.migrate import current_revisions, head_revisions

router = APIRouter(tags=["health"])
log = logging.getLogger("servesize.api")


@router.get("/livez", summary="The process is up (checks nothing else)")
def livez() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The database answers and its schema is at the newest migration",
    responses={503: {"description": "Not ready; the problem says why"}},
)
def readyz(request: Request) -> Response:
    db_engine: Engine = request.app.state.db_engine
    try:
        with db_engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        current = current_revisions(db_engine)
        heads = head_revisions(db_engine.url.render_as_string(False))
    except SQLAlchemyError as exc:
        log.warning("readiness check failed: %s", type(exc).__name__)
        return problem_response(
            503, "database-unavailable", "the database is unreachable", instance="/readyz"
        )
    if current != heads:
        return problem_response(
            503,
            "migrations-pending",
            "the database schema is not at the newest migration; run `servesize db upgrade`",
            instance="/readyz",
            current_revision=sorted(current),
            head_revision=sorted(heads),
        )
    return Response(
        content=b'{"status":"ready","database":"ok","migrations":"head"}',
        media_type="application/json",
    )


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request) -> Response:
    registry = request.app.state.metrics.scrape_registry()
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
