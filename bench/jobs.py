"""A sweep as a job on 1 and 2 Celery worker processes against the synchronous endpoint.

``python -m bench.jobs`` runs one sweep — by default 2 models × 2 GPUs × 2 forecasts, 64
candidate configurations each (512 in all) with the best plan of each combination verified by
simulation — three ways in one run, each on a fresh application over a fresh SQLite file:

1. through ``POST /v1/sizing``, one combination after the other (what a client without jobs
   does);
2. as one ``sweep`` job on a ``servesize worker --concurrency 1``;
3. as the same job on a ``servesize worker --concurrency 2``.

It prints the wall time of each, the speed-up of two worker processes over one (target ≥ 1.8×
on 2 cores) and over the synchronous endpoint, the job overhead per task ((one-worker job wall
− synchronous wall) / tasks: broker, pickling, polling) and whether every row equals its
synchronous sizing. Then the embedded pool (no broker): the same sweep as a job with
``JOB_WORKERS`` 1 and 2, and one ``POST /v1/sizing`` alone against two at once on the pool
(``SYNC_POOL``; "about one each, not 2×": the pair's wall near one in-thread sizing's on 2
cores, where threads sharing one interpreter take two). The synchronous pass of the first
part runs in the request's thread (``SYNC_POOL=false``), as a service without the pool
would. Prints the load average. The broker is ``BROKER_URL`` (default
``redis://127.0.0.1:6379/0``); when it is unreachable only the synchronous pass runs. It
never fails on a timing.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from kombu import Connection

from servesize.api.app import create_app
from servesize.api.celery_jobs import make_celery
from servesize.api.routes.sweep_tasks import prepare_sweep
from servesize.db import migrate
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.repository import ApiKeyRepository
from servesize.schemas.sweep import SweepRequest
from servesize.security import Scope
from servesize.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen3-0.6B"]
GPUS = ["l40s", "h100-sxm"]
TRAFFIC = [
    {"rate_per_s": 4.0, "input_tokens": 512, "output_tokens": 128},
    {"rate_per_s": 12.0, "input_tokens": 512, "output_tokens": 128},
]
CANDIDATES: dict[str, Any] = {
    "tensor_parallel": [1, 2],
    "max_num_batched_tokens": [1024, 2048, 4096, 8192],
    "kv_cache_dtype": ["auto", "fp8"],
    "gpu_memory_utilization": [0.85, 0.9, 0.95, 0.98],
}
"""2 × 4 × 2 × 4 = 64 candidates per combination."""
LIMIT_S = 3600.0


def sweep(models: int) -> dict[str, Any]:
    return {
        "models": MODELS[:models],
        "hardware": GPUS,
        "traffic": TRAFFIC,
        "slos": [{"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}}],
        "candidates": CANDIDATES,
        "prices": {"l40s": 1.0, "h100-sxm": 2.5},
        "verify_top": 1,
    }


def _fresh_db() -> tuple[str, str]:
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    migrate.upgrade(url)
    engine = create_db_engine(url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            _, key = ApiKeyRepository(session).create(name="bench", scopes=[Scope.JOBS_WRITE])
    finally:
        engine.dispose()
    return url, key.token


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _clean(v) for k, v in value.items() if not k.endswith("elapsed_s") and k != "cached"
        }
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def synchronous(bodies: list[dict[str, Any]]) -> tuple[float, list[Any]]:
    url, _ = _fresh_db()
    settings = Settings(database_url=url, rate_limit_per_minute=0, sync_pool=False)
    with TestClient(create_app(settings)) as client:
        started = time.perf_counter()
        answers = [client.post("/v1/sizing", json=b) for b in bodies]
        wall_s = time.perf_counter() - started
    return wall_s, [a.json() if a.status_code == 200 else None for a in answers]


def _worker(broker: str, queue: str, concurrency: int, name: str) -> subprocess.Popen[bytes]:
    env = os.environ | {"BROKER_URL": broker, "JOB_QUEUE": queue, "C_FORCE_ROOT": "1"}
    env["PYTHONPATH"] = str(ROOT)
    argv = ["worker", "--concurrency", str(concurrency), "--name", name, "--loglevel", "ERROR"]
    process = subprocess.Popen(
        [sys.executable, "-m", "servesize", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    control = make_celery(Settings(broker_url=broker, job_queue=queue)).control
    deadline = time.monotonic() + 120
    while not control.ping(destination=[name], timeout=1.0):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"worker {name} did not start")
    return process


def as_job(body: dict[str, Any], broker: str, concurrency: int) -> tuple[float, dict[str, Any]]:
    queue = f"servesize-bench-{secrets.token_hex(4)}"
    name = f"bench{concurrency}@{queue}"
    worker = _worker(broker, queue, concurrency, name)
    url, token = _fresh_db()
    settings = Settings(
        database_url=url, rate_limit_per_minute=0, broker_url=broker, job_queue=queue
    )
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with TestClient(create_app(settings)) as client:
            started = time.perf_counter()
            job = client.post("/v1/jobs", json={"kind": "sweep", "request": body}, headers=headers)
            job_id = job.json()["id"]
            while job.json()["state"] in {"queued", "running"}:
                if time.perf_counter() - started > LIMIT_S:
                    raise RuntimeError("the sweep job did not finish")
                time.sleep(0.1)
                job = client.get(f"/v1/jobs/{job_id}", headers=headers)
            wall_s = time.perf_counter() - started
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    answer: dict[str, Any] = job.json()
    return wall_s, answer


def embedded_job(body: dict[str, Any], workers: int) -> tuple[float, dict[str, Any]]:
    """The sweep as a job on the embedded pool of ``workers`` processes (started first)."""
    url, token = _fresh_db()
    settings = Settings(database_url=url, rate_limit_per_minute=0, job_workers=workers)
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(settings)) as client:
        client.app.state.jobs.task_map()(abs, list(range(workers)))  # type: ignore[attr-defined]
        started = time.perf_counter()
        job = client.post("/v1/jobs", json={"kind": "sweep", "request": body}, headers=headers)
        job_id = job.json()["id"]
        while job.json()["state"] in {"queued", "running"}:
            time.sleep(0.1)
            job = client.get(f"/v1/jobs/{job_id}", headers=headers)
        return time.perf_counter() - started, job.json()


def concurrent_sizings(body: dict[str, Any]) -> tuple[float, float, bool]:
    """One ``/v1/sizing`` alone, then two at once, on the embedded pool (2 processes)."""
    url, _ = _fresh_db()
    settings = Settings(database_url=url, rate_limit_per_minute=0, job_workers=2)
    with TestClient(create_app(settings)) as client:
        client.app.state.jobs.task_map()(abs, [1, 2])  # type: ignore[attr-defined]
        other = body | {"traffic": body["traffic"] | {"seed": 1}}  # no cached answer
        third = body | {"traffic": body["traffic"] | {"seed": 2}}
        started = time.perf_counter()
        alone = client.post("/v1/sizing", json=body)
        alone_s = time.perf_counter() - started
        with ThreadPoolExecutor(2) as pool:
            started = time.perf_counter()
            pair = list(pool.map(lambda b: client.post("/v1/sizing", json=b), [other, third]))
            pair_s = time.perf_counter() - started
    ok = alone.status_code == 200 and all(p.status_code == 200 for p in pair)
    return alone_s, pair_s, ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=2, choices=(1, 2))
    parser.add_argument("--no-embedded", dest="embedded", action="store_false")
    parser.add_argument("--no-broker", dest="broker", action="store_false")
    args = parser.parse_args(sys.argv[1:] if __name__ == "__main__" else [])
    body = sweep(args.models)
    combos = len(body["models"]) * len(GPUS) * len(TRAFFIC)
    per = 1
    for values in CANDIDATES.values():
        per *= len(values)
    print(f"jobs: sweep of {combos} sizings × {per} candidates = {combos * per} candidates")
    print(f"  load before: {os.getloadavg()[0]:.2f} (1 min), cores {os.cpu_count()}")
    url, _ = _fresh_db()
    with TestClient(create_app(Settings(database_url=url))) as client:
        lookups = client.app.state.lookups  # type: ignore[attr-defined]
        inputs = prepare_sweep(SweepRequest.model_validate(body), lookups)  # the job's bodies
    sync_s, sync = synchronous(inputs.requests)
    print(f"  synchronous /v1/sizing, one after another: {sync_s:.1f} s")
    if args.embedded:
        embedded(body, inputs.requests[0], sync, sync_s)
    broker = os.environ.get("BROKER_URL") or "redis://127.0.0.1:6379/0"
    if not args.broker:
        return
    try:
        with Connection(broker, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        print(f"  broker {broker} unreachable ({type(exc).__name__}): worker passes skipped")
        return
    walls: dict[int, float] = {}
    for concurrency in (1, 2):
        wall_s, job = as_job(body, broker, concurrency)
        walls[concurrency] = wall_s
        rows = job["result"]["results"] if job["state"] == "succeeded" else []
        same = len(rows) == len(sync) and all(
            _clean(r["sizing"]) == _clean(s) for r, s in zip(rows, sync, strict=True)
        )
        print(
            f"  sweep job on {concurrency} worker process(es): {wall_s:.1f} s, "
            f"state {job['state']}, rows equal the synchronous sizings: {same}"
        )
    print(
        f"  speed-up 2 vs 1 worker processes: {walls[1] / walls[2]:.2f}× (target ≥ 1.8× on 2 "
        f"cores); 2 workers vs synchronous: {sync_s / walls[2]:.2f}×"
    )
    print(
        f"  job overhead per task (1-worker job − synchronous) / {combos}: "
        f"{(walls[1] - sync_s) / combos * 1000:.0f} ms"
    )


def embedded(body: dict[str, Any], one: dict[str, Any], sync: list[Any], sync_s: float) -> None:
    walls: dict[int, float] = {}
    for workers in (1, 2):
        wall_s, job = embedded_job(body, workers)
        walls[workers] = wall_s
        rows = job["result"]["results"] if job["state"] == "succeeded" else []
        same = len(rows) == len(sync) and all(
            _clean(r["sizing"]) == _clean(s) for r, s in zip(rows, sync, strict=True)
        )
        print(
            f"  embedded pool, sweep job on {workers} process(es): {wall_s:.1f} s, "
            f"state {job['state']}, rows equal the synchronous sizings: {same}"
        )
    print(
        f"  embedded speed-up 2 vs 1 processes: {walls[1] / walls[2]:.2f}×; "
        f"2 processes vs synchronous in-thread: {sync_s / walls[2]:.2f}×"
    )
    alone_s, pair_s, ok = concurrent_sizings(one)
    print(
        f"  /v1/sizing on the pool: one alone {alone_s:.1f} s, two at once {pair_s:.1f} s "
        f"(pair / single {pair_s / alone_s:.2f}; serial threads would be ~2 × the in-thread "
        f"single {sync_s / len(sync):.1f} s); all 200: {ok}"
    )
    print(f"  load after: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
