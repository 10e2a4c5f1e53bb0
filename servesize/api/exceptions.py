"""The API's exceptions, each knowing its HTTP status: plain Python, importable without the
server stack, so that the renderers shared with the command line (``performance_views``,
``simulate_views``, ``simulation_runner``, ``render``) run on the base install. The handlers
that turn them into problem documents are in :mod:`servesize.api.errors`.
"""

from __future__ import annotations

from typing import Any

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
]


class ApiError(Exception):
    """An error whose HTTP rendering is known where it is raised."""

    status = 500
    slug = "internal-error"

    def __init__(
        self,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers
        self.extensions = extensions


class BadRequestError(ApiError):
    status, slug = 400, "bad-request"


class UnauthorizedError(ApiError):
    status, slug = 401, "unauthorized"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": 'Bearer realm="servesize"'})


class ForbiddenError(ApiError):
    status, slug = 403, "forbidden"


class NotFoundError(ApiError):
    status, slug = 404, "not-found"


class ConflictError(ApiError):
    status, slug = 409, "conflict"


class RateLimitedError(ApiError):
    status, slug = 429, "rate-limited"

    def __init__(self, detail: str, *, retry_after_s: int, policy: str) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after_s)}, policy=policy)


class UnprocessableError(ApiError):
    """422 for input that parses but cannot be accepted; ``errors`` lists the fields."""

    status, slug = 422, "unprocessable"

    def __init__(self, detail: str, *, slug: str, errors: list[dict[str, str]]) -> None:
        super().__init__(detail, errors=errors)
        self.slug = slug


class SloInfeasibleError(ApiError):
    """422 ``slo-infeasible``: targets no load can meet: below what the deployment (or, in
    sizing, every candidate) achieves with no load at all, or a minimum throughput beyond one
    replica's saturation rate. ``errors`` points at each target, with the value that defeats it.
    """

    status, slug = 422, "slo-infeasible"

    def __init__(self, detail: str, *, errors: list[dict[str, Any]]) -> None:
        super().__init__(detail, errors=errors)


class PreconditionFailedError(ApiError):
    status, slug = 412, "precondition-failed"


class PreconditionRequiredError(ApiError):
    status, slug = 428, "precondition-required"
