"""Jobs on Celery workers: ``BROKER_URL`` set, ``servesize worker`` processes compute.

The API process resolves a job's references as for the embedded pool
(:mod:`servesize.api.routes.job_tasks`) and sends the picklable inputs with the task; the
worker never opens the database. A sweep sends one ``servesize.sizing`` task per combination
as a :func:`celery.group` (task ids ``{job}.{n}``); a sizing, capacity search or simulation is
one ``servesize.job`` task. Every task is acked late (a worker lost before it acks leaves the
message to be redelivered), runs under a soft and a hard time limit, and is a pure function of
its arguments — seeds travel in the request — so the answer does not depend on which worker ran
which task.

One monitor thread in the API process polls the result backend: the job turns ``running`` when
a worker starts one of its tasks, progress counts finished tasks (an ETA follows from the
pace), and when every task is finished it stores the answer (a sweep's table is assembled
here, :func:`~servesize.api.routes.sweep_tasks.assemble`). A task that fails (its worker
process died: ``WorkerLostError``, or it ran past the hard limit) fails the job with that
reason; a task seen running for longer than the hard limit plus a grace has lost its worker
unseen, and fails the job too, so a job never hangs. ``DELETE`` revokes every task of the job,
terminating running ones (``SIGKILL`` to the pool process; the worker replaces it).

Tasks carry pickled arguments: the broker must be a trusted, private service.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from celery import Celery, Task, group
from celery.exceptions import SoftTimeLimitExceeded
from celery.result import AsyncResult, GroupResult
from celery.states import FAILURE, PENDING, READY_STATES, REVOKED, SUCCESS
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from servesize.api.celery_pieces import PIECE_TASK, CeleryMap
from servesize.api.jobs import (
    _LIVE_EXECUTORS,
    DRIVER_THREADS,
    JobExecutor,
    owner_gone,
    problem_of,
)
from servesize.api.problems import problem_body
from servesize.api.routes.job_tasks import compute
from servesize.api.routes.sweep_tasks import SweepInputs, assemble, size_one
from servesize.db.connection import transaction
from servesize.db.repository import JobRepository
from servesize.db.types import utc_now
from servesize.settings import Settings

__all__ = ["CeleryJobExecutor", "job_executor", "make_celery", "result_backend"]

log = logging.getLogger("servesize.jobs")

SIZING_TASK = "servesize.sizing"
JOB_TASK = "servesize.job"
PROGRESS = "PROGRESS"
"""The state a ``servesize.job`` task reports its progress in (meta ``{"done", "total"}``)."""
POLL_S = 0.2
"""How often the monitor reads the state of unfinished tasks."""
LOST_GRACE_S = 30.0
"""Past the hard time limit, how long a task may still look running before its worker counts
as lost."""


def result_backend(settings: Settings) -> str:
    """``RESULT_BACKEND``, else the broker itself for Redis, else ``rpc://``."""
    if settings.result_backend:
        return settings.result_backend
    broker = settings.broker_url or ""
    return broker if broker.startswith(("redis://", "rediss://")) else "rpc://"


def _time_limit_problem(limit_s: float) -> dict[str, Any]:
    detail = f"the task ran past its soft time limit of {limit_s:g} s"
    return problem_body(503, "time-limit", detail, reason=detail)


