"""Background jobs on both database backends: submit, poll, result equal to the synchronous
endpoint's, idempotent submission, cancel (queued and running), restart, auth and validation.

The pool has one worker process (``JOB_WORKERS=1``), so a second job waits behind a first."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from servesize.api.jobs import RESTART_REASON, JobExecutor
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.models import Job
from servesize.db.repository import JobRepository
from servesize.db.types import utc_now
from servesize.security import Scope
from tests.api.test_hardware import bearer

MODEL = "meta-llama/Llama-3.1-8B"
POLL_LIMIT_S = 120.0
"""A hang guard for polling, not a speed assertion."""


def open_loop(rate_per_s: float, num_requests: int, **extra: Any) -> dict[str, Any]:
    return {
        "mode": "open_loop",
        "arrival": {"process": "poisson", "rate_per_s": rate_per_s},
        "input_tokens": 512,
        "output_tokens": 64,
        "num_requests": num_requests,
        "warmup_requests": 5,
        "seed": 3,
    } | extra


SIMULATE: dict[str, Any] = {
    "model": MODEL,
    "hardware": "h100-sxm",
    "traffic": open_loop(4.0, 60),
    "slo": {"ttft_s": 1.0, "tpot_s": 0.1},
}
LONG_SIMULATE: dict[str, Any] = SIMULATE | {"traffic": open_loop(40.0, 50_000, warmup_requests=0)}
"""The largest simulation one request may ask for: it runs long enough to be cancelled."""
CAPACITY: dict[str, Any] = {
    "model": MODEL,
    "hardware": "h100-sxm",
    "traffic": open_loop(4.0, 60),
    "slo": {"ttft_s": {"p95": 0.5}, "tpot_s": {"p95": 0.05}},
    "search": {"tolerance": 0.2, "max_probes": 4, "curve_points": 0},
}
SIZING: dict[str, Any] = {
    "model": MODEL,
    "traffic": {"rate_per_s": 1.0, "input_tokens": 512, "output_tokens": 128},
    "slo": {"ttft_s": {"p95": 0.5}, "tpot_s": {"p95": 0.05}},
    "candidates": {
        "hardware": ["h100-sxm"],
        "tensor_parallel": [1],
        "max_num_batched_tokens": [8192],
        "kv_cache_dtype": ["auto"],
    },
    "verify_top": 1,
}
SYNC = {"sizing": "/v1/sizing", "capacity": "/v1/slo/capacity", "simulate": "/v1/simulate"}


@pytest.fixture
def jobs_client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(job_workers=1)


def _without_elapsed(value: Any) -> Any:
    """The body without wall-clock fields (``elapsed_s``), which differ run to run."""
    if isinstance(value, dict):
        return {k: _without_elapsed(v) for k, v in value.items() if not k.endswith("elapsed_s")}
    if isinstance(value, list):
        return [_without_elapsed(v) for v in value]
    return value


def submit(client: TestClient, key: str, kind: str, body: dict[str, Any], **headers: str) -> Any:
    return client.post(
        "/v1/jobs", json={"kind": kind, "request": body}, headers=bearer(key) | headers
    )


def wait_for(client: TestClient, key: str, job_id: str, states: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + POLL_LIMIT_S
    while True:
        response = client.get(f"/v1/jobs/{job_id}", headers=bearer(key))
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, f"job stuck in {job['state']}"
        time.sleep(0.05)


def _executor(client: TestClient) -> JobExecutor:
    jobs = client.app.state.jobs  # type: ignore[attr-defined]
    assert isinstance(jobs, JobExecutor)
    return jobs


@pytest.mark.parametrize(
    ("kind", "body"), [("simulate", SIMULATE), ("capacity", CAPACITY), ("sizing", SIZING)]
)
def test_a_job_answers_what_the_synchronous_endpoint_answers(
    jobs_client: TestClient, create_key: Callable[..., str], kind: str, body: dict[str, Any]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    # A sizing job with manifests answers as POST /v1/sizing?manifests=true.
    options = {"manifests": True} if kind == "sizing" else {}
    accepted = jobs_client.post(
        "/v1/jobs", json={"kind": kind, "request": body, **options}, headers=bearer(key)
    )
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["id"]
    assert accepted.headers["location"] == f"/v1/jobs/{job_id}"
    assert accepted.json()["state"] in {"queued", "running"}

    done = wait_for(jobs_client, key, job_id, {"succeeded", "failed", "cancelled"})
    assert done["state"] == "succeeded", done["error"]
    assert done["kind"] == kind
    assert done["created_at"] <= done["started_at"] <= done["finished_at"]
    sync = jobs_client.post(SYNC[kind], json=body, params=options)
    assert sync.status_code == 200, sync.text
    assert _without_elapsed(done["result"]) == _without_elapsed(sync.json())
    if kind == "sizing":
        ranks = [p["rank"] for p in done["result"]["plans"]]
        assert [m["rank"] for m in done["result"]["manifests"]] == ranks
    if kind == "capacity":
        # Every simulation of the search counted once: full runs simulate 60 requests,
        # screening runs 60 // 4 = 15, so full = (simulated - 15 * short) / 60.
        result = done["result"]
        short = result["short_probes"]
        full, rest = divmod(result["simulated_requests"] - 15 * short, 60)
        assert rest == 0
        assert done["progress"] == {"done": full + short, "total": full + short, "eta_s": None}
    elif kind == "sizing":
        # One unit per candidate screened and per plan verified (verify_top = 1), all done.
        units = done["result"]["candidates_evaluated"] + 1
        assert done["progress"] == {"done": units, "total": units, "eta_s": None}
    else:
        assert done["progress"] is None


def test_same_idempotency_key_same_job_other_body_409(
    jobs_client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    first = submit(jobs_client, key, "simulate", SIMULATE, **{"Idempotency-Key": "k-1"})
    again = submit(jobs_client, key, "simulate", SIMULATE, **{"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    other = SIMULATE | {"traffic": open_loop(5.0, 60)}
    reused = submit(jobs_client, key, "simulate", other, **{"Idempotency-Key": "k-1"})
    assert reused.status_code == 409
    assert reused.headers["content-type"] == "application/problem+json"
    assert reused.json()["type"].endswith("idempotency-key-reused")
    fresh = submit(jobs_client, key, "simulate", other, **{"Idempotency-Key": "k-2"})
    assert fresh.json()["id"] != first.json()["id"]
    listing = jobs_client.get("/v1/jobs", headers=bearer(key)).json()
    assert listing["total"] == 2
    first_page = jobs_client.get("/v1/jobs", params={"limit": 1}, headers=bearer(key)).json()
    assert first_page["next_offset"] == 1
    assert [j["id"] for j in first_page["items"]] == [fresh.json()["id"]]  # newest first
    bad_state = jobs_client.get("/v1/jobs", params={"state": "done"}, headers=bearer(key))
    assert bad_state.status_code == 422


def test_cancel_a_running_job_stops_it_and_a_queued_one_never_starts(
    jobs_client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    running_id = submit(jobs_client, key, "simulate", LONG_SIMULATE).json()["id"]
    queued_id = submit(jobs_client, key, "simulate", SIMULATE).json()["id"]
    wait_for(jobs_client, key, running_id, {"running"})
    future = _executor(jobs_client).future(running_id)
    assert future is not None

    cancelled = jobs_client.delete(f"/v1/jobs/{queued_id}", headers=bearer(key))
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    stopped = jobs_client.delete(f"/v1/jobs/{running_id}", headers=bearer(key))
    assert stopped.json()["state"] == "cancelled"
    # The worker stopped the simulation (it did not run to the end and succeed).
    assert future.result(timeout=POLL_LIMIT_S)["state"] == "cancelled"

    queued = wait_for(jobs_client, key, queued_id, {"cancelled"})
    assert queued["started_at"] is None
    assert queued["result"] is None
    running = wait_for(jobs_client, key, running_id, {"cancelled"})
    assert running["result"] is None
    assert running["started_at"] is not None
    # The pool is free again: a new job runs to the end.
    after = submit(jobs_client, key, "simulate", SIMULATE).json()["id"]
    assert wait_for(jobs_client, key, after, {"succeeded", "failed"})["state"] == "succeeded"
    listing = jobs_client.get("/v1/jobs", params={"state": "cancelled"}, headers=bearer(key))
    assert {j["id"] for j in listing.json()["items"]} == {queued_id, running_id}
    # A finished job cannot be cancelled.
    assert jobs_client.delete(f"/v1/jobs/{after}", headers=bearer(key)).status_code == 409


def test_a_restart_keeps_results_and_fails_interrupted_jobs(
    make_client: Callable[..., TestClient], create_key: Callable[..., str], database_url: str
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    first = make_client(job_workers=1)
    done_id = submit(first, key, "simulate", SIMULATE).json()["id"]
    finished = wait_for(first, key, done_id, {"succeeded"})
    # Rows a process that died left behind (its pool died with it).
    db_engine = create_db_engine(database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            owner = session.scalars(select(Job.owner_key_id).where(Job.id == done_id)).one()
            for job_id, state in (
                ("job_00000000000000a1", "queued"),
                ("job_00000000000000a2", "running"),
            ):
                JobRepository(session).add(
                    Job(
                        id=job_id,
                        owner_key_id=owner,
                        kind="simulate",
                        state=state,
                        request=SIMULATE,
                        request_sha256="0" * 64,
                        created_at=utc_now(),
                        started_at=utc_now() if state == "running" else None,
                    )
                )
    finally:
        db_engine.dispose()

    second = make_client(job_workers=1)
    for job_id in ("job_00000000000000a1", "job_00000000000000a2"):
        job = second.get(f"/v1/jobs/{job_id}", headers=bearer(key)).json()
        assert job["state"] == "failed"
        assert job["error"]["reason"] == RESTART_REASON
        assert job["finished_at"] is not None
    kept = second.get(f"/v1/jobs/{done_id}", headers=bearer(key)).json()
    assert kept["state"] == "succeeded"
    assert kept["result"] == finished["result"]


def test_auth_problems(jobs_client: TestClient, create_key: Callable[..., str]) -> None:
    body = {"kind": "simulate", "request": SIMULATE}
    anonymous = jobs_client.post("/v1/jobs", json=body)
    assert anonymous.status_code == 401
    assert anonymous.headers["content-type"] == "application/problem+json"
    wrong = create_key(Scope.PLANS_WRITE)
    forbidden = jobs_client.post("/v1/jobs", json=body, headers=bearer(wrong))
    assert forbidden.status_code == 403
    assert forbidden.json()["required_scope"] == "jobs:write"

    owner = create_key(Scope.JOBS_WRITE, name="owner")
    other = create_key(Scope.JOBS_WRITE, name="other")
    admin = create_key(Scope.ADMIN, name="root")
    job_id = submit(jobs_client, owner, "simulate", SIMULATE).json()["id"]
    assert jobs_client.get(f"/v1/jobs/{job_id}").status_code == 401
    assert jobs_client.get(f"/v1/jobs/{job_id}", headers=bearer(other)).status_code == 403
    assert jobs_client.delete(f"/v1/jobs/{job_id}", headers=bearer(other)).status_code == 403
    assert jobs_client.get(f"/v1/jobs/{job_id}", headers=bearer(admin)).status_code == 200
    assert jobs_client.get("/v1/jobs", headers=bearer(other)).json()["total"] == 0
    missing = jobs_client.get("/v1/jobs/job_0000000000000000", headers=bearer(owner))
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    wait_for(jobs_client, owner, job_id, {"succeeded"})


def test_a_bad_inner_body_is_a_422_under_request(
    jobs_client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    bad = SIMULATE | {"traffic": open_loop(-1.0, 60)}
    response = submit(jobs_client, key, "simulate", bad)
    assert response.status_code == 422
    pointers = [e["pointer"] for e in response.json()["errors"]]
    assert pointers == ["/request/traffic/arrival/rate_per_s"]
    unknown_gpu = SIZING | {"candidates": SIZING["candidates"] | {"hardware": ["nope"]}}
    refused = submit(jobs_client, key, "sizing", unknown_gpu)
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["pointer"] == "/request/candidates/hardware/0"
    unknown_kind = jobs_client.post(
        "/v1/jobs", json={"kind": "nope", "request": {}}, headers=bearer(key)
    )
    assert unknown_kind.status_code == 422
    assert unknown_kind.json()["errors"][0]["pointer"] == "/kind"
    assert jobs_client.get("/v1/jobs", headers=bearer(key)).json()["total"] == 0


def test_a_worker_killed_mid_job_fails_the_job_and_the_pool_recovers(
    jobs_client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    job_id = submit(jobs_client, key, "simulate", LONG_SIMULATE).json()["id"]
    wait_for(jobs_client, key, job_id, {"running"})
    executor = _executor(jobs_client)
    deadline = time.monotonic() + POLL_LIMIT_S
    while job_id not in executor.pids:  # the listener stores the pid with the start
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(executor.pids[job_id], signal.SIGKILL)

    failed = wait_for(jobs_client, key, job_id, {"failed", "succeeded", "cancelled"})
    assert failed["state"] == "failed"
    assert failed["error"]["type"] == "urn:servesize:problem:worker-failed"
    assert failed["result"] is None
    after = submit(jobs_client, key, "simulate", SIMULATE).json()["id"]
    assert wait_for(jobs_client, key, after, {"succeeded", "failed"})["state"] == "succeeded"


def test_stopping_the_service_during_a_job_fails_it_with_the_restart_reason(
    make_client: Callable[..., TestClient], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    first = make_client(job_workers=1)
    job_id = submit(first, key, "simulate", LONG_SIMULATE).json()["id"]
    wait_for(first, key, job_id, {"running"})
    future = _executor(first).future(job_id)
    assert future is not None
    first.__exit__(None, None, None)  # the lifespan ends: the pool is shut down
    assert future.done()
    assert future.result()["state"] == "cancelled"  # stopped, not run to the end

    second = make_client(job_workers=1)
    job = second.get(f"/v1/jobs/{job_id}", headers=bearer(key)).json()
    assert job["state"] == "failed"
    assert job["error"]["reason"] == RESTART_REASON
    assert job["result"] is None


FANNED_SIZING: dict[str, Any] = SIZING | {
    "verify_top": 0,
    "candidates": SIZING["candidates"]
    | {
        "max_num_batched_tokens": [4096, 8192],
        "kv_cache_dtype": ["auto", "fp8"],
        "gpu_memory_utilization": [0.9, 0.95],
    },
}
"""2 × 2 × 2 = 8 candidates: two screening pieces of four (Tier A only, to stay quick; the
broker test verifies, so its seeds are tasks too)."""


def test_a_sizing_on_two_pool_processes_equals_the_serial_search_bit_for_bit(
    make_client: Callable[..., TestClient], create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    pooled = make_client(job_workers=2, sync_pool=True)
    job_id = submit(pooled, key, "sizing", FANNED_SIZING).json()["id"]
    done = wait_for(pooled, key, job_id, {"succeeded", "failed", "cancelled"})
    assert done["state"] == "succeeded", done["error"]
    assert done["progress"] == {"done": 8, "total": 8, "eta_s": None}
    assert done["result"]["candidates_evaluated"] == 8
    on_pool = pooled.post("/v1/sizing", json=FANNED_SIZING)  # SYNC_POOL: the same pool
    serial = make_client(sync_pool=False).post("/v1/sizing", json=FANNED_SIZING)
    assert on_pool.status_code == serial.status_code == 200, serial.text
    assert _without_elapsed(done["result"]) == _without_elapsed(serial.json())
    assert _without_elapsed(on_pool.json()) == _without_elapsed(serial.json())
