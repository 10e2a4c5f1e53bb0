"""Pure ASGI middleware: request context (id, logs, metrics, security headers, last-resort 500),
rate limits and body guard."""

from __future__ import annotations

import contextlib
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servesize.api.input_limits import MAX_JSON_DEPTH, JsonTooDeepError, parse_strict_json
from servesize.api.logs import request_id_var
from servesize.api.metrics import HttpMetrics
from servesize.api.problems import problem_response
from servesize.api.ratelimit import (
    ADDRESS_KEY,
    DEFERRED_KEY,
    STATE_KEY,
    RateDecision,
    RateLimits,
)
from servesize.api.shared_state import StateStoreUnavailableError

_T = TypeVar("_T")

log = logging.getLogger("servesize.access")

REQUEST_ID_HEADER = "x-request-id"
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_BODY_METHODS = {"POST", "PUT", "PATCH"}
_JSON_TYPES = re.compile(r"^application/([a-z0-9.+-]+\+)?json$")
_OTHER_ACCEPTED_TYPES = {"multipart/form-data", "text/csv"}
SECURITY_HEADERS = ((b"x-content-type-options", b"nosniff"),)
"""Sent on every response: no content sniffing of JSON into HTML or script."""


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class RequestContextMiddleware:
    """Assign a request id, log one JSON line per request, record metrics, and turn any
    unhandled exception into a 500 problem with no internals in it."""

    def __init__(self, app: ASGIApp, *, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, REQUEST_ID_HEADER.encode())
        request_id = (
            incoming if incoming and _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        )
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                headers.extend(SECURITY_HEADERS)
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unhandled error", extra={"path": scope.get("path")})
            if response_started:
                raise
            response = problem_response(
                500,
                "internal-error",
                "the server failed to handle the request; quote the request id when reporting it",
                instance=scope.get("path"),
                request_id=request_id,
            )
            await response(scope, receive, send_with_id)
        finally:
            duration_s = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", None) or "<unmatched>"
            self.metrics.observe(
                method=scope["method"], route=template, status=status, duration_s=duration_s
            )
            if log.isEnabledFor(logging.INFO):  # no record built when the level drops it
                log.info(
                    "request",
                    extra={
                        "method": scope["method"],
                        "path": scope.get("path"),
                        "route": template,
                        "status": status,
                        "duration_ms": round(duration_s * 1000, 3),
                    },
                )
            request_id_var.reset(token)


def rate_limit_headers(limits: RateLimits, state: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    """``RateLimit-Policy`` and, once the request was counted, ``RateLimit``."""
    policy = limits.policy_header()
    if policy is None:
        return []
    headers = [(b"ratelimit-policy", policy.encode())]
    decision = state.get(STATE_KEY)
    if isinstance(decision, RateDecision):
        headers.append((b"ratelimit", decision.header().encode()))
    return headers


class RateLimitMiddleware:
    """Count ``/v1`` requests (see :mod:`servesize.api.ratelimit` for who is counted) and
    refuse those over a limit with a 429 problem and ``Retry-After``.

    A request without ``Authorization`` is counted here, against its address. One that presents
    a key is counted by authentication (``servesize.api.deps.optional_key``), against the key
    when it verifies and against the address when not; if its address has spent its failure
    budget it is refused here, before any key lookup. A route that never authenticates leaves
    the request to be counted here, against the address, when it ends.
    """

    def __init__(self, app: ASGIApp, *, limits: RateLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1"):
            await self.app(scope, receive, send)
            return
        limits = self.limits
        state: dict[str, Any] = scope.setdefault("state", {})
        address = limits.address(scope)
        state[ADDRESS_KEY] = address

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(rate_limit_headers(limits, state))
                message = {**message, "headers": headers}
            await send(message)

        try:
            refusal = await _call(limits, self._admit, scope, address, state)
        except StateStoreUnavailableError as exc:
            await _unavailable_response(scope.get("path"), exc)(scope, receive, send)
            return
        if refusal is not None:
            state[STATE_KEY] = refusal
            await rate_limited_response(scope.get("path"), refusal)(
                scope, receive, send_with_limits
            )
            return
        await self.app(scope, receive, send_with_limits)
        if state.get(DEFERRED_KEY):
            # Presented a key nobody checked; the response is sent, an outage only logged.
            with contextlib.suppress(StateStoreUnavailableError):
                await _call(limits, limits.count_address, address)

    def _admit(self, scope: Scope, address: str, state: dict[str, Any]) -> RateDecision | None:
        """Count a request without a key against its address; check the failure budget of one
        that presents a key. The refusal, if any."""
        limits = self.limits
        if _header(scope, b"authorization") is not None:
            refusal = limits.failures_spent(address)
            state[DEFERRED_KEY] = refusal is None
            return refusal
        decision = limits.count_address(address)
        state[STATE_KEY] = decision
        return decision if decision is not None and not decision.allowed else None


async def _call(limits: RateLimits, function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)``, on a worker thread when the limits count in a shared store (a
    database or Redis round trip must not stall the event loop)."""
    if limits.shared:
        return await run_in_threadpool(function, *args)
    return function(*args)


def _unavailable_response(path: str | None, exc: StateStoreUnavailableError) -> Any:
    return problem_response(
        exc.status, exc.slug, exc.detail, instance=path, headers=exc.headers, **exc.extensions
    )


def rate_limited_response(path: str | None, decision: RateDecision) -> Any:
    detail = (
        "too many failed authentications from this address; retry after the interval in Retry-After"
        if decision.policy != "requests"
        else "too many requests; retry after the interval in Retry-After"
    )
    return problem_response(
        429,
        "rate-limited",
        detail,
        instance=path,
        headers={"Retry-After": str(decision.reset_s)},
        policy=decision.policy,
    )


class BodyGuardMiddleware:
    """Enforce the body-size limit (413), the media type (415) and strict JSON (400: malformed,
    NaN/Infinity, which RFC 8259 does not allow, or nested deeper than ``MAX_JSON_DEPTH``)."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return

        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)

        if body:
            media_type = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
            if _JSON_TYPES.match(media_type):
                try:
                    parse_strict_json(body)
                except JsonTooDeepError as exc:
                    await problem_response(
                        400,
                        "json-too-deep",
                        str(exc),
                        instance=path,
                        max_depth=MAX_JSON_DEPTH,
                        errors=[{"location": "body", "pointer": exc.pointer, "detail": str(exc)}],
                    )(scope, receive, send)
                    return
                except ValueError as exc:
                    detail = (
                        str(exc)
                        if "not valid JSON" in str(exc)
                        else f"the body is not valid JSON: {exc}"
                    )
                    await problem_response(400, "malformed-json", detail, instance=path)(
                        scope, receive, send
                    )
                    return
            elif media_type not in _OTHER_ACCEPTED_TYPES:
                await problem_response(
                    415,
                    "unsupported-media-type",
                    f"content type {media_type or '(none)'!r} is not accepted; "
                    "send application/json",
                    instance=path,
                )(scope, receive, send)
                return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await problem_response(
            413,
            "body-too-large",
            f"the request body exceeds the limit of {self.max_body_bytes} bytes",
            instance=scope.get("path"),
            max_body_bytes=self.max_body_bytes,
        )(scope, receive, send)
