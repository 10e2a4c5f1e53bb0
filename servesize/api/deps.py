"""Dependencies shared by the routes, as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from servesize.api.errors import ForbiddenError, RateLimitedError, UnauthorizedError
from servesize.api.lookups import LookupCache
from servesize.api.ratelimit import RateLimits
from servesize.db.connection import session_scope, transaction
from servesize.db.models import ApiKey
from servesize.db.repository import ApiKeyRepository
from servesize.security import Scope, grants
from servesize.settings import Settings


async def get_app_settings(request: Request) -> Settings:
    settings = request.app.state.settings
    assert isinstance(settings, Settings)
    return settings


def get_session(request: Request) -> Iterator[Session]:
    yield from session_scope(request.app.state.sessionmaker)


async def get_lookups(request: Request) -> LookupCache:
    lookups = request.app.state.lookups
    assert isinstance(lookups, LookupCache)
    return lookups


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
LookupsDep = Annotated[LookupCache, Depends(get_lookups)]
# scope="function" (FastAPI >= 0.121.1): commit or roll back *before* the response is sent, so
# a failed commit becomes an error response instead of a 200 for data that was never saved.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def _secret_key(settings: Settings) -> bytes | None:
    return settings.secret_key.get_secret_value().encode() if settings.secret_key else None


def get_key_repository(session: SessionDep, settings: SettingsDep) -> ApiKeyRepository:
    return ApiKeyRepository(session, secret_key=_secret_key(settings))


KeyRepoDep = Annotated[ApiKeyRepository, Depends(get_key_repository)]


def _bearer_token(header: str) -> str | None:
    """The token of ``Bearer <token>``; ``None`` for any other shape."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _authenticate(request: Request, token: str, settings: Settings) -> ApiKey | None:
    """The live key ``token`` presents, looked up in a session of its own that is closed
    before the route runs (a request holds no connection while it waits or computes)."""
    with transaction(request.app.state.sessionmaker) as session:
        return ApiKeyRepository(session, secret_key=_secret_key(settings)).authenticate(token)


def _settle_rate_limit(request: Request, key: ApiKey | None) -> None:
    """Count the request against the verified key, or against the address when the key did
    not verify (:meth:`RateLimits.settle`); 429 when that is over its limit."""
    limits = getattr(request.app.state, "rate_limits", None)
    if not isinstance(limits, RateLimits):
        return
    state: dict[str, object] = request.scope.setdefault("state", {})
    refusal = limits.settle(state, key.key_id if key is not None else None)
    if refusal is not None:
        raise RateLimitedError(
            "too many requests; retry after the interval in Retry-After",
            retry_after_s=refusal.reset_s,
            policy=refusal.policy,
        )


async def optional_key(request: Request, settings: SettingsDep) -> ApiKey | None:
    """The key the request presents, if any; a presented key that is not live is a 401.

    Without an ``Authorization`` header this touches neither the database nor a thread.
    Counted for the rate limit only after this verdict: a key that does not verify is charged
    to the client address (and its failed-authentication budget), never to the key id it names.
    """
    header = request.headers.get("authorization")
    if header is None:
        return None
    token = _bearer_token(header)
    key = (
        await run_in_threadpool(_authenticate, request, token, settings)
        if token is not None
        else None
    )
    limits = getattr(request.app.state, "rate_limits", None)
    if isinstance(limits, RateLimits) and limits.shared:
        await run_in_threadpool(_settle_rate_limit, request, key)
    else:
        _settle_rate_limit(request, key)
    if token is None:
        raise UnauthorizedError("the Authorization header must read 'Bearer <key>'")
    if key is None:
        raise UnauthorizedError("the API key is unknown or revoked")
    request.state.api_key_id = key.key_id
    return key


OptionalKeyDep = Annotated[ApiKey | None, Depends(optional_key)]


def require_scope(scope: Scope) -> Callable[[ApiKey | None], Awaitable[ApiKey]]:
    """A dependency that admits only keys granting ``scope`` (401 without a key, else 403)."""

    async def dependency(key: OptionalKeyDep) -> ApiKey:
        if key is None:
            raise UnauthorizedError(f"this operation needs an API key with scope {scope.value!r}")
        if not grants(key.scopes, scope):
            raise ForbiddenError(
                f"the API key {key.name!r} lacks scope {scope.value!r}",
                required_scope=scope.value,
            )
        return key

    return dependency


async def read_access(key: OptionalKeyDep, settings: SettingsDep) -> None:
    """Reads are open unless ``READ_REQUIRES_KEY`` is set; then any live key will do."""
    if settings.read_requires_key and key is None:
        raise UnauthorizedError("reading needs an API key on this server")


ReadAccess = Depends(read_access)
AdminKey = Annotated[ApiKey, Depends(require_scope(Scope.ADMIN))]
ModelsWriteKey = Annotated[ApiKey, Depends(require_scope(Scope.MODELS_WRITE))]
ProfilesWriteKey = Annotated[ApiKey, Depends(require_scope(Scope.PROFILES_WRITE))]
PlansWriteKey = Annotated[ApiKey, Depends(require_scope(Scope.PLANS_WRITE))]
JobsWriteKey = Annotated[ApiKey, Depends(require_scope(Scope.JOBS_WRITE))]
TracesWriteKey = Annotated[ApiKey, Depends(require_scope(Scope.TRACES_WRITE))]
