"""Start servers the way production starts them, for the load and fault benches.

``servesize serve`` (migrations, then ``uvicorn.run`` of the application in one process) and a
bare FastAPI endpoint served by the same ``uvicorn.run`` call (:mod:`bench.bare_app`), each a
child process on a free local port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

STARTUP_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A child server process and where it listens."""

    process: subprocess.Popen[bytes]
    base_url: str
    log: IO[bytes] | None

    def wait_ready(self, path: str, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}")
            try:
                if httpx.get(self.base_url + path, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.base_url}{path} did not answer 200 in {timeout_s:g} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.log is not None:
            self.log.close()

    def kill(self) -> None:
        """``kill -9``: no shutdown of any kind."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def start_servesize(
    database_url: str, *, log_path: Path | None = None, env: dict[str, str] | None = None
) -> Server:
    """``servesize serve`` on a free port (migrations applied first, as in production)."""
    port = free_port()
    log = log_path.open("ab") if log_path is not None else None
    process = subprocess.Popen(
        [sys.executable, "-m", "servesize", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=_env({"DATABASE_URL": database_url} | (env or {})),
        stdout=log or subprocess.DEVNULL,
        stderr=log or subprocess.DEVNULL,
    )
    return Server(process=process, base_url=f"http://127.0.0.1:{port}", log=log)


def start_bare() -> Server:
    """The bare FastAPI endpoint of :mod:`bench.bare_app`, served by ``uvicorn.run``."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.bare_app", str(port)],
        env=_env({}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return Server(process=process, base_url=f"http://127.0.0.1:{port}", log=None)
