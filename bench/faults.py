"""Fault bench: acknowledged writes survive a database restart and a killed server.

``python -m bench.faults [--restarts 2] [--outage-s 2] [--uploaders 4] [--kill-after-s 3]``

1. **PostgreSQL restarts.** An own PostgreSQL cluster (``initdb``/``pg_ctl`` from
   ``/usr/lib/postgresql/*/bin`` or ``PG_BIN``) serves ``servesize serve`` while uploaders post
   measurements (each with its own ``Idempotency-Key``) without pause. The cluster is stopped
   (``pg_ctl stop -m fast``), left down for ``outage_s`` and started again, ``restarts`` times.
   Checked: every upload answered 201 is in the database afterwards (0 acknowledged writes
   lost); every failure during the outage is a 503 ``application/problem+json``; ``/readyz``
   answers 503 while the database is down and 200 again after it is back, with the same server
   process.
2. **kill -9 of the server (SQLite).** Uploaders post to ``servesize serve`` on a SQLite file;
   after ``kill_after_s`` the server gets SIGKILL. Checked: ``PRAGMA integrity_check`` is ``ok``,
   every acknowledged upload is stored, every stored measurement is whole (its payload parses
   and holds every GEMM row sent), and a restarted server is ready and accepts uploads.

Prints the figures and exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from bench.servers import Server, free_port, start_servesize
from servesize.db import migrate
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.models import HardwareMeasurement
from servesize.db.repository import ApiKeyRepository
from servesize.security import Scope

PROFILE = "h100-sxm"
GEMM_SHAPES = ((4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336))
GEMM_M = (1, 16, 256, 4096)
PROBLEM_TYPE = "application/problem+json"


def upload_body() -> dict[str, Any]:
    """One measurement: 16 GEMM rows at a flat 500 TFLOP/s (the content does not matter)."""
    rows = [
        {
            "dtype": "bf16",
            "m": m,
            "n": n,
            "k": k,
            "latency_s": 2 * m * n * k / 500e12,
            "achieved_tflop_per_s": 500.0,
        }
        for m in GEMM_M
        for n, k in GEMM_SHAPES
    ]
    return {
        "provenance": {
            "agent_version": "0.1.0",
            "method_version": 1,
            "host": "bench",
            "device": "cuda:0",
            "gpu_name": "NVIDIA H100 80GB HBM3",
            "measured_at": "2026-11-29T10:00:00Z",
        },
        "gemm": rows,
    }


def create_key(database_url: str) -> str:
    db_engine = create_db_engine(database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            name = f"bench-{uuid.uuid4().hex[:8]}"
            _, new = ApiKeyRepository(session).create(name=name, scopes=[Scope.PROFILES_WRITE])
            return new.token
    finally:
        db_engine.dispose()


@dataclass
class Uploads:
    """What the uploaders saw."""

    acknowledged: dict[str, int] = field(default_factory=dict)
    """Idempotency-Key -> measurement id, for every 201."""
    statuses: dict[str, int] = field(default_factory=dict)
    not_problem: list[str] = field(default_factory=list)
    """Failures that were not a problem+json document (status: content type)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, status: str) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1


def uploader(base_url: str, token: str, uploads: Uploads, stop: threading.Event) -> None:
    body = upload_body()
    headers = {"Authorization": f"Bearer {token}"}
    path = f"/v1/hardware/{PROFILE}/measurements"
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        while not stop.is_set():
            key = uuid.uuid4().hex
            try:
                response = client.post(path, json=body, headers=headers | {"Idempotency-Key": key})
            except httpx.HTTPError as exc:
                uploads.count(type(exc).__name__)
                time.sleep(0.05)
                continue
            uploads.count(str(response.status_code))
            if response.status_code == 201:
                with uploads.lock:
                    uploads.acknowledged[key] = int(response.json()["id"])
            else:
                kind = response.headers.get("content-type", "")
                if kind != PROBLEM_TYPE:
                    with uploads.lock:
                        uploads.not_problem.append(f"{response.status_code}: {kind}")
                time.sleep(0.05)


