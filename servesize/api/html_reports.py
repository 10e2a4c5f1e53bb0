"""``?format=html`` (or ``Accept: text/html``) on the planning endpoints: the answer as one
self-contained HTML report (:mod:`servesize.html_report`) instead of JSON.

A pure ASGI middleware, so that the handlers stay as they are: it keeps the request body, lets
the endpoint answer as usual, and turns a 2xx JSON answer into the report; errors stay
``application/problem+json``. Headers (``X-Request-ID``, ``Location``, rate limits) are kept.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servesize.html_report import REPORT_CSP, render_report

REPORT_PATHS = {
    "/v1/memory": "memory",
    "/v1/slo/capacity": "capacity",
    "/v1/simulate": "simulate",
    "/v1/sizing": "sizing",
}
"""Endpoint → planner-page section its report draws."""


def wants_html(scope: Scope) -> bool:
    """``format=html`` in the query, or an ``Accept`` that names ``text/html`` and no JSON."""
    query: dict[str, list[str]] = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("format"):
        return query["format"][-1] == "html"
    accept = ",".join(
        value.decode("latin-1").lower() for key, value in scope["headers"] if key == b"accept"
    )
    return "text/html" in accept and "json" not in accept


class HtmlReportMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = REPORT_PATHS.get(scope.get("path", "")) if scope["type"] == "http" else None
        if kind is None or scope["method"] != "POST" or not wants_html(scope):
            await self.app(scope, receive, send)
            return
        request_body: list[bytes] = []
        start: Message | None = None
        response_body: list[bytes] = []

        async def keep_request(*_: Any) -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request_body.append(message.get("body", b""))
            return message

        async def hold_response(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            response_body.append(message.get("body", b""))
            if not message.get("more_body", False):
                await _answer(send, kind, start, b"".join(request_body), b"".join(response_body))

        await self.app(scope, keep_request, hold_response)


def _is_json_success(start: Message) -> bool:
    content_type = dict(start.get("headers", [])).get(b"content-type", b"")
    return 200 <= int(start["status"]) < 300 and content_type.startswith(b"application/json")


async def _answer(send: Send, kind: str, start: Message, request: bytes, answer: bytes) -> None:
    """The report for a 2xx JSON answer; anything else as it was."""
    if not _is_json_success(start):
        await send(start)
        await send({"type": "http.response.body", "body": answer})
        return
    page = render_report(kind, json.loads(request), json.loads(answer)).encode()
    dropped = {b"content-type", b"content-length", b"etag"}
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in dropped]
    headers += [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(page)).encode()),
        (b"content-security-policy", REPORT_CSP.encode()),
    ]
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": page})
