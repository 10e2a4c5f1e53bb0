"""Jobs on a real broker and real ``servesize worker`` processes (SQLite only: workers never
open the database). The broker is ``BROKER_TEST_URL`` (default the machine's Redis,
``redis://127.0.0.1:6379/0``; ``amqp://guest:guest@127.0.0.1:5672//`` for RabbitMQ); with
``CI=true`` an unreachable broker fails these tests instead of skipping them. RabbitMQ is
checked with ``RESULT_BACKEND=redis://127.0.0.1:6379/0`` (the default ``rpc://`` backend
delivers states to the submitting process only, which the cancel test cannot read). Each run uses a
queue of its own, so other runs on the same broker do not take its tasks. Covered: a sweep and
a sizing (fanned out as piece tasks) on one worker, two and the synchronous endpoint, bit for
bit; progress of a capacity job; cancel; a pool process killed mid-task; an API restart during
jobs (re-attached); idempotent submission."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.result import AsyncResult
from fastapi.testclient import TestClient
from kombu import Connection

from servesize.api.celery_jobs import CeleryJobExecutor, make_celery
from servesize.security import Scope
from servesize.settings import Settings
from tests.api.sweep_bodies import small_sweep, without_timing
from tests.api.test_hardware import bearer
from tests.api.test_jobs import CAPACITY, POLL_LIMIT_S, submit, wait_for
from tests.api.test_sweep import check_rows_equal_sync
from tests.backends import ci_requires_postgres

BROKER_TEST_URL = os.environ.get("BROKER_TEST_URL", "redis://127.0.0.1:6379/0")
QUEUE = f"servesize-test-{secrets.token_hex(4)}"
FINISHED = {"succeeded", "failed", "cancelled"}
LONG_SWEEP: dict[str, Any] = {
    "models": ["meta-llama/Llama-3.1-8B"],
    "hardware": ["h100-sxm"],
    "traffic": [{"rate_per_s": 40.0, "input_tokens": 1024, "output_tokens": 256}],
    "slos": [{"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}}],
    "verify_top": 10,
}
"""One combination with ten verifying simulations: long enough to be cancelled or killed."""


def _settings() -> Settings:
    return Settings(broker_url=BROKER_TEST_URL, job_queue=QUEUE)


@pytest.fixture(scope="module")
def broker() -> str:
    try:
        with Connection(BROKER_TEST_URL, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        reason = f"broker at {BROKER_TEST_URL} is unreachable: {exc}"
        if ci_requires_postgres():
            pytest.fail(f"CI=true requires the broker: {reason}", pytrace=False)
        pytest.skip(reason)
    return BROKER_TEST_URL


class Worker:
    """A ``servesize worker`` subprocess with one pool process."""

    def __init__(self, name: str, log: Path) -> None:
        self.name = f"{name}@servesize-test"
        # C_FORCE_ROOT: Celery refuses pickled tasks as root unless told (CI runs as root).
        env = os.environ | {"BROKER_URL": BROKER_TEST_URL, "JOB_QUEUE": QUEUE, "C_FORCE_ROOT": "1"}
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        self.log = log
        argv = ["worker", "--concurrency", "1", "--name", self.name, "--loglevel", "WARNING"]
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "servesize", *argv], env=env, stdout=out, stderr=out
            )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + POLL_LIMIT_S
        with make_celery(_settings()) as app:
            while not app.control.ping(destination=[self.name], timeout=1.0):
                assert self.process.poll() is None, self.log.read_text()
                assert time.monotonic() < deadline, "the worker did not answer a ping"

    def pool_pids(self) -> list[int]:
        """The worker's pool processes (its children)."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(p) for p in path.read_text().split()]

    def processed(self) -> int:
        with make_celery(_settings()) as app:
            stats: dict[str, Any] = app.control.inspect([self.name], timeout=2.0).stats() or {}
        totals: dict[str, int] = stats.get(self.name, {}).get("total", {})
        return sum(totals.values())

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def workers(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Worker]]:
    """Two workers, started at once (so the machine pays their start-up once)."""
    logs = tmp_path_factory.mktemp("workers")
    started = [Worker(n, logs / f"{n}.log") for n in ("one", "two")]
    try:
        for w in started:
            w.wait_ready()
        yield started
    finally:
        for w in started:
            w.stop()


@pytest.fixture
def database_url(sqlite_template: Path, tmp_path: Path) -> str:
    """SQLite only: the broker, not the database, is what these tests exercise."""
    db = tmp_path / "servesize.db"
    shutil.copyfile(sqlite_template, db)
    return f"sqlite:///{db}"


@pytest.fixture
def broker_client(make_client: Callable[..., TestClient], broker: str) -> TestClient:
    return make_client(broker_url=broker, job_queue=QUEUE)


