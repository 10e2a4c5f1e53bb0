"""Pure ASGI middleware: request context (id, logs, metrics, last-resort 500) and body guard."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servesize.api.input_limits import MAX_JSON_DEPTH, JsonTooDeepError, parse_strict_json
from servesize.api.logs import request_id_var
from servesize.api.metrics import HttpMetrics
from servesize.api.problems import problem_response
from servesize.api.ratelimit import RateLimiter

log = logging.getLogger("servesize.access")

REQUEST_ID_HEADER = "x-request-id"
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_BODY_METHODS = {"POST", "PUT", "PATCH"}
_JSON_TYPES = re.compile(r"^application/([a-z0-9.+-]+\+)?json$")
_OTHER_ACCEPTED_TYPES = {"multipart/form-data", "text/csv"}


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


class BodyGuardMiddleware:
    """Enforce the body-size limit (413), the media type (415), strict JSON (400: malformed,
    NaN/Infinity, which RFC 8259 does not allow, or nested deeper than ``MAX_JSON_DEPTH``),
    and the rate limit (429)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        rate_limiter: RateLimiter | None,
        client_key: Callable[[Scope], str],
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.rate_limiter = rate_limiter
        self.client_key = client_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if self.rate_limiter is not None and path.startswith("/v1"):
            retry_after_s = self.rate_limiter.hit(self.client_key(scope))
            if retry_after_s is not None:
                await problem_response(
                    429,
                    "rate-limited",
                    "too many requests; retry after the interval in Retry-After",
                    instance=path,
                    headers={"Retry-After": str(retry_after_s)},
                )(scope, receive, send)
                return
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
