"""The embedded job executor: planning requests run in a process pool inside the service.

``POST /v1/jobs`` resolves the request's references in the API process (the lookup cache, as
the synchronous routes do) and hands plain, picklable data — the validated request as JSON and
the resolved inputs — to a :class:`concurrent.futures.ProcessPoolExecutor` (``spawn`` start
method, ``JOB_WORKERS`` processes, default ``os.cpu_count()``). The task is a pure function of
those: seeds travel in the request, so a job's answer equals the synchronous endpoint's.

Worker processes never open the database. They report back to the API process, which writes:

* ``started`` through a queue of a :func:`multiprocessing.Manager` that a listener thread
  reads (the job turns ``running``);
* the outcome (``succeeded`` with the response body, ``failed`` with a problem document, or
  ``cancelled``) through the future's done-callback.

Cancelling: a job still waiting in the pool's queue is dropped (``Future.cancel``); otherwise
its cancel flag (a manager ``Event``) is set. The task checks the flag before it starts, and
while it computes a watcher thread in the worker polls it and raises
:class:`~servesize.api.compute.ComputeInterrupted` in the computing thread
(``PyThreadState_SetAsyncExc``, as the compute gates do: effective at the next bytecode
boundary), so a running job stops and its worker process is free for the next one.

Every state change is a conditional update (:class:`~servesize.db.repository.JobRepository`):
a callback that arrives after a cancel, or after a restart failed the job, changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from servesize.api.compute import ComputeInterrupted, _Ticket
from servesize.api.errors import ApiError
from servesize.api.problems import problem_body
from servesize.core.errors import FieldIssue, PlanningError
from servesize.core.replica import ReplicaError
from servesize.db.connection import transaction
from servesize.db.repository import JobRepository
from servesize.db.types import utc_now

__all__ = [
    "RESTART_REASON",
    "JobExecutor",
    "JobTask",
    "problem_of",
    "restart_problem",
    "run_task",
]

log = logging.getLogger("servesize.jobs")

RESTART_REASON = "interrupted by a service restart"
CANCEL_POLL_S = 0.05
"""How often a worker's watcher thread checks the job's cancel flag."""


class JobTask(Protocol):
    """``task(kind, request, inputs, report) -> response body``, ``report(done, total)`` for
    progress; module-level, so it pickles by name."""

    def __call__(
        self,
        kind: str,
        request: dict[str, Any],
        inputs: Any,
        report: Callable[[int, int | None], None],
    ) -> dict[str, Any]: ...


class _Flag(Protocol):
    def is_set(self) -> bool: ...
    def set(self) -> None: ...
    def wait(self, timeout: float | None = ...) -> bool: ...


class _Queue(Protocol):
    def put(self, item: Any) -> None: ...
    def get(self) -> Any: ...


def restart_problem() -> dict[str, Any]:
    return problem_body(503, "job-interrupted", RESTART_REASON, reason=RESTART_REASON)


def _issue_errors(issues: tuple[FieldIssue, ...] | list[FieldIssue]) -> list[dict[str, str]]:
    return [{"location": "body", "pointer": i.field, "detail": i.problem} for i in issues]


def problem_of(exc: BaseException) -> dict[str, Any]:
    """An exception as the problem document the synchronous endpoint would have answered."""
    if isinstance(exc, ApiError):
        return problem_body(exc.status, exc.slug, exc.detail, **exc.extensions)
    if isinstance(exc, ReplicaError):
        errors = [{"location": "body", "pointer": exc.field, "detail": exc.detail}]
        return problem_body(422, "replica-error", exc.detail, errors=errors)
    issues = getattr(exc, "issues", None)
    if isinstance(exc, ValueError) and isinstance(issues, tuple | list):
        return problem_body(422, "invalid-input", str(exc), errors=_issue_errors(issues))
    if isinstance(exc, PlanningError):
        return problem_body(422, "planning-error", str(exc))
    return problem_body(500, "internal-error", f"the job failed: {type(exc).__name__}")


def run_task(
    task: JobTask,
    job_id: str,
    kind: str,
    request: dict[str, Any],
    inputs: Any,
    cancel: _Flag,
    events: _Queue,
) -> dict[str, Any]:
    """Run one job in a worker process: ``{"state", "started_at", "result" | "error"}``."""
    if cancel.is_set():
        return {"state": "cancelled", "started_at": None}
    started_at = utc_now()
    events.put(("started", job_id, started_at, os.getpid()))
    progress: list[tuple[int, int | None]] = []

    def report(done: int, total: int | None) -> None:
        progress[:] = [(done, total)]
        with contextlib.suppress(OSError, EOFError):
            events.put(("progress", job_id, done, total))

    ticket: _Ticket[None, dict[str, Any]] = _Ticket(
        lambda: None, lambda _: task(kind, request, inputs, report)
    )
    stop = threading.Event()

    def watch() -> None:
        try:
            while not stop.is_set():
                if cancel.wait(CANCEL_POLL_S):
                    ticket.interrupt("cancelled")
                    return
        except (OSError, EOFError):  # the API process (and its manager) went away
            ticket.interrupt("cancelled")

    watcher = threading.Thread(target=watch, name=f"cancel-{job_id}", daemon=True)
    watcher.start()
    try:
        result = ticket()
        outcome: dict[str, Any] = {"state": "succeeded", "result": result}
    except ComputeInterrupted:
        outcome = {"state": "cancelled"}
    except Exception as exc:
        outcome = {"state": "failed", "error": problem_of(exc)}
    finally:
        stop.set()
        watcher.join()
    outcome["started_at"] = started_at
    outcome["progress"] = progress[0] if progress else None
    return outcome


def _mark_started(repo: JobRepository, *, job_id: str, started_at: datetime) -> None:
    repo.mark_started(job_id, started_at)


def _progress(repo: JobRepository, *, job_id: str, done: int, total: int | None) -> None:
    repo.progress(job_id, done, total)


def _finish(repo: JobRepository, *, job_id: str, state: str, error: dict[str, Any]) -> None:
    repo.finish(job_id, state=state, error=error)


class JobExecutor:
    """The process pool, its manager and the callbacks that write outcomes to the database.

    The pool and the manager start with the first job (an application that never runs one
    spawns no process); :meth:`shutdown` (the application's lifespan end) fails this process's
    unfinished jobs with :data:`RESTART_REASON`, stops the running ones and joins the pool.
    """

    def __init__(
        self, factory: sessionmaker[Session], *, task: JobTask, workers: int | None = None
    ) -> None:
        self._factory = factory
        self._task = task
        self.workers = workers or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._manager: Any = None
        self._events: _Queue | None = None
        self._listener: threading.Thread | None = None
        self._jobs: dict[str, tuple[Future[dict[str, Any]], _Flag]] = {}
        self.pids: dict[str, int] = {}
        """The worker process id of each running job (until it finishes)."""
        self._closed = False

    def fail_unfinished(self) -> int:
        """Jobs a previous process left queued or running are failed with the restart reason
        (the embedded pool died with that process)."""
        try:
            with transaction(self._factory) as session:
                return JobRepository(session).fail_unfinished(restart_problem())
        except SQLAlchemyError as exc:  # not migrated yet: nothing to recover
            log.warning("jobs left by a previous process not checked: %s", type(exc).__name__)
            return 0

    def _start(self) -> tuple[ProcessPoolExecutor, Any, _Queue]:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._manager = context.Manager()
            self._events = self._manager.Queue()
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
            self._listener = threading.Thread(
                target=self._listen, args=(self._events,), name="job-events", daemon=True
            )
            self._listener.start()
        assert self._events is not None
        return self._pool, self._manager, self._events

    def submit(self, job_id: str, kind: str, request: dict[str, Any], inputs: Any) -> None:
        """Queue a job whose row is already committed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the job executor is shut down")
            pool, manager, events = self._start()
            cancel: _Flag = manager.Event()
            args = (self._task, job_id, kind, request, inputs, cancel, events)
            try:
                future = pool.submit(run_task, *args)
            except BrokenProcessPool:  # a worker died: its jobs failed; start a new pool
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = pool = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
                )
                future = pool.submit(run_task, *args)
            self._jobs[job_id] = (future, cancel)
        future.add_done_callback(lambda done: self._finished(job_id, done))

    def future(self, job_id: str) -> Future[dict[str, Any]] | None:
        """The future of a job this process runs (until it has finished)."""
        entry = self._jobs.get(job_id)
        return entry[0] if entry else None

    def cancel(self, job_id: str) -> None:
        """Drop a job from the queue, or set its flag so that its worker stops it."""
        entry = self._jobs.get(job_id)
        if entry is None:
            return
        future, cancel = entry
        if not future.cancel():
            try:
                cancel.set()
            except (OSError, EOFError):
                log.warning("job %s: cancel flag unreachable", job_id)

    def _write(self, job_id: str, action: Callable[[JobRepository], object]) -> None:
        try:
            with transaction(self._factory) as session:
                action(JobRepository(session))
        except SQLAlchemyError:
            log.exception("job %s: state not stored", job_id)

    def _listen(self, events: _Queue) -> None:
        while True:
            try:
                event = events.get()
            except (OSError, EOFError):
                return
            if event is None:
                return
            if event[0] == "progress":
                _, job_id, done, total = event
                self._write(job_id, partial(_progress, job_id=job_id, done=done, total=total))
                continue
            _, job_id, started_at, pid = event
            assert isinstance(started_at, datetime)
            self.pids[job_id] = int(pid)
            self._write(job_id, partial(_mark_started, job_id=job_id, started_at=started_at))

    def _finished(self, job_id: str, future: Future[dict[str, Any]]) -> None:
        self._jobs.pop(job_id, None)
        self.pids.pop(job_id, None)
        if future.cancelled():
            return  # dropped from the queue by DELETE, which stored the state
        exc = future.exception()
        if exc is not None:  # the worker process died (BrokenProcessPool) or did not pickle
            detail = f"the worker process running the job failed: {type(exc).__name__}"
            error = problem_body(500, "worker-failed", detail)
            self._write(job_id, lambda repo: repo.finish(job_id, state="failed", error=error))
            return
        outcome = future.result()
        state = str(outcome["state"])
        started = outcome.get("started_at")
        self._write(
            job_id,
            lambda repo: repo.finish(
                job_id,
                state=state,
                started_at=started if isinstance(started, datetime) else None,
                result=outcome.get("result"),
                error=outcome.get("error"),
                progress=outcome.get("progress"),
            ),
        )

    def shutdown(self) -> None:
        """Fail this process's unfinished jobs (restart reason), stop them, join the pool."""
        with self._lock:
            self._closed = True
            jobs = dict(self._jobs)
        problem = restart_problem()
        for job_id in jobs:
            self._write(job_id, partial(_finish, job_id=job_id, state="failed", error=problem))
        for job_id in jobs:
            self.cancel(job_id)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._events is not None:
            with contextlib.suppress(OSError, EOFError):
                self._events.put(None)
        if self._listener is not None:
            self._listener.join(timeout=5)
        if self._manager is not None:
            self._manager.shutdown()
