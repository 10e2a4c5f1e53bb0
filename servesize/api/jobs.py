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

Several API processes (``servesize serve --workers N``, or several hosts on one database): each
executor names itself (:attr:`JobExecutor.process_id`, ``<host>:<pid>:<random>``) as the
``owner_process`` of the jobs it queues, with a lease (``JOB_LEASE_S``). A heartbeat thread
(:meth:`JobExecutor.heartbeat`) renews its leases every third of that, stops its jobs that
ended elsewhere (another process's ``DELETE``, or a lapsed lease), and fails as interrupted
(:data:`INTERRUPTED_REASON`) the unfinished jobs whose lease lapsed or whose owner on this
host is gone. At start-up a
process does the same (:meth:`JobExecutor.fail_unfinished`), so a job never stays ``running``
after the process running it died; jobs of live processes are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import secrets
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from servesize.api.compute import ComputeInterrupted, _Ticket
from servesize.api.errors import ApiError
from servesize.api.job_pieces import PoolMap, watched
from servesize.api.problems import problem_body
from servesize.core.errors import FieldIssue, PlanningError
from servesize.core.replica import ReplicaError
from servesize.core.sizing import TaskMap, serial_map
from servesize.db.connection import transaction
from servesize.db.repository import JobRepository
from servesize.db.types import utc_now

__all__ = [
    "INTERRUPTED_REASON",
    "RESTART_REASON",
    "JobExecutor",
    "JobTask",
    "problem_of",
    "restart_problem",
    "run_task",
]

log = logging.getLogger("servesize.jobs")

RESTART_REASON = "interrupted by a service restart"
INTERRUPTED_REASON = "interrupted: the process running it stopped"
_LIVE_EXECUTORS: set[str] = set()
"""Process ids of the executors running in this process (tests run several apps in one)."""
CANCEL_POLL_S = 0.05
"""How often a worker's watcher thread checks the job's cancel flag."""
DRIVEN_KINDS = frozenset({"sizing", "sweep"})
"""Kinds whose search runs on a driver thread of the API process and fans its pieces out to
the pool (:mod:`servesize.api.job_pieces`); the others run whole in one pool worker."""
DRIVER_THREADS = 32
"""Driver threads (each only waits on its pieces); more driven jobs queue for one."""


class JobTask(Protocol):
    """``task(kind, request, inputs, report, map_tasks) -> response body``, ``report(done,
    total)`` for progress, ``map_tasks`` running a driven kind's pieces; module-level, so it
    pickles by name."""

    def __call__(
        self,
        kind: str,
        request: dict[str, Any],
        inputs: Any,
        report: Callable[[int, int | None], None],
        map_tasks: TaskMap = serial_map,
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


def interrupted_problem() -> dict[str, Any]:
    return problem_body(503, "job-interrupted", INTERRUPTED_REASON, reason=INTERRUPTED_REASON)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def owner_gone(owner: str, *, host: str | None = None) -> bool:
    """Whether the process named ``owner`` (``<host>:<pid>:<random>``) is known to have
    stopped: it ran on this host and its pid is gone, or the pid is this process's and no
    executor of this process has that name (an earlier process that had the same pid). An
    owner on another host is judged by its lease alone (``False``)."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False
    owner_host, pid = parts[0], int(parts[1])
    if owner_host != (host or socket.gethostname()):
        return False
    if pid == os.getpid():
        return owner not in _LIVE_EXECUTORS
    return not _pid_alive(pid)


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
    try:
        with watched(cancel, ticket, job_id):
            result = ticket()
        outcome: dict[str, Any] = {"state": "succeeded", "result": result}
    except ComputeInterrupted:
        outcome = {"state": "cancelled"}
    except Exception as exc:
        outcome = {"state": "failed", "error": problem_of(exc)}
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

    local_pool = True
    """Whether :meth:`task_map` runs pieces on this process's own pool."""
    detached = False
    """Set when the process stops leaving its jobs to the next (broker jobs): outcomes of
    stopped drivers are not written."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        task: JobTask,
        workers: int | None = None,
        lease_s: float = 30.0,
    ) -> None:
        self._factory = factory
        self.lease_s = lease_s
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        """This executor's name as the ``owner_process`` of its jobs."""
        _LIVE_EXECUTORS.add(self.process_id)
        self._beating = threading.Event()
        self._heart: threading.Thread | None = None
        self._task = task
        self.workers = workers or os.cpu_count() or 1
        self._lock = threading.RLock()
        self._pool: ProcessPoolExecutor | None = None
        self._drivers: ThreadPoolExecutor | None = None
        self._manager: Any = None
        self._events: _Queue | None = None
        self._listener: threading.Thread | None = None
        self._jobs: dict[str, tuple[Future[dict[str, Any]], _Flag]] = {}
        self.pids: dict[str, int] = {}
        """The worker process id of each running job (until it finishes)."""
        self._closed = False

    def fail_unfinished(self) -> int:
        """At start-up: jobs that name no owner (left by a version that ran one process) are
        failed with the restart reason, and jobs of stopped owners as interrupted
        (:meth:`reap`); jobs of live processes are left alone."""
        try:
            with transaction(self._factory) as session:
                unowned = JobRepository(session).fail_unowned(restart_problem())
        except SQLAlchemyError as exc:  # not migrated yet: nothing to recover
            log.warning("jobs left by a previous process not checked: %s", type(exc).__name__)
            return 0
        return unowned + self.reap()

    def lease_deadline(self) -> datetime:
        return utc_now() + timedelta(seconds=self.lease_s)

    def reap(self, job_id: str | None = None) -> int:
        """Fail as interrupted the unfinished jobs (only ``job_id`` when given) whose lease
        lapsed or whose owner on this host stopped; returns how many."""
        try:
            with transaction(self._factory) as session:
                repo = JobRepository(session)
                dead = [o for o in repo.active_owners() if owner_gone(o)]
                return repo.fail_interrupted(
                    interrupted_problem(), now=utc_now(), dead_owners=dead, job_id=job_id
                )
        except SQLAlchemyError as exc:
            log.warning("interrupted jobs not checked: %s", type(exc).__name__)
            return 0

    def heartbeat(self) -> None:
        """One beat: renew this process's leases, stop its jobs that ended elsewhere (cancelled,
        or failed after a lapsed lease), reap."""
        try:
            with transaction(self._factory) as session:
                repo = JobRepository(session)
                repo.renew_leases(self.process_id, self.lease_deadline())
                with self._lock:
                    running = list(self._jobs)
                ended = repo.ended_of(self.process_id, running)
        except SQLAlchemyError as exc:
            log.warning("job leases not renewed: %s", type(exc).__name__)
            return
        for job_id in ended:
            self.cancel(job_id)
        self.reap()

    def start_heartbeat(self) -> None:
        """Beat every third of the lease on a daemon thread until :meth:`shutdown`."""

        def beat() -> None:
            while not self._beating.wait(self.lease_s / 3):
                self.heartbeat()

        self._heart = threading.Thread(target=beat, name="job-heartbeat", daemon=True)
        self._heart.start()

    def _start(self) -> tuple[ProcessPoolExecutor, Any, _Queue]:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._manager = context.Manager()
            self._events = self._manager.Queue()
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
            self._drivers = ThreadPoolExecutor(DRIVER_THREADS, thread_name_prefix="job-driver")
            self._listener = threading.Thread(
                target=self._listen, args=(self._events,), name="job-events", daemon=True
            )
            self._listener.start()
        assert self._events is not None
        return self._pool, self._manager, self._events

    def _pool_submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Submit to the pool (started if need be); a pool broken by a dead worker (its
        futures failed) is replaced first."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the job executor is shut down")
            pool, _, _ = self._start()
            try:
                return pool.submit(fn, *args)
            except BrokenProcessPool:
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = pool = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
                )
                return pool.submit(fn, *args)

    def new_flag(self) -> _Flag:
        """A cancel flag the pool's workers can read (a manager ``Event``)."""
        with self._lock:
            _, manager, _ = self._start()
            flag: _Flag = manager.Event()
            return flag

    def task_map(self, cancel: _Flag | None = None) -> TaskMap:
        """A map that runs a search's pieces on the pool (a synchronous sizing's, or a driven
        job's), stopped by ``cancel`` (a fresh flag when none is given)."""
        return PoolMap(self._pool_submit, cancel if cancel is not None else self.new_flag())

    def submit(self, job_id: str, kind: str, request: dict[str, Any], inputs: Any) -> None:
        """Queue a job whose row is already committed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the job executor is shut down")
            _, manager, events = self._start()
            cancel: _Flag = manager.Event()
            if kind in DRIVEN_KINDS:
                assert self._drivers is not None
                future = self._drivers.submit(self._drive, job_id, kind, request, inputs, cancel)
            else:
                args = (self._task, job_id, kind, request, inputs, cancel, events)
                future = self._pool_submit(run_task, *args)
            self._jobs[job_id] = (future, cancel)
        future.add_done_callback(lambda done: self._finished(job_id, done))

    def _drive(
        self,
        job_id: str,
        kind: str,
        request: dict[str, Any],
        inputs: Any,
        cancel: _Flag,
        pieces: TaskMap | None = None,
    ) -> dict[str, Any]:
        """A driven job on this thread, its pieces on the pool: the outcome as
        :func:`run_task` gives it (a broken pool propagates: the job fails as its worker)."""
        if cancel.is_set():
            return {"state": "cancelled", "started_at": None}
        started_at = utc_now()
        self._write(job_id, partial(_mark_started, job_id=job_id, started_at=started_at))
        progress: list[tuple[int, int | None]] = []

        def report(done: int, total: int | None) -> None:
            if progress != [(done, total)]:
                progress[:] = [(done, total)]
                self._write(job_id, partial(_progress, job_id=job_id, done=done, total=total))

        try:
            result = self._task(
                kind, request, inputs, report, pieces or PoolMap(self._pool_submit, cancel)
            )
            outcome: dict[str, Any] = {"state": "succeeded", "result": result}
        except ComputeInterrupted:
            outcome = {"state": "cancelled"}
        except BrokenProcessPool:
            raise
        except Exception as exc:
            outcome = {"state": "failed", "error": problem_of(exc)}
        outcome["started_at"] = started_at
        outcome["progress"] = progress[0] if progress else None
        return outcome

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
        if future.cancelled() or self.detached:  # detached: the next process re-attaches
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
        self._beating.set()
        if self._heart is not None:
            self._heart.join(timeout=5)
        _LIVE_EXECUTORS.discard(self.process_id)
        with self._lock:
            self._closed = True
            jobs = dict(self._jobs)
        problem = restart_problem()
        for job_id in jobs:
            self._write(job_id, partial(_finish, job_id=job_id, state="failed", error=problem))
        for job_id in jobs:
            self.cancel(job_id)
        if self._drivers is not None:
            self._drivers.shutdown(wait=True, cancel_futures=True)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._events is not None:
            with contextlib.suppress(OSError, EOFError):
                self._events.put(None)
        if self._listener is not None:
            self._listener.join(timeout=5)
        if self._manager is not None:
            self._manager.shutdown()