def start_uploaders(
    base_url: str, token: str, uploads: Uploads, n: int
) -> tuple[threading.Event, list[threading.Thread]]:
    stop = threading.Event()
    threads = [
        threading.Thread(target=uploader, args=(base_url, token, uploads, stop), daemon=True)
        for _ in range(n)
    ]
    for thread in threads:
        thread.start()
    return stop, threads


def stored_keys(database_url: str) -> dict[str, dict[str, Any]]:
    """Idempotency-Key -> payload of every stored measurement."""
    db_engine = create_db_engine(database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            rows = session.execute(
                select(HardwareMeasurement.idempotency_key, HardwareMeasurement.payload)
            ).all()
            return {str(k): dict(p) for k, p in rows}
    finally:
        db_engine.dispose()


def lost(uploads: Uploads, stored: dict[str, Any]) -> list[str]:
    return sorted(set(uploads.acknowledged) - set(stored))


# -- PostgreSQL ------------------------------------------------------------------------------


def pg_bin() -> Path | None:
    """The PostgreSQL server binaries: ``PG_BIN``, else the newest ``/usr/lib/postgresql/*``."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


class PgCluster:
    """A throw-away cluster in ``directory``, run as ``postgres`` when we are root (initdb
    refuses root)."""

    def __init__(self, binaries: Path, directory: Path) -> None:
        self.bin = binaries
        self.data = directory / "data"
        self.socket_dir = directory
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(directory, "postgres")

    def _run(self, *args: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_postgres else []
        subprocess.run(
            [*prefix, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1"
        log = str(self.socket_dir / "pg.log")
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start"
        )

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")


@dataclass
class RestartReport:
    uploads: Uploads
    lost: list[str]
    readyz_down: list[int]
    readyz_up: list[int]
    same_process: bool

    @property
    def ok(self) -> bool:
        return (
            not self.lost
            and not self.uploads.not_problem
            and all(s == 503 for s in self.readyz_down)
            and all(s == 200 for s in self.readyz_up)
            and self.same_process
            and bool(self.uploads.acknowledged)
        )


def readyz(base_url: str) -> int:
    try:
        return httpx.get(base_url + "/readyz", timeout=10.0).status_code
    except httpx.HTTPError:
        return -1


def wait_ready(base_url: str, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    status = readyz(base_url)
    while status != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
        status = readyz(base_url)
    return status


def postgres_restarts(
    *, restarts: int, outage_s: float, uploaders: int, between_s: float
) -> RestartReport:
    binaries = pg_bin()
    if binaries is None:
        raise FileNotFoundError("no PostgreSQL server binaries (set PG_BIN)")
    with tempfile.TemporaryDirectory() as tmp:
        cluster = PgCluster(binaries, Path(tmp))
        cluster.init()
        cluster.start()
        server: Server | None = None
        try:
            migrate.upgrade(cluster.url)
            token = create_key(cluster.url)
            server = start_servesize(cluster.url, env={"RATE_LIMIT_PER_MINUTE": "0"})
            server.wait_ready("/readyz")
            pid = server.process.pid
            uploads = Uploads()
            stop, threads = start_uploaders(server.base_url, token, uploads, uploaders)
            down: list[int] = []
            up: list[int] = []
            time.sleep(between_s)
            for _ in range(restarts):
                cluster.stop()
                time.sleep(outage_s / 2)
                down.append(readyz(server.base_url))
                time.sleep(outage_s / 2)
                cluster.start()
                up.append(wait_ready(server.base_url))
                time.sleep(between_s)
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            same = server.process.poll() is None and server.process.pid == pid
            stored = stored_keys(cluster.url)
        finally:
            if server is not None:
                server.stop()
            cluster.stop()
    return RestartReport(uploads, lost(uploads, stored), down, up, same)


# -- kill -9 on SQLite -----------------------------------------------------------------------


@dataclass
class KillReport:
    uploads: Uploads
    lost: list[str]
    integrity: str
    stored: int
    broken: list[str]
    ready_after: int
    upload_after: int

    @property
    def ok(self) -> bool:
        return (
            not self.lost
            and self.integrity == "ok"
            and not self.broken
            and self.ready_after == 200
            and self.upload_after == 201
            and bool(self.uploads.acknowledged)
        )


def whole(payload: dict[str, Any]) -> bool:
    """The stored payload holds every GEMM row sent, each with the latency sent."""
    sent = {(r["m"], r["n"], r["k"]): r["latency_s"] for r in upload_body()["gemm"]}
    rows = payload.get("gemm") or []
    got = {(r.get("m"), r.get("n"), r.get("k")): r.get("latency_s") for r in rows}
    return len(rows) == len(sent) and got == sent and "provenance" in payload


def kill_during_uploads(*, uploaders: int, kill_after_s: float) -> KillReport:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "servesize.db"
        url = f"sqlite:///{path}"
        migrate.upgrade(url)
        token = create_key(url)
        server = start_servesize(url, env={"RATE_LIMIT_PER_MINUTE": "0"})
        server.wait_ready("/readyz")
        uploads = Uploads()
        stop, threads = start_uploaders(server.base_url, token, uploads, uploaders)
        time.sleep(kill_after_s)
        server.kill()
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        with sqlite3.connect(path) as connection:
            integrity = str(connection.execute("PRAGMA integrity_check").fetchone()[0])
        stored = stored_keys(url)
        broken = sorted(k for k, payload in stored.items() if not whole(payload))
        again = start_servesize(url, env={"RATE_LIMIT_PER_MINUTE": "0"})
        try:
            again.wait_ready("/readyz")
            ready = readyz(again.base_url)
            response = httpx.post(
                f"{again.base_url}/v1/hardware/{PROFILE}/measurements",
                json=upload_body(),
                headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "after"},
                timeout=30.0,
            )
        finally:
            again.stop()
    return KillReport(
        uploads, lost(uploads, stored), integrity, len(stored), broken, ready, response.status_code
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--outage-s", type=float, default=2.0)
    parser.add_argument("--between-s", type=float, default=2.0)
    parser.add_argument("--uploaders", type=int, default=4)
    parser.add_argument("--kill-after-s", type=float, default=3.0)
    args = parser.parse_args(argv)
    failed = False

    if pg_bin() is None:
        print("postgres restarts: SKIPPED, no PostgreSQL server binaries (set PG_BIN)")
        failed = True
    else:
        r = postgres_restarts(
            restarts=args.restarts,
            outage_s=args.outage_s,
            uploaders=args.uploaders,
            between_s=args.between_s,
        )
        print(
            f"postgres restarts x{args.restarts} ({args.outage_s:g} s down each): "
            f"{len(r.uploads.acknowledged)} uploads acknowledged, {len(r.lost)} lost; "
            f"answers {dict(sorted(r.uploads.statuses.items()))}; "
            f"non-problem failures {len(r.uploads.not_problem)}; /readyz down {r.readyz_down}, "
            f"back {r.readyz_up}; same server process: {r.same_process} -> "
            f"{'ok' if r.ok else 'FAILED'}"
        )
        failed = failed or not r.ok

    k = kill_during_uploads(uploaders=args.uploaders, kill_after_s=args.kill_after_s)
    print(
        f"kill -9 during uploads (SQLite): {len(k.uploads.acknowledged)} acknowledged, "
        f"{len(k.lost)} lost, {k.stored} stored, {len(k.broken)} half-written; integrity "
        f"{k.integrity!r}; restarted server /readyz {k.ready_after}, upload {k.upload_after} -> "
        f"{'ok' if k.ok else 'FAILED'}"
    )
    failed = failed or not k.ok
    print(json.dumps({"ok": not failed}))
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