def make_celery(settings: Settings) -> Celery:
    """The Celery application of the API and of ``servesize worker`` (same configuration)."""
    if not settings.broker_url:
        raise ValueError("BROKER_URL is not set")
    soft, hard = math.ceil(settings.job_soft_time_limit_s), math.ceil(settings.job_time_limit_s)
    app = Celery("servesize", broker=settings.broker_url, backend=result_backend(settings))
    app.conf.update(
        task_serializer="pickle",
        accept_content=["pickle", "json"],
        # Piece results are plans and compiled replicas (trusted backend, as the broker).
        result_serializer="pickle",
        result_accept_content=["pickle", "json"],
        task_acks_late=True,
        task_track_started=True,
        task_soft_time_limit=soft,
        task_time_limit=hard,
        task_default_queue=settings.job_queue,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        result_expires=7 * 24 * 3600,
        # Redis redelivers an unacked task after this; it must outlast the longest task.
        broker_transport_options={"visibility_timeout": int(2 * hard + 60)},
    )

    @app.task(name=SIZING_TASK, shared=False, acks_late=True, soft_time_limit=soft, time_limit=hard)
    def sizing_task(request: dict[str, Any], inputs: Any) -> dict[str, Any]:
        """One sweep combination: ``{"sizing"}`` or ``{"problem"}``."""
        try:
            return size_one(request, inputs)
        except SoftTimeLimitExceeded:
            return {"problem": _time_limit_problem(soft)}

    @app.task(name=PIECE_TASK, shared=False, acks_late=True, soft_time_limit=soft, time_limit=hard)
    def piece_task(fn: Callable[[Any], Any], item: Any) -> Any:
        """One piece of a sizing (:mod:`servesize.api.celery_pieces`): ``fn(item)``."""
        return fn(item)

    @app.task(
        name=JOB_TASK,
        bind=True,
        shared=False,
        acks_late=True,
        soft_time_limit=soft,
        time_limit=hard,
    )
    def job_task(
        self: Task[Any, Any], kind: str, request: dict[str, Any], inputs: Any
    ) -> dict[str, Any]:
        """A capacity search or simulation (a sizing sent whole by an older API):
        ``{"result"}`` or ``{"error"}``; progress as state ``PROGRESS`` with ``{"done",
        "total"}``."""

        last: list[tuple[int, int | None]] = []

        def report(done: int, total: int | None) -> None:
            last[:] = [(done, total)]
            self.update_state(state=PROGRESS, meta={"done": done, "total": total})

        try:
            result = compute(kind, request, inputs, report)
            return {"result": result, "progress": last[0] if last else None}
        except SoftTimeLimitExceeded:
            return {"error": _time_limit_problem(soft)}
        except Exception as exc:
            return {"error": problem_of(exc)}

    return app


@dataclass(slots=True)
class _Tracked:
    kind: str
    request: dict[str, Any]
    inputs: Any
    results: list[AsyncResult[Any]]
    states: list[str]
    started: bool = False
    done: int = 0
    running_since: dict[int, float] = field(default_factory=dict)
    progress: tuple[int, int | None] | None = None


