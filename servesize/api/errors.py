"""Exceptions that know their HTTP status, and the handlers that render every error as a problem.

ApiError                 carries status, slug, detail, extensions, headers
 ├─ BadRequestError      400
 ├─ UnauthorizedError    401 (WWW-Authenticate: Bearer)
 ├─ ForbiddenError       403
 ├─ NotFoundError        404
 ├─ ConflictError        409
 ├─ RateLimitedError     429 (Retry-After)
 ├─ UnprocessableError   422 (with ``errors[]``)
 ├─ SloInfeasibleError   422 an SLO no load (or no candidate) meets
 └─ PreconditionFailedError 412 / 428

The classes are defined in :mod:`servesize.api.exceptions` (no server stack) and re-exported
here. Core errors (``servesize.core.errors``) are mapped here; the core knows nothing of HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm.exc import StaleDataError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from servesize.api.exceptions import (
    ApiError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PreconditionFailedError,
    PreconditionRequiredError,
    RateLimitedError,
    SloInfeasibleError,
    UnauthorizedError,
    UnprocessableError,
)
from servesize.api.problems import problem_response
from servesize.core.errors import (
    InsufficientMemoryError,
    InvalidArchitectureError,
    PlanningError,
    UnstableQueueError,
)
from servesize.core.memory import InvalidDeploymentError
from servesize.core.replica import (
    MissingInterconnectBandwidthError,
    ReplicaError,
    RequestTooLongError,
    SimulationTooLargeError,
    WholePromptOverflowError,
)

__all__ = [
    "ApiError",
    "BadRequestError",
    "ConflictError",
    "ForbiddenError",
    "NotFoundError",
    "PreconditionFailedError",
    "PreconditionRequiredError",
    "RateLimitedError",
    "SloInfeasibleError",
    "UnauthorizedError",
    "UnprocessableError",
    "install_error_handlers",
    "json_pointer",
    "validation_errors",
]

log = logging.getLogger("servesize.api")


def json_pointer(parts: Sequence[str | int]) -> str:
    """RFC 6901 pointer for a path of keys and indexes (``~`` and ``/`` escaped)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _document_path(parts: Sequence[str | int], document: Any) -> list[str | int]:
    """The parts of a pydantic error location that exist in the submitted document.

    A tagged union adds its tag to the location (``("mmc", "percentiles")`` for a body
    ``{"model": "mmc", ...}``), which is not a place in the JSON; such a step is dropped when
    the document has no key of that name there. The last part is kept even when absent (a
    missing field is named by where it belongs).
    """
    path: list[str | int] = []
    node = document
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, dict):
            if part in node:
                path.append(part)
                node = node[part]
                continue
            if not last and isinstance(part, str):
                continue  # a union tag, not a key of the document
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
            continue
        path.append(part)
        node = None
    return path


def validation_errors(errors: Sequence[Any], body: Any = None) -> list[dict[str, Any]]:
    """Pydantic errors as ``{location, pointer, detail, type}``: one entry per failing field.

    With the submitted ``body``, pointers into it skip the tags pydantic adds for unions.
    """
    out: list[dict[str, Any]] = []
    for error in errors:
        loc = list(error.get("loc", ()))
        location = str(loc[0]) if loc else "body"
        parts = loc[1:]
        if error.get("type") in {"union_tag_invalid", "union_tag_not_found"}:
            # A bad or missing discriminator: point at the tag field itself.
            tag = str((error.get("ctx") or {}).get("discriminator", "")).strip("'\"")
            if tag:
                parts = [*parts, tag]
        if location == "body" and body is not None:
            parts = _document_path(parts, body)
        out.append(
            {
                "location": location,
                "pointer": json_pointer(parts),
                "detail": str(error.get("msg", "invalid value")),
                "type": str(error.get("type", "value_error")),
            }
        )
    return out


