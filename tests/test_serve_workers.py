"""``servesize serve --workers 2`` as a real process tree on a free port: the two uvicorn
workers share the rate limit, the sizing answers and the jobs (through the database, and
through Redis), ``/metrics`` sums both, and a job whose process is killed is reported failed
with a reason. Which worker served a request is read from its JSON log line (``pid``).

Every wait polls to a hang guard; no duration is asserted."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from servesize.api.jobs import INTERRUPTED_REASON
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.repository import ApiKeyRepository, JobRepository
from servesize.security import Scope
from tests.api.test_jobs import SIZING, open_loop
from tests.backends_redis import REDIS_TEST_URL, redis_prefix

LIMIT_PER_MINUTE = 60
HANG_GUARD_S = 180.0
"""How long a poll waits before the test fails as hung (not a speed assertion)."""
MEDIUM_SIMULATE: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "hardware": "h100-sxm",
    "traffic": open_loop(40.0, 20_000, warmup_requests=0),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    base: str
    database_url: str
    log: Path
    process: subprocess.Popen[bytes]

    def entries(self) -> list[dict[str, Any]]:
        entries = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                entries.append(json.loads(line))
        return entries

    def pids_of(self, request_ids: set[str]) -> dict[str, int]:
        """The worker pid that served each request id (its access line)."""
        deadline = time.monotonic() + HANG_GUARD_S
        while True:
            found = {
                e["request_id"]: int(e["pid"])
                for e in self.entries()
                if e.get("logger") == "servesize.access" and e.get("request_id") in request_ids
            }
            if len(found) == len(request_ids) or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def new_key(self, *scopes: Scope) -> str:
        db_engine = create_db_engine(self.database_url)
        try:
            with transaction(make_sessionmaker(db_engine)) as session:
                _, new = ApiKeyRepository(session).create(name=uuid.uuid4().hex, scopes=scopes)
                return new.token
        finally:
            db_engine.dispose()

    def send(self, method: str, path: str, key: str, **kwargs: Any) -> tuple[httpx.Response, str]:
        """One request on a connection of its own (so either worker may accept it)."""
        request_id = uuid.uuid4().hex
        headers = {"Authorization": f"Bearer {key}", "X-Request-ID": request_id}
        with httpx.Client(base_url=self.base, timeout=HANG_GUARD_S) as http:
            return http.request(method, path, headers=headers, **kwargs), request_id


def _wait_started(served: Served) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        if served.process.poll() is not None:
            pytest.fail(f"serve exited ({served.process.returncode}): {served.log.read_text()}")
        started = {
            e["pid"]
            for e in served.entries()
            if e.get("message") == "Application startup complete."
        }
        if len(started) >= 2:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"two workers did not start: {served.log.read_text()}")
        time.sleep(0.1)


@pytest.fixture(scope="module", params=["database", "redis"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"workers-{request.param}")
    database_url = f"sqlite:///{tmp / 'serve.db'}"
    env = {
        k: v for k, v in os.environ.items() if k not in {"PROMETHEUS_MULTIPROC_DIR", "WORKERS"}
    } | {
        "DATABASE_URL": database_url,
        "RATE_LIMIT_PER_MINUTE": str(LIMIT_PER_MINUTE),
        "JOB_WORKERS": "1",
        "JOB_LEASE_S": "3",
        "LOG_LEVEL": "INFO",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / "metrics"),
    }
    prefixes = None
    if request.param == "redis":
        prefixes = redis_prefix()
        env |= {"REDIS_URL": REDIS_TEST_URL, "REDIS_KEY_PREFIX": next(prefixes)}
    port = _free_port()
    log = tmp / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "servesize", "serve", "--workers", "2", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: workers and pools end with it
        )
    served = Served(f"http://127.0.0.1:{port}", database_url, log, process)
    try:
        _wait_started(served)
        yield served
    finally:
        _stop(process)
        if prefixes is not None:
            next(prefixes, None)


def _stop(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # pool processes of a killed worker
    process.wait()


def _fresh_window() -> None:
    """Windows are aligned to Unix time: start early in one, so the burst stays inside it."""
    while time.time() % 60 > 20:
        time.sleep(0.2)


def test_the_workers_spend_one_rate_limit(served: Served) -> None:
    key = served.new_key(Scope.MODELS_WRITE)
    _fresh_window()
    sent = [served.send("GET", "/v1/models", key) for _ in range(LIMIT_PER_MINUTE + 1)]
    statuses = [r.status_code for r, _ in sent]
    assert statuses == [200] * LIMIT_PER_MINUTE + [429]
    assert sent[-1][0].json()["type"] == "urn:servesize:problem:rate-limited"
    pids = served.pids_of({rid for _, rid in sent})
    assert len(set(pids.values())) == 2  # both workers answered: one budget across them


def test_a_sizing_answer_of_one_worker_is_a_hit_in_the_other(served: Served) -> None:
    key = served.new_key(Scope.MODELS_WRITE)
    first, first_id = served.send("POST", "/v1/sizing", key, json=SIZING)
    assert first.status_code == 200, first.text
    computed_by = served.pids_of({first_id})[first_id]
    for _ in range(LIMIT_PER_MINUTE - 1):
        again, again_id = served.send("POST", "/v1/sizing", key, json=SIZING)
        assert again.status_code == 200, again.text
        assert again.json()["cached"] is True
        if served.pids_of({again_id})[again_id] != computed_by:
            assert again.json() | {"cached": first.json()["cached"]} == first.json()
            return
    pytest.fail("every request went to the worker that computed the answer")


def _requests_total(text: str, route: str) -> float:
    prefix = f'servesize_http_requests_total{{method="GET",route="{route}",status="200"}} '
    values = [float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]
    return sum(values)


def test_metrics_sum_the_requests_of_both_workers(served: Served) -> None:
    key = served.new_key(Scope.MODELS_WRITE)
    sent = [served.send("GET", "/v1/hardware", key) for _ in range(20)]
    assert all(r.status_code == 200 for r, _ in sent)
    assert len(set(served.pids_of({rid for _, rid in sent}).values())) == 2
    for _ in range(4):  # whichever worker answers the scrape, it counts all 20
        with httpx.Client(base_url=served.base) as http:
            scraped = http.get("/metrics")
        assert scraped.status_code == 200
        assert _requests_total(scraped.text, "/v1/hardware") == 20.0


def test_a_job_whose_worker_is_killed_fails_with_a_reason(served: Served) -> None:
    key = served.new_key(Scope.JOBS_WRITE)
    accepted, _ = served.send(
        "POST", "/v1/jobs", key, json={"kind": "simulate", "request": MEDIUM_SIMULATE}
    )
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["id"]
    db_engine = create_db_engine(served.database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            row = JobRepository(session).get(job_id)
            assert row is not None
            assert row.owner_process is not None
            owner_pid = int(row.owner_process.rsplit(":", 2)[1])
    finally:
        db_engine.dispose()
    os.kill(owner_pid, signal.SIGKILL)
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        job, _ = served.send("GET", f"/v1/jobs/{job_id}", key)
        assert job.status_code == 200, job.text
        if job.json()["state"] not in {"queued", "running"}:
            break
        assert time.monotonic() < deadline, "the job of a killed worker stayed unfinished"
        time.sleep(1.0)  # within the key's rate limit
    assert job.json()["state"] == "failed"
    assert job.json()["error"]["reason"] == INTERRUPTED_REASON
    assert job.json()["result"] is None


@pytest.mark.parametrize(
    ("env", "refusal"),
    [
        ({"STATE_STORE": "memory"}, "STATE_STORE database or redis"),
        ({"DATABASE_URL": "sqlite:///:memory:"}, "not SQLite :memory:"),
    ],
)
def test_workers_refuse_state_that_one_process_keeps(
    env: dict[str, str], refusal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from servesize.cli import app
    from servesize.settings import get_settings

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("REDIS_URL", raising=False)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["serve", "--workers", "2", "--no-migrate"])
    finally:
        get_settings.cache_clear()
        os.environ.pop("WORKERS", None)  # serve --workers sets it for its workers
    assert result.exit_code == 2
    assert refusal in result.output
