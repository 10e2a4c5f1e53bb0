"""``servesize serve`` as it really runs (uvicorn on a socket): no Server header, forwarded
headers not believed from an untrusted peer, every log line JSON with the request id."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from servesize.cli import admin
from servesize.settings import get_settings


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def restore_logging() -> Iterator[None]:
    names = ["", "uvicorn", "uvicorn.error", "uvicorn.access", "alembic", "sqlalchemy"]
    saved = {
        n: (
            logging.getLogger(n).handlers[:],
            logging.getLogger(n).level,
            logging.getLogger(n).propagate,
        )
        for n in names
    }
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def _serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[uvicorn.Server, str]:
    """Run the ``serve`` command; its ``uvicorn.run`` call starts a real server in a thread."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'serve.db'}")
    monkeypatch.setenv("RATE_LIMIT_PER_MINUTE", "3")
    get_settings.cache_clear()
    port = _free_port()
    servers: list[uvicorn.Server] = []

    def run(app: Any, **options: Any) -> None:
        servers.append(uvicorn.Server(uvicorn.Config(app, **options)))

    monkeypatch.setattr(uvicorn, "run", run)
    admin.serve(host="127.0.0.1", port=port, no_migrate=False)
    server = servers[0]
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def test_served_app_hides_server_trusts_no_forwarded_for_and_logs_json(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    restore_logging: None,
) -> None:
    server, base = _serve(monkeypatch, tmp_path)
    try:
        with httpx.Client(base_url=base) as http:
            live = http.get("/livez", headers={"X-Request-ID": "probe-1"})
            assert live.status_code == 200
            assert "server" not in live.headers
            assert live.headers["x-content-type-options"] == "nosniff"
            # The peer is 127.0.0.1; rotating X-Forwarded-For must not give a fresh budget.
            statuses = [
                http.get("/v1/models", headers={"X-Forwarded-For": f"192.0.2.{i}"}).status_code
                for i in range(4)
            ]
            assert statuses == [200, 200, 200, 429]
    finally:
        server.should_exit = True
        time.sleep(0.3)
        get_settings.cache_clear()
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is JSON
    loggers = {e["logger"] for e in entries}
    assert "alembic.runtime.migration" in loggers  # the migrations serve applied
    assert any(e["logger"].startswith("uvicorn") for e in entries)
    probe = [e for e in entries if e.get("path") == "/livez"]
    assert probe
    assert probe[0]["request_id"] == "probe-1"
