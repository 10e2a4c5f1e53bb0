"""Loopback HTTP servers standing in for an OpenAI-compatible endpoint and for servesize.

Both run ``http.server.ThreadingHTTPServer`` on 127.0.0.1 in a background thread (one thread
per request), answer HTTP/1.0 (the connection closes after each response), and record what
they received. ``streaming_transport`` answers like the streaming server without sockets, on
the running event loop's clock (with :mod:`tests.agent.virtual_time`, its delays are exact).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import httpx2

Action = Literal["ok", "error", "stall"]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stopping: threading.Event

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up mid-response (a timeout test) is expected, not an error."""


@contextmanager
def _serve(handler: type[BaseHTTPRequestHandler], state: Any) -> Iterator[str]:
    bound = type(handler.__name__, (handler,), {"state": state})  # one state per server
    server = _Server(("127.0.0.1", 0), bound)
    server.stopping = threading.Event()
    state.stopping = server.stopping
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def _json_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null")


# --------------------------------------------------------------------------------------------
# OpenAI-compatible streaming endpoint
# --------------------------------------------------------------------------------------------


@dataclass
class StreamingState:
    """First text chunk ``first_token_s`` after the request arrives, then one every
    ``token_interval_s``; ``plan(i)`` decides what the i-th request (0-based) gets."""

    first_token_s: float = 0.050
    token_interval_s: float = 0.020
    tail_s: float = 0.0
    """Delay between the last text chunk and the usage chunk + ``[DONE]``."""
    prompt_tokens: int = 10
    """``usage.prompt_tokens`` the server reports."""
    stall_s: float = 5.0
    plan: Callable[[int], Action] = lambda index: "ok"
    bodies: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


def _text_event(index: int, *, chat: bool) -> bytes:
    choice = {"index": 0, "delta": {"content": f" t{index}"}} if chat else {"text": f" t{index}"}
    return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()


def _closing_events(tokens: int, prompt_tokens: int = 10) -> bytes:
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": tokens,
        "total_tokens": prompt_tokens + tokens,
    }
    return f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode()


PING = b": ping\n\n"
"""An SSE comment: clients must ignore it."""
ERROR_BODY = {"error": {"message": "injected failure"}}


class _StreamingHandler(_QuietHandler):
    state: StreamingState

    def do_POST(self) -> None:
        received = time.perf_counter()
        state = self.state
        body = self._json_body()
        with state.lock:
            index = len(state.bodies)
            state.bodies.append(body)
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self.send_error(404)
            return
        action = state.plan(index)
        try:
            if action == "error":
                payload = json.dumps(ERROR_BODY).encode()
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            if action == "stall":
                state.stopping.wait(state.stall_s)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(PING)
            tokens = int(body["max_tokens"])
            for j in range(tokens):
                due = received + state.first_token_s + j * state.token_interval_s
                time.sleep(max(0.0, due - time.perf_counter()))
                self.wfile.write(_text_event(j, chat=chat))
            time.sleep(state.tail_s)
            self.wfile.write(_closing_events(tokens, state.prompt_tokens))
        except (BrokenPipeError, ConnectionResetError):
            pass


@contextmanager
def streaming_server(state: StreamingState) -> Iterator[str]:
    """Base URL of a fake OpenAI-compatible server."""
    with _serve(_StreamingHandler, state) as url:
        yield url


def streaming_transport(state: StreamingState) -> httpx2.MockTransport:
    """The streaming server's answers without sockets: the first text chunk ``first_token_s``
    after the request, then one every ``token_interval_s``, timed with ``asyncio.sleep``."""

    async def handle(request: httpx2.Request) -> httpx2.Response:
        loop = asyncio.get_running_loop()
        received = loop.time()
        body = json.loads(request.content)
        index = len(state.bodies)
        state.bodies.append(body)
        if request.url.path not in ("/v1/completions", "/v1/chat/completions"):
            return httpx2.Response(404)
        action = state.plan(index)
        if action == "error":
            return httpx2.Response(500, json=ERROR_BODY)
        if action == "stall":
            await asyncio.sleep(state.stall_s)
            return httpx2.Response(200, content=b"")

        async def events() -> AsyncIterator[bytes]:
            yield PING
            tokens = int(body["max_tokens"])
            for j in range(tokens):
                due = received + state.first_token_s + j * state.token_interval_s
                await asyncio.sleep(max(0.0, due - loop.time()))
                yield _text_event(j, chat=request.url.path == "/v1/chat/completions")
            await asyncio.sleep(state.tail_s)
            yield _closing_events(tokens, state.prompt_tokens)

        headers = {"Content-Type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, content=events())

    return httpx2.MockTransport(handle)


# --------------------------------------------------------------------------------------------
# servesize measurement endpoint
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


@dataclass
class MeasurementState:
    """Answers ``script`` in order, then 201 ``{"id": "m-<n>"}``; keeps every request."""

    script: list[Answer] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _MeasurementHandler(_QuietHandler):
    state: MeasurementState

    def do_POST(self) -> None:
        state = self.state
        body = self._json_body()
        with state.lock:
            state.requests.append((self.path, dict(self.headers.items()), body))
            answer = (
                state.script.pop(0)
                if state.script
                else Answer(201, {"id": f"m-{len(state.requests)}"})
            )
        payload = json.dumps(answer.body).encode() if answer.body is not None else b""
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def measurement_server(state: MeasurementState) -> Iterator[str]:
    """Base URL of a fake servesize server."""
    with _serve(_MeasurementHandler, state) as url:
        yield url


def problem(status: int, detail: str, errors: list[dict[str, str]] | None = None) -> Answer:
    """An RFC 9457 problem answer shaped like the service's."""
    body: dict[str, Any] = {"type": "about:blank", "title": "Error", "status": status}
    body["detail"] = detail
    if errors is not None:
        body["errors"] = errors
    return Answer(status, body, content_type="application/problem+json")