class CeleryJobExecutor(JobExecutor):
    """Jobs sent to the broker; their outcomes written by a monitor thread of this process.

    A subclass of the embedded executor for the routes' sake (``submit``, ``cancel``,
    ``shutdown``, ``fail_unfinished``); it starts no process pool."""

    local_pool = False

    def __init__(self, factory: sessionmaker[Session], *, settings: Settings) -> None:
        super().__init__(factory, task=compute, workers=1, lease_s=settings.job_lease_s)
        self.celery = make_celery(settings)
        self.queue = settings.job_queue
        self.lost_after_s = settings.job_time_limit_s + LOST_GRACE_S
        self._tracked: dict[str, _Tracked] = {}
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._sizing_drivers = ThreadPoolExecutor(DRIVER_THREADS, thread_name_prefix="sizing")
        self._detaching = threading.Event()
        self.prepare: Callable[[str, dict[str, Any]], Any] | None = None
        """Resolves a stored job's request (the lookups of the application), so that jobs
        left by a stopped process can be re-attached; unset: they fail as interrupted."""

    def submit(self, job_id: str, kind: str, request: dict[str, Any], inputs: Any) -> None:
        self._send(job_id, kind, request, inputs, resume=False)

    def _drive_sizing(self, job_id: str, request: dict[str, Any], inputs: Any) -> None:
        """A sizing on a driver thread here, its pieces as tasks (:class:`CeleryMap`)."""
        cancel = threading.Event()
        pieces = CeleryMap(
            self.celery, queue=self.queue, job_id=job_id, cancel=cancel, stop=self._detaching
        )
        future = self._sizing_drivers.submit(
            self._drive, job_id, "sizing", request, inputs, cancel, pieces
        )
        with self._lock:
            self._jobs[job_id] = (future, cancel)
        future.add_done_callback(lambda done: self._finished(job_id, done))

    def _send(
        self, job_id: str, kind: str, request: dict[str, Any], inputs: Any, *, resume: bool
    ) -> None:
        """Send the job's tasks; ``resume``: a job another process sent, whose tasks with a
        result or a worker are waited for and whose others (unknown: ``PENDING``) are sent
        again under the same ids (a task is a pure function: a duplicate answers the same)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the job executor is shut down")
        if kind == "sizing":
            self._drive_sizing(job_id, request, inputs)
            return
        if kind == "sweep":
            assert isinstance(inputs, SweepInputs)
            sizing = self.celery.tasks[SIZING_TASK]
            tasks = group(
                sizing.signature((body, found), task_id=f"{job_id}.{n}", queue=self.queue)
                for n, (body, found) in enumerate(zip(inputs.requests, inputs.inputs, strict=True))
            )
            if resume:
                results = self._resend(list(tasks.tasks))
            else:
                sent = tasks.apply_async()
                assert isinstance(sent, GroupResult)
                results = list(sent.results or [])
                self._write(job_id, lambda repo: repo.progress(job_id, 0, len(results)))
        else:
            job = self.celery.tasks[JOB_TASK].signature(
                (kind, request, inputs), task_id=f"{job_id}.0", queue=self.queue
            )
            results = self._resend([job]) if resume else [job.apply_async()]
        tracked = _Tracked(kind, request, inputs, results, [PENDING] * len(results))
        tracked.started = resume
        with self._lock:
            self._tracked[job_id] = tracked
            if self._monitor is None:
                self._monitor = threading.Thread(target=self._watch, name="job-monitor")
                self._monitor.daemon = True
                self._monitor.start()

    def _resend(self, signatures: list[Any]) -> list[AsyncResult[Any]]:
        results: list[AsyncResult[Any]] = []
        for sig in signatures:
            result: AsyncResult[Any] = AsyncResult(sig.id, app=self.celery)
            results.append(sig.apply_async() if result.state == PENDING else result)
        return results

    def reap(self, job_id: str | None = None) -> int:
        """Re-attach the unfinished jobs whose process stopped (lease lapsed, or owner gone):
        claim each one (:meth:`JobRepository.claim_interrupted`), resolve its stored request
        again and follow its tasks (a sizing's driver runs again here). Without
        :attr:`prepare`, or when the request no longer resolves, they fail as interrupted."""
        if self.prepare is None or self._closed:
            return super().reap(job_id)
        try:
            with transaction(self._factory) as session:
                repo = JobRepository(session)
                dead = [o for o in repo.active_owners() if owner_gone(o)]
                rows = repo.claim_interrupted(
                    self.process_id,
                    self.lease_deadline(),
                    now=utc_now(),
                    dead_owners=dead,
                    job_id=job_id,
                )
                claimed = [(r.id, r.kind, dict(r.request)) for r in rows]
        except SQLAlchemyError as exc:
            log.warning("interrupted jobs not checked: %s", type(exc).__name__)
            return 0
        for claimed_id, kind, request in claimed:
            try:
                inputs = self.prepare(kind, request)
                self._send(claimed_id, kind, request, inputs, resume=True)
            except Exception as exc:
                error = problem_of(exc)
                error["reason"] = f"not re-attached: {error.get('detail', '')}"
                self._write(claimed_id, partial(_fail, job_id=claimed_id, error=error))
            else:
                log.info("job %s re-attached", claimed_id)
        return len(claimed)

    def future(self, job_id: str) -> Future[dict[str, Any]] | None:
        """A sizing's driver (until it finishes); other kinds run on the workers only."""
        return super().future(job_id)

    def task_ids(self, job_id: str) -> list[str]:
        """The ids of a tracked job's tasks (until it finishes)."""
        tracked = self._tracked.get(job_id)
        return [r.id for r in tracked.results] if tracked else []

    def cancel(self, job_id: str) -> None:
        """Revoke every task of the job; running ones are terminated (a sizing's driver
        revokes its pieces)."""
        super().cancel(job_id)
        with self._lock:
            tracked = self._tracked.pop(job_id, None)
        if tracked is not None:
            self._revoke(tracked)

    def _revoke(self, tracked: _Tracked) -> None:
        ids = [r.id for r in tracked.results]
        try:
            self.celery.control.revoke(ids, terminate=True, signal="SIGKILL")
        except Exception:  # the broker is down: the monitor no longer waits on them anyway
            log.exception("tasks %s not revoked", ids[:3])

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            with self._lock:
                jobs = list(self._tracked.items())
            for job_id, tracked in jobs:
                try:
                    self._poll(job_id, tracked)
                except Exception:  # the backend is unreachable: try again on the next pass
                    log.exception("job %s: task states not read", job_id)

    def _poll(self, job_id: str, tracked: _Tracked) -> None:
        now = time.monotonic()
        for i, result in enumerate(tracked.results):
            if tracked.states[i] not in READY_STATES:
                tracked.states[i] = str(result.state)
            if tracked.states[i] in {"STARTED", PROGRESS}:
                tracked.running_since.setdefault(i, now)
            if tracked.states[i] == PROGRESS and isinstance(result.info, dict):
                step = (int(result.info["done"]), result.info.get("total"))
                if step != tracked.progress:
                    tracked.progress = step
                    self._write(job_id, partial(_progress, job_id=job_id, step=step))
        if not tracked.started and any(s != PENDING for s in tracked.states):
            tracked.started = True
            started_at = utc_now()
            self._write(job_id, lambda repo: repo.mark_started(job_id, started_at))
        done = sum(s in READY_STATES for s in tracked.states)
        total = len(tracked.states)
        if tracked.kind == "sweep" and done != tracked.done:
            tracked.done = done
            self._write(job_id, lambda repo: repo.progress(job_id, done, total))
        lost = [i for i, t in tracked.running_since.items() if now - t > self.lost_after_s]
        if lost and tracked.states[lost[0]] not in READY_STATES:
            task_id = tracked.results[lost[0]].id
            detail = f"task {task_id} outran its hard time limit: its worker is lost"
            self._end(job_id, tracked, "failed", error=problem_body(500, "worker-failed", detail))
            self._revoke(tracked)
        elif done == total:
            self._finish(job_id, tracked)

    def _end(self, job_id: str, tracked: _Tracked, state: str, **values: Any) -> None:
        with self._lock:
            self._tracked.pop(job_id, None)
        progress = (
            (tracked.done, len(tracked.results)) if tracked.kind == "sweep" else tracked.progress
        )
        self._write(
            job_id, lambda repo: repo.finish(job_id, state=state, progress=progress, **values)
        )
        for result in tracked.results:
            result.forget()

    def _finish(self, job_id: str, tracked: _Tracked) -> None:
        failed = [r for r, s in zip(tracked.results, tracked.states, strict=True) if s == FAILURE]
        if failed:
            exc = failed[0].result
            detail = f"task {failed[0].id} failed: {type(exc).__name__}: {exc}"
            error = problem_body(500, "worker-failed", detail, reason=detail)
            self._end(job_id, tracked, "failed", error=error)
            return
        if any(s == REVOKED for s in tracked.states):
            self._end(job_id, tracked, "cancelled")
            return
        assert all(s == SUCCESS for s in tracked.states)
        outcomes = [r.result if isinstance(r.result, dict) else {} for r in tracked.results]
        if tracked.kind == "sweep":
            try:
                answer = assemble(tracked.request, tracked.inputs, outcomes)
            except Exception as exc:
                self._end(job_id, tracked, "failed", error=problem_of(exc))
                return
            self._end(job_id, tracked, "succeeded", result=answer)
        elif "error" in outcomes[0]:
            self._end(job_id, tracked, "failed", error=outcomes[0]["error"])
        else:
            if outcomes[0].get("progress"):
                done, total = outcomes[0]["progress"]
                tracked.progress = (int(done), total)
            self._end(job_id, tracked, "succeeded", result=outcomes[0]["result"])

    def shutdown(self) -> None:
        """Leave the jobs to the next process: stop following their tasks (they keep running
        on the workers) and stop the sizing drivers without revoking their pieces; the jobs
        stay ``running`` under this process's name until another process re-attaches them
        (:meth:`reap`: at its start when this process is gone, else when the lease lapses)."""
        self._beating.set()
        if self._heart is not None:
            self._heart.join(timeout=5)
        _LIVE_EXECUTORS.discard(self.process_id)
        with self._lock:
            self._closed = True
            self.detached = True
            self._tracked.clear()
        self._detaching.set()
        self._sizing_drivers.shutdown(wait=True, cancel_futures=True)
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
        consumer = getattr(self.celery.backend, "result_consumer", None)
        if consumer is not None:  # rpc://: its reply-queue connection
            consumer.stop()
        self.celery.close()


def _progress(repo: JobRepository, *, job_id: str, step: tuple[int, int | None]) -> None:
    repo.progress(job_id, step[0], step[1])


def _fail(repo: JobRepository, *, job_id: str, error: dict[str, Any]) -> None:
    repo.finish(job_id, state="failed", error=error)


def job_executor(factory: sessionmaker[Session], settings: Settings) -> JobExecutor:
    """Celery workers when ``BROKER_URL`` is set, else the embedded process pool."""
    if settings.broker_url:
        return CeleryJobExecutor(factory, settings=settings)
    return JobExecutor(
        factory, task=compute, workers=settings.job_workers, lease_s=settings.job_lease_s
    )
