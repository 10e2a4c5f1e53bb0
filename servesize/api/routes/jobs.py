"""Background jobs over HTTP: submit a sizing, capacity search or simulation, poll, cancel.

``POST /v1/jobs`` takes ``{"kind", "request"}`` (the request is the synchronous endpoint's body,
validated by the same schema; errors point under ``/request``) and answers 202 with
``Location: /v1/jobs/{id}`` at once; the work runs in the embedded process pool
(:mod:`servesize.api.jobs`). Submitting needs scope ``jobs:write``; reading and cancelling a
job need its owner's key or an ``admin`` key.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response, status
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from servesize.api.deps import JobsWriteKey, LookupsDep, OptionalKeyDep, SessionDep
from servesize.api.errors import (
    ApiError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnauthorizedError,
)
from servesize.api.jobs import JobExecutor, problem_of
from servesize.api.ownership import require_owner
from servesize.api.pagination import PageDep
from servesize.api.problems import PROBLEM_TYPE_PREFIX
from servesize.api.routes.job_tasks import prepare
from servesize.core.errors import PlanningError
from servesize.core.replica import ReplicaError
from servesize.db.connection import transaction
from servesize.db.models import ApiKey, Job
from servesize.db.repository import JobRepository
from servesize.db.types import utc_now
from servesize.schemas.base import Page
from servesize.schemas.jobs import (
    JobIn,
    JobOut,
    JobState,
    JobSummary,
    ProgressOut,
    SizingJobIn,
)

__all__ = ["ReaderKey", "job_out", "router"]

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

EXAMPLES: dict[str, dict[str, Any]] = {
    "simulate": {
        "summary": "A short Poisson simulation as a job",
        "value": {
            "kind": "simulate",
            "request": {
                "model": "meta-llama/Llama-3.1-8B",
                "hardware": "h100-sxm",
                "traffic": {
                    "arrival": {"process": "poisson", "rate_per_s": 4},
                    "input_tokens": 512,
                    "output_tokens": 64,
                    "num_requests": 200,
                },
            },
        },
    },
}


class IdempotencyKeyReusedError(ConflictError):
    slug = "idempotency-key-reused"


class JobUnavailableError(ApiError):
    status, slug = 503, "jobs-unavailable"


class _RequestProblemError(ApiError):
    """A problem the synchronous endpoint would answer, with its pointers under ``/request``."""

    def __init__(self, problem: dict[str, Any]) -> None:
        extensions = {
            k: v for k, v in problem.items() if k not in {"type", "title", "status", "detail"}
        }
        errors = extensions.get("errors")
        if isinstance(errors, list):
            extensions["errors"] = [
                e | {"pointer": "/request" + str(e.get("pointer", ""))}
                if isinstance(e, dict)
                else e
                for e in errors
            ]
        super().__init__(str(problem["detail"]), **extensions)
        self.status = int(problem["status"])
        self.slug = str(problem["type"]).removeprefix(PROBLEM_TYPE_PREFIX)


def _executor(request: Request) -> JobExecutor:
    jobs = getattr(request.app.state, "jobs", None)
    if not isinstance(jobs, JobExecutor):
        raise JobUnavailableError("the job executor is not running", headers={"Retry-After": "5"})
    return jobs


async def reader_key(key: OptionalKeyDep) -> ApiKey:
    """Any live key (ownership is checked per job)."""
    if key is None:
        raise UnauthorizedError("reading jobs needs an API key")
    return key


ReaderKey = Annotated[ApiKey, Depends(reader_key)]


def _eta_s(row: Job, now: datetime) -> float | None:
    """Seconds left at the pace so far: elapsed × (total − done) / done, while running."""
    done, total, started = row.progress_done, row.progress_total, row.started_at
    if row.state != "running" or not done or total is None or started is None:
        return None
    return max((now - started).total_seconds(), 0.0) * max(total - done, 0) / done


def job_out(row: Job) -> JobOut:
    progress = (
        ProgressOut(done=row.progress_done, total=row.progress_total, eta_s=_eta_s(row, utc_now()))
        if row.progress_done is not None
        else None
    )
    return JobOut.model_validate(
        {
            "id": row.id,
            "kind": row.kind,
            "state": row.state,
            "progress": progress,
            "created_at": row.created_at,
            "started_at": row.started_at,
            "finished_at": row.finished_at,
            "result": row.result,
            "error": row.error,
        }
    )


def _fingerprint(kind: str, request: dict[str, Any], *, manifests: bool = False) -> str:
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"))
    options = "manifests\n" if manifests else ""
    return hashlib.sha256(f"{kind}\n{options}{canonical}".encode()).hexdigest()


def _check_idempotency_key(value: str | None) -> str | None:
    if value is None:
        return None
    if not value.strip():
        raise BadRequestError("the Idempotency-Key header is empty")
    if len(value) > 255:
        raise BadRequestError("the Idempotency-Key header is longer than 255 characters")
    return value


def _replayed(repo: JobRepository, key: ApiKey, idempotency_key: str, sha: str) -> Job | None:
    earlier = repo.by_idempotency_key(key.id, idempotency_key)
    if earlier is not None and earlier.request_sha256 != sha:
        raise IdempotencyKeyReusedError(
            "this Idempotency-Key was used for a different job; use a new key",
            job_id=earlier.id,
            errors=[{"location": "header", "pointer": "", "detail": "Idempotency-Key reused"}],
        )
    return earlier


def _queued_row(key: ApiKey, kind: str, inner: dict[str, Any], sha: str, ikey: str | None) -> Job:
    return Job(
        id=f"job_{secrets.token_hex(8)}",
        owner_key_id=key.id,
        kind=kind,
        state="queued",
        request=inner,
        request_sha256=sha,
        idempotency_key=ikey,
        created_at=utc_now(),
    )


def _insert_or_replay(
    factory: sessionmaker[Session], row: Job, key: ApiKey, sha: str
) -> Job | None:
    """Store ``row``; when the unique ``(owner_key_id, idempotency_key)`` refuses it (a
    concurrent submission with the same key won, perhaps in another process), the job that
    won (or 409 if its body differs)."""
    try:
        with transaction(factory) as session:
            JobRepository(session).add(row)
    except IntegrityError:
        if row.idempotency_key is None:
            raise
        with transaction(factory) as session:
            earlier = _replayed(JobRepository(session), key, row.idempotency_key, sha)
        if earlier is None:  # refused for another reason
            raise
        return earlier
    return None


def _replay(response: Response, earlier: Job) -> JobOut:
    """The job stored earlier under the same Idempotency-Key, marked as replayed."""
    response.headers["Location"] = f"/v1/jobs/{earlier.id}"
    response.headers["Idempotent-Replayed"] = "true"
    return job_out(earlier)


def _load(repo: JobRepository, job_id: str, key: ApiKey) -> Job:
    row = repo.get(job_id)
    if row is None:
        raise NotFoundError(f"no job {job_id!r}")
    require_owner(row.owner_key_id, key, f"job {job_id!r}")
    return row


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobOut,
    responses={
        401: {"description": "No API key, or not a live one"},
        403: {"description": "The key lacks scope jobs:write"},
        409: {"description": "The Idempotency-Key was used for a different job"},
        422: {"description": "The inner request is invalid (pointers under /request)"},
        503: {"description": "The job executor is not running"},
    },
)
def submit_job(
    body: Annotated[JobIn, Body(openapi_examples=EXAMPLES)],
    request: Request,
    response: Response,
    lookups: LookupsDep,
    key: JobsWriteKey,
    idempotency_key: Annotated[
        str | None,
        Header(description="Same key and body: the same job; same key, other body: 409."),
    ] = None,
) -> JobOut:
    """Queue a sizing, capacity search or simulation (scope ``jobs:write``); 202 with
    ``Location``. Its answer, once ``succeeded``, is the synchronous endpoint's."""
    executor = _executor(request)
    ikey = _check_idempotency_key(idempotency_key)
    inner = body.request.model_dump(mode="json")
    manifests = isinstance(body, SizingJobIn) and body.manifests
    sha = _fingerprint(body.kind, inner, manifests=manifests)
    factory = request.app.state.sessionmaker
    if ikey is not None:
        with transaction(factory) as session:
            earlier = _replayed(JobRepository(session), key, ikey, sha)
        if earlier is not None:
            return _replay(response, earlier)
    try:
        inputs = prepare(body.kind, body.request, lookups, manifests=manifests)
    except (ApiError, PlanningError, ReplicaError) as exc:
        raise _RequestProblemError(problem_of(exc)) from None
    row = _queued_row(key, body.kind, inner, sha, ikey)
    row.owner_process, row.lease_expires_at = executor.process_id, executor.lease_deadline()
    earlier = _insert_or_replay(factory, row, key, sha)
    if earlier is not None:  # another process stored the same Idempotency-Key first
        return _replay(response, earlier)
    executor.submit(row.id, body.kind, inner, inputs)
    response.headers["Location"] = f"/v1/jobs/{row.id}"
    return job_out(row)