def finished_sweep(client: TestClient, key: str) -> dict[str, Any]:
    """The small sweep submitted and waited for."""
    job_id = submit(client, key, "sweep", small_sweep()).json()["id"]
    return wait_for(client, key, job_id, FINISHED)


def _pause(worker: Worker) -> None:
    """The worker stops consuming the queue (it keeps running; nothing is prefetched)."""
    with make_celery(_settings()) as app:
        replies = app.control.cancel_consumer(QUEUE, destination=[worker.name], reply=True)
    assert replies, "the worker did not confirm"


def _resume(worker: Worker) -> None:
    with make_celery(_settings()) as app:
        replies = app.control.add_consumer(QUEUE, destination=[worker.name], reply=True)
    assert replies, "the worker did not confirm"


def test_one_worker_two_workers_and_the_synchronous_endpoint_agree_bit_for_bit(
    broker_client: TestClient, workers: list[Worker], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    one, two = workers
    assert isinstance(broker_client.app.state.jobs, CeleryJobExecutor)  # type: ignore[attr-defined]
    _pause(two)
    try:
        before = one.processed()
        alone = wait_for(
            broker_client,
            key,
            submit(broker_client, key, "sweep", small_sweep()).json()["id"],
            FINISHED,
        )
        assert alone["state"] == "succeeded", alone["error"]
        assert one.processed() - before == 4
    finally:
        _resume(two)
    counts = [w.processed() for w in workers]
    both = wait_for(
        broker_client,
        key,
        submit(broker_client, key, "sweep", small_sweep()).json()["id"],
        FINISHED,
    )
    assert both["state"] == "succeeded", both["error"]
    shares = [w.processed() - c for w, c in zip(workers, counts, strict=True)]
    assert sum(shares) == 4
    assert alone["progress"]["done"] == both["progress"]["done"] == 4
    assert without_timing(alone["result"]) == without_timing(both["result"])
    check_rows_equal_sync(broker_client, both["result"])


def test_cancel_revokes_the_running_task(
    broker_client: TestClient, workers: list[Worker], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    job_id = submit(broker_client, key, "sweep", LONG_SWEEP).json()["id"]
    running = wait_for(broker_client, key, job_id, {"running"} | FINISHED)
    assert running["state"] == "running"
    assert running["progress"] == {"done": 0, "total": 1, "eta_s": None}
    cancelled = broker_client.delete(f"/v1/jobs/{job_id}", headers=bearer(key))
    assert cancelled.json()["state"] == "cancelled"
    deadline = time.monotonic() + POLL_LIMIT_S
    with make_celery(_settings()) as app:
        task: AsyncResult[Any] = AsyncResult(f"{job_id}.0", app=app)
        while (state := str(task.state)) != "REVOKED":  # terminated on its worker, not finished
            assert state != "SUCCESS"
            assert time.monotonic() < deadline, state
            time.sleep(0.2)
    after = wait_for(
        broker_client,
        key,
        submit(broker_client, key, "sweep", small_sweep()).json()["id"],
        FINISHED,
    )
    assert after["state"] == "succeeded"
    assert (
        broker_client.get(f"/v1/jobs/{job_id}", headers=bearer(key)).json()["state"] == "cancelled"
    )


def test_a_pool_process_killed_mid_task_fails_the_job_with_the_reason(
    broker_client: TestClient, workers: list[Worker], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    _pause(workers[1])  # the task goes to the first worker
    try:
        job_id = submit(broker_client, key, "sweep", LONG_SWEEP).json()["id"]
        assert wait_for(broker_client, key, job_id, {"running"} | FINISHED)["state"] == "running"
        (pid,) = workers[0].pool_pids()
        os.kill(pid, signal.SIGKILL)
        failed = wait_for(broker_client, key, job_id, FINISHED)
    finally:
        _resume(workers[1])
    assert failed["state"] == "failed"
    assert failed["error"]["type"] == "urn:servesize:problem:worker-failed"
    assert "WorkerLostError" in failed["error"]["detail"]
    assert failed["result"] is None
    # The worker replaced its pool process: the next job runs.
    after = wait_for(
        broker_client,
        key,
        submit(broker_client, key, "sweep", small_sweep()).json()["id"],
        FINISHED,
    )
    assert after["state"] == "succeeded"


def test_an_idempotent_resubmission_sends_no_second_set_of_tasks(
    broker_client: TestClient, workers: list[Worker], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    counts = sum(w.processed() for w in workers)
    first = submit(broker_client, key, "sweep", small_sweep(), **{"Idempotency-Key": "s-1"})
    again = submit(broker_client, key, "sweep", small_sweep(), **{"Idempotency-Key": "s-1"})
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    done = wait_for(broker_client, key, first.json()["id"], FINISHED)
    assert done["state"] == "succeeded"
    late = submit(broker_client, key, "sweep", small_sweep(), **{"Idempotency-Key": "s-1"})
    assert late.json()["id"] == first.json()["id"]
    assert late.json()["state"] == "succeeded"
    assert sum(w.processed() for w in workers) - counts == 4


FANOUT_SIZING: dict[str, Any] = {
    "model": "meta-llama/Llama-3.2-1B-Instruct",
    "traffic": {"rate_per_s": 1.0, "input_tokens": 512, "output_tokens": 128},
    "slo": {"ttft_s": {"p95": 0.5}, "tpot_s": {"p95": 0.05}},
    "candidates": {
        "hardware": ["h100-sxm"],
        "tensor_parallel": [1],
        "max_num_batched_tokens": [4096, 8192],
        "kv_cache_dtype": ["auto", "fp8"],
        "gpu_memory_utilization": [0.9, 0.95],
    },
    "prices": {"h100-sxm": 2.5},
    "verify_top": 1,
}
"""2 × 2 × 2 = 8 candidates: two screening pieces of four, then one task per simulated seed."""


def _sizing_job(client: TestClient, key: str) -> dict[str, Any]:
    job_id = submit(client, key, "sizing", FANOUT_SIZING).json()["id"]
    return wait_for(client, key, job_id, FINISHED)


def test_a_sizing_fans_out_and_one_worker_two_and_the_endpoint_agree(
    broker_client: TestClient, workers: list[Worker], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    one, two = workers
    assert isinstance(broker_client.app.state.jobs, CeleryJobExecutor)  # type: ignore[attr-defined]
    _pause(two)
    try:
        before = one.processed()
        alone = _sizing_job(broker_client, key)
        assert alone["state"] == "succeeded", alone["error"]
        # ceil(8 / 4) = 2 screening tasks, then one task per simulation the answer counts.
        assert one.processed() - before == 2 + alone["result"]["simulations"]
    finally:
        _resume(two)
    counts = [w.processed() for w in workers]
    both = _sizing_job(broker_client, key)
    assert both["state"] == "succeeded", both["error"]
    shares = [w.processed() - c for w, c in zip(workers, counts, strict=True)]
    assert sum(shares) == 2 + both["result"]["simulations"]
    # One unit per candidate screened (8) and per plan verified (verify_top = 1), all done.
    units = alone["result"]["candidates_evaluated"] + 1
    assert units == 9
    assert alone["progress"] == both["progress"] == {"done": units, "total": units, "eta_s": None}
    sync = broker_client.post("/v1/sizing", json=FANOUT_SIZING)  # in the request's thread
    assert sync.status_code == 200, sync.text
    assert without_timing(alone["result"]) == without_timing(both["result"])
    assert without_timing(both["result"]) == without_timing(sync.json())


def test_a_capacity_job_on_a_worker_reports_its_probes(
    broker_client: TestClient, workers: list[Worker], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    done = wait_for(
        broker_client, key, submit(broker_client, key, "capacity", CAPACITY).json()["id"], FINISHED
    )
    assert done["state"] == "succeeded", done["error"]
    # As in the embedded test: full runs simulate 60 requests, screening runs 60 // 4 = 15.
    short = done["result"]["short_probes"]
    full, rest = divmod(done["result"]["simulated_requests"] - 15 * short, 60)
    assert rest == 0
    assert done["progress"] == {"done": full + short, "total": full + short, "eta_s": None}


def test_a_restarted_api_re_attaches_its_running_jobs(
    make_client: Callable[..., TestClient],
    broker: str,
    workers: list[Worker],
    create_key: Callable[..., str],
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    first = make_client(broker_url=broker, job_queue=QUEUE)
    sizing_id = submit(first, key, "sizing", FANOUT_SIZING).json()["id"]
    sweep_id = submit(first, key, "sweep", small_sweep()).json()["id"]
    assert wait_for(first, key, sizing_id, {"running"} | FINISHED)["state"] == "running"
    first.__exit__(None, None, None)  # the API stops mid-job; the workers keep going

    second = make_client(broker_url=broker, job_queue=QUEUE)
    sizing = wait_for(second, key, sizing_id, FINISHED)
    sweep = wait_for(second, key, sweep_id, FINISHED)
    assert sizing["state"] == "succeeded", sizing["error"]
    assert sweep["state"] == "succeeded", sweep["error"]
    sync = second.post("/v1/sizing", json=FANOUT_SIZING)
    assert without_timing(sizing["result"]) == without_timing(sync.json())
    check_rows_equal_sync(second, sweep["result"])


def test_servesize_worker_without_a_broker_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k.upper() != "BROKER_URL"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-m", "servesize", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=POLL_LIMIT_S,
        check=False,
        cwd=Path(__file__).resolve().parent,  # no .env with a BROKER_URL
    )
    assert done.returncode == 2
    assert "BROKER_URL is not set" in done.stdout + done.stderr
