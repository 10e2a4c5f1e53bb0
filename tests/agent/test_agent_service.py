"""The agent against the real service, served by uvicorn on loopback (real HTTP, both databases).

The end-to-end path: ``servesize-agent bench --device cpu --quick --upload ...``
stores a measurement that ``GET /v1/hardware/{id}`` then reports.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest
import uvicorn
from typer.testing import CliRunner

from servesize.agent.cli import app
from servesize.agent.probes import host_memory_bytes
from servesize.agent.upload import SavedMeasurement
from servesize.api.app import create_app
from servesize.security import Scope
from servesize.settings import Settings

STARTUP_LIMIT_S = 300.0
REQUEST_TIMEOUT_S = 120.0
"""Per-request bound for the test's own calls (httpx2's default, 5 s, is reached on a loaded
machine)."""


@pytest.fixture
def live_url(settings: Settings) -> Iterator[str]:
    """The app on a free loopback port for the duration of one test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run)
    thread.start()
    # A bound only a hung server reaches (start-up takes well under a second when idle).
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped while starting"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_LIMIT_S)


def _create_cpu_profile(url: str, admin_key: str) -> None:
    # The CPU's own figures are far below these generous peaks, so nothing is implausible;
    # memory equals what the CPU probe reports, so the identity check passes.
    profile: dict[str, object] = {
        "id": "cpu-host",
        "vendor": "Generic",
        "name": "CPU host",
        "memory_bytes": host_memory_bytes(),
        "memory_bandwidth_bytes_per_s": 10_000_000_000_000,
        "peak_tflop_per_s": {"fp32": 1000.0},
        "identity_tokens": [],
    }
    created = httpx2.post(
        f"{url}/v1/hardware",
        json=profile,
        headers={"Authorization": f"Bearer {admin_key}"},
        timeout=REQUEST_TIMEOUT_S,
    )
    assert created.status_code == 201, created.text


def test_cpu_bench_upload_is_stored_once(
    live_url: str, create_key: Callable[..., str], tmp_path: Path
) -> None:
    _create_cpu_profile(live_url, create_key(Scope.ADMIN, name="admin"))
    writer = create_key(Scope.PROFILES_WRITE)
    out = tmp_path / "cpu.json"
    runner = CliRunner()

    bench = runner.invoke(
        app,
        ["bench", "--device", "cpu", "--quick", "--out", str(out),
         "--upload", live_url, "--token", writer, "--profile", "cpu-host"],
    )  # fmt: skip
    assert bench.exit_code == 0, bench.output
    assert "uploaded: measurement" in bench.output
    resent = runner.invoke(app, ["upload", str(out), "--url", live_url, "--token", writer])
    assert resent.exit_code == 0, resent.output
    assert "idempotent replay" in resent.output

    history = httpx2.get(
        f"{live_url}/v1/hardware/cpu-host/measurements", timeout=REQUEST_TIMEOUT_S
    ).json()
    assert history["total"] == 1
    saved = SavedMeasurement.load(out)
    stored = httpx2.get(
        f"{live_url}/v1/hardware/cpu-host/measurements/{history['items'][0]['id']}",
        timeout=REQUEST_TIMEOUT_S,
    )
    assert stored.json()["payload"] == saved.payload.model_dump(mode="json")


def test_wrong_scope_and_wrong_device_are_refused_without_retry(
    live_url: str, create_key: Callable[..., str], tmp_path: Path
) -> None:
    out = tmp_path / "cpu.json"
    runner = CliRunner()
    assert (
        runner.invoke(app, ["bench", "--device", "cpu", "--quick", "--out", str(out)]).exit_code
        == 0
    )
    models_only = create_key(Scope.MODELS_WRITE)
    writer = create_key(Scope.PROFILES_WRITE)

    no_scope = runner.invoke(
        app,
        ["upload", str(out), "--url", live_url, "--token", models_only, "--profile", "h100-sxm"],
    )
    assert no_scope.exit_code == 1
    assert "HTTP 403" in no_scope.output
    # A CPU is not an H100: the service names the field that does not match.
    wrong_device = runner.invoke(
        app, ["upload", str(out), "--url", live_url, "--token", writer, "--profile", "h100-sxm"]
    )
    assert wrong_device.exit_code == 1
    assert "HTTP 422" in wrong_device.output
    assert "/provenance/gpu_name" in wrong_device.output
    listed = httpx2.get(f"{live_url}/v1/hardware/h100-sxm/measurements", timeout=REQUEST_TIMEOUT_S)
    assert listed.json()["total"] == 0