_READ_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "No API key, or not a live one"},
    403: {"description": "The job belongs to another key (owner or admin only)"},
    404: {"description": "No such job"},
}


@router.get("", response_model=Page[JobSummary], responses={401: _READ_RESPONSES[401]})
def list_jobs(
    session: SessionDep,
    key: ReaderKey,
    page: PageDep,
    state: Annotated[JobState | None, Query(description="Only jobs in this state.")] = None,
) -> Page[JobSummary]:
    """The caller's jobs, newest first."""
    rows, total = JobRepository(session).page(
        owner_key_id=key.id, state=state, offset=page.offset, limit=page.limit
    )
    return page.page([JobSummary.model_validate(r) for r in rows], total)


@router.get("/{job_id}", response_model=JobOut, responses=_READ_RESPONSES)
def get_job(job_id: str, session: SessionDep, key: ReaderKey) -> JobOut:
    """A job's state, progress, times, and its result or problem once finished."""
    return job_out(_load(JobRepository(session), job_id, key))


@router.delete(
    "/{job_id}",
    response_model=JobOut,
    responses=_READ_RESPONSES | {409: {"description": "The job already succeeded or failed"}},
)
def cancel_job(job_id: str, request: Request, key: ReaderKey) -> JobOut:
    """Cancel a job: a queued one never starts, a running one is stopped. A job that already
    succeeded or failed is a 409; cancelling a cancelled job changes nothing."""
    with transaction(request.app.state.sessionmaker) as session:
        repo = JobRepository(session)
        row = _load(repo, job_id, key)
        if row.state in {"succeeded", "failed"}:
            raise ConflictError(f"job {job_id!r} already {row.state}", state=row.state)
        if row.state != "cancelled":
            repo.finish(job_id, state="cancelled")
    jobs = getattr(request.app.state, "jobs", None)
    if isinstance(jobs, JobExecutor):
        jobs.cancel(job_id)
    with transaction(request.app.state.sessionmaker) as session:
        return job_out(_load(JobRepository(session), job_id, key))
