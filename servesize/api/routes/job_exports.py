"""A finished sweep's table as CSV: ``GET /v1/jobs/{id}/result.csv`` (owner or admin)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from servesize.api.deps import SessionDep
from servesize.api.errors import ConflictError
from servesize.api.routes.jobs import ReaderKey, _load
from servesize.api.routes.sweep_tasks import sweep_csv
from servesize.db.repository import JobRepository

__all__ = ["router"]

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get(
    "/{job_id}/result.csv",
    response_class=Response,
    responses={
        200: {"content": {"text/csv": {}}, "description": "One line per combination"},
        401: {"description": "No API key, or not a live one"},
        403: {"description": "The job belongs to another key (owner or admin only)"},
        404: {"description": "No such job"},
        409: {"description": "Not a sweep, or not succeeded (yet)"},
    },
)
def get_job_csv(job_id: str, session: SessionDep, key: ReaderKey) -> Response:
    """The sweep's rows as CSV (the JSON ``rows``' fields as columns, nulls empty)."""
    row = _load(JobRepository(session), job_id, key)
    if row.kind != "sweep":
        raise ConflictError(f"job {job_id!r} is a {row.kind}, not a sweep", kind=row.kind)
    if row.state != "succeeded" or row.result is None:
        raise ConflictError(f"job {job_id!r} is {row.state}, not succeeded", state=row.state)
    filename = f"{job_id}.csv"
    return Response(
        sweep_csv(row.result),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