def _instance(request: Request) -> str:
    return request.url.path


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return problem_response(
        exc.status,
        exc.slug,
        exc.detail,
        instance=_instance(request),
        headers=exc.headers,
        **exc.extensions,
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    slug = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http-error")
    detail = exc.detail if isinstance(exc.detail, str) else "request failed"
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no resource at {request.url.path}"
    if exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return problem_response(
        exc.status_code, slug, detail, instance=_instance(request), headers=exc.headers
    )


async def _request_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = validation_errors(exc.errors(), getattr(exc, "body", None))
    fields = ", ".join(e["pointer"] or e["location"] for e in errors[:5])
    return problem_response(
        422,
        "validation-error",
        f"the request is invalid at {fields}",
        instance=_instance(request),
        errors=errors,
    )


async def _invalid_input(request: Request, exc: Exception) -> Response:
    """Core errors that carry ``FieldIssue``s: every field at fault, with its pointer."""
    issues = getattr(exc, "issues", ())
    slug = (
        "invalid-architecture"
        if isinstance(exc, InvalidArchitectureError)
        else "invalid-deployment"
    )
    errors = [{"location": "body", "pointer": i.field, "detail": i.problem} for i in issues]
    return problem_response(422, slug, str(exc), instance=_instance(request), errors=errors)


_PLANNING_SLUGS: tuple[tuple[type[PlanningError], str], ...] = (
    (InsufficientMemoryError, "insufficient-memory"),
    (UnstableQueueError, "unstable-queue"),
    (PlanningError, "planning-error"),
)


_PLANNING_POINTERS: tuple[tuple[type[PlanningError], str], ...] = (
    (InsufficientMemoryError, "/deployment"),
    (UnstableQueueError, "/arrival_rate_per_s"),
)
"""Where in the request the fix lies: the deployment (a larger GPU share, more GPUs, shorter
contexts) or the offered rate. Routes whose body nests these elsewhere raise their own error."""


async def _planning_error(request: Request, exc: Exception) -> Response:
    slug = next(s for kind, s in _PLANNING_SLUGS if isinstance(exc, kind))
    pointer = next((p for kind, p in _PLANNING_POINTERS if isinstance(exc, kind)), "")
    errors = [{"location": "body", "pointer": pointer, "detail": str(exc)}]
    return problem_response(422, slug, str(exc), instance=_instance(request), errors=errors)


_REPLICA_SLUGS: tuple[tuple[type[ReplicaError], str], ...] = (
    (MissingInterconnectBandwidthError, "missing-bandwidth"),
    (RequestTooLongError, "request-too-long"),
    (SimulationTooLargeError, "simulation-too-large"),
    (WholePromptOverflowError, "prompt-exceeds-budget"),
    (ReplicaError, "replica-error"),
)


async def _replica_error(request: Request, exc: Exception) -> Response:
    """A replica that cannot run as asked: 422 pointing at the field the core names."""
    assert isinstance(exc, ReplicaError)
    slug = next(s for kind, s in _REPLICA_SLUGS if isinstance(exc, kind))
    errors = [{"location": "body", "pointer": exc.field, "detail": exc.detail}]
    return problem_response(422, slug, exc.detail, instance=_instance(request), errors=errors)


async def _integrity_error(request: Request, exc: Exception) -> Response:
    # The SQL and its parameters never leave the server.
    log.info("integrity error: %s", type(exc).__name__)
    return problem_response(
        409, "conflict", "the write conflicts with stored data", instance=_instance(request)
    )


async def _stale_write(request: Request, exc: Exception) -> Response:
    return problem_response(
        412,
        "precondition-failed",
        "the resource changed while this request was being applied; fetch it and retry",
        instance=_instance(request),
    )


async def _database_unavailable(request: Request, exc: Exception) -> Response:
    """503 with Retry-After: the database is down or restarting (``OperationalError``) or
    every pooled connection stayed busy for ``DB_POOL_TIMEOUT_S``
    (``sqlalchemy.exc.TimeoutError``)."""
    log.error("database unavailable: %s", type(exc).__name__)
    return problem_response(
        503,
        "database-unavailable",
        "the database is unavailable; retry later",
        instance=_instance(request),
        headers={"Retry-After": "5"},
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(InvalidArchitectureError, _invalid_input)
    app.add_exception_handler(InvalidDeploymentError, _invalid_input)
    app.add_exception_handler(ReplicaError, _replica_error)
    app.add_exception_handler(PlanningError, _planning_error)
    app.add_exception_handler(IntegrityError, _integrity_error)
    app.add_exception_handler(StaleDataError, _stale_write)
    app.add_exception_handler(OperationalError, _database_unavailable)
    app.add_exception_handler(PoolTimeoutError, _database_unavailable)
