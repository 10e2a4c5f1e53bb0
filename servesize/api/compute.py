"""Bounded computation for the planning endpoints: a worker limit, a queue bound, a deadline,
and interruption of work nobody waits for any more.

A planning request (``/v1/memory``, ``/v1/performance``, ``/v1/simulate``, ...) is an ``async``
route that hands its work to :meth:`ComputeGate.run`. The gate

* admits at most ``workers + queue`` requests; one more gets **503** ``overloaded`` with a
  ``Retry-After`` estimated from the recent run times (``ceil(waiting · t̄ / workers)``);
* runs at most ``workers`` of them at once, each on a worker thread
  (:func:`anyio.to_thread.run_sync` with the gate's own :class:`anyio.CapacityLimiter`, so
  planning work never takes the threads the database routes run on);
* runs a short ``lookup`` first (resolving the hardware profile or model, with a database
  session that is closed before the computation starts) and then ``compute``;
* interrupts the computation when the deadline (queueing included) passes (**503**
  ``deadline-exceeded``) or the client disconnects (the answer would go nowhere).

Python threads cannot be killed; the interruption raises :class:`ComputeInterrupted` in the
worker thread with CPython's ``PyThreadState_SetAsyncExc``, which takes effect at the next
bytecode boundary (a NumPy call in progress finishes first). It is raised only while
``compute`` runs — never during the lookup, so no database session is cut half-way — and any
exception still pending when ``compute`` returns is cleared, so it cannot escape into the
worker thread's own loop.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, Generic, TypeVar

import anyio
import anyio.to_thread
from fastapi import Depends, Request

from servesize.api.errors import ApiError

__all__ = [
    "ComputeGate",
    "ComputeInterrupted",
    "DeadlineExceededError",
    "Gates",
    "GatesDep",
    "OverloadedError",
]

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - the lookup's result

EWMA_WEIGHT = 0.2
"""Weight of the newest run time in the moving mean behind ``Retry-After``."""


class OverloadedError(ApiError):
    status = 503
    slug = "overloaded"


class DeadlineExceededError(ApiError):
    status = 503
    slug = "deadline-exceeded"


class ClientGoneError(ApiError):
    """The client disconnected; the response is never read (logged as 503)."""

    status = 503
    slug = "client-disconnected"


class ComputeInterrupted(BaseException):
    """Raised inside a worker thread to stop a computation (a ``BaseException``, so the
    planning code's ``except Exception`` clauses do not swallow it)."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc


def _raise_in_thread(thread_id: int, exc: type[BaseException] | None) -> None:
    """``PyThreadState_SetAsyncExc``: make ``thread_id`` raise ``exc`` at its next bytecode
    boundary; ``None`` (a C NULL) clears a pending one."""
    _set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


class _Phase(Enum):
    WAITING = "waiting"
    LOOKUP = "lookup"
    COMPUTING = "computing"
    INTERRUPTED = "interrupted"
    DONE = "done"


class _Ticket(Generic[I, T]):
    """One request's work as the worker thread runs it, and the switch that stops it."""

    def __init__(self, lookup: Callable[[], I], compute: Callable[[I], T]) -> None:
        self.lookup, self.compute = lookup, compute
        self.lock = threading.Lock()
        self.phase = _Phase.WAITING
        self.thread_id = 0
        self.reason: str | None = None
        self.run_s = 0.0

    def __call__(self) -> T:
        started = time.perf_counter()
        with self.lock:
            if self.reason is not None:
                raise ComputeInterrupted
            self.thread_id = threading.get_ident()
            self.phase = _Phase.LOOKUP
        inputs = self.lookup()
        with self.lock:
            if self.reason is not None:
                raise ComputeInterrupted
            self.phase = _Phase.COMPUTING
        try:
            return self.compute(inputs)
        finally:
            with self.lock:
                if self.phase is _Phase.INTERRUPTED:
                    _raise_in_thread(self.thread_id, None)
                self.phase = _Phase.DONE
            self.run_s = time.perf_counter() - started

    def interrupt(self, reason: str) -> None:
        """Stop the work: refuse to start it, or raise in its thread while it computes (once)."""
        with self.lock:
            if self.reason is None:
                self.reason = reason
            if self.phase is _Phase.COMPUTING:
                self.phase = _Phase.INTERRUPTED
                _raise_in_thread(self.thread_id, ComputeInterrupted)


def _no_lookup() -> None:
    return None


async def _disconnected(request: Request) -> None:
    """Return when the client disconnects (the body has been read by then, so the next ASGI
    message is ``http.disconnect``)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class ComputeGate:
    """At most ``workers`` computations at once and ``queue`` more waiting (see the module)."""

    def __init__(self, name: str, *, workers: int, queue: int, deadline_s: float) -> None:
        self.name = name
        self.workers = workers
        self.queue = queue
        self.deadline_s = deadline_s
        self._limiter = anyio.CapacityLimiter(workers)
        self.admitted = 0
        """Requests running or waiting (the event loop's view; only it changes this)."""
        self.mean_run_s = 0.0
        self.rejected = 0
        self.interrupted = 0

    def retry_after_s(self) -> int:
        waiting = max(self.admitted - self.workers, 1)
        return max(1, math.ceil(waiting * self.mean_run_s / self.workers))

    async def run(
        self,
        request: Request,
        compute: Callable[[Any], T],
        lookup: Callable[[], Any] = _no_lookup,
    ) -> T:
        """``compute(lookup())`` on a worker thread, within the gate's bounds."""
        if self.admitted >= self.workers + self.queue:
            self.rejected += 1
            retry = self.retry_after_s()
            raise OverloadedError(
                f"the server is computing {self.workers} {self.name} requests with "
                f"{self.queue} waiting; retry after {retry} s",
                headers={"Retry-After": str(retry)},
                retry_after_s=retry,
            )
        ticket: _Ticket[Any, T] = _Ticket(lookup, compute)
        outcome: list[T] = []
        error: list[BaseException] = []
        self.admitted += 1
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    with anyio.move_on_after(self.deadline_s):
                        await _disconnected(request)
                        ticket.interrupt("disconnected")
                        group.cancel_scope.cancel()
                        return
                    ticket.interrupt("deadline")
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                try:
                    outcome.append(await anyio.to_thread.run_sync(ticket, limiter=self._limiter))
                except (Exception, ComputeInterrupted) as exc:
                    error.append(exc)
                group.cancel_scope.cancel()
        finally:
            self.admitted -= 1
        if ticket.run_s:
            self.mean_run_s += EWMA_WEIGHT * (ticket.run_s - self.mean_run_s)
        if outcome:
            return outcome[0]
        if ticket.reason is not None:
            self.interrupted += 1
            if ticket.reason == "disconnected":
                raise ClientGoneError("the client disconnected before the answer was ready")
            raise DeadlineExceededError(
                f"the computation did not finish within {self.deadline_s:g} s "
                "(COMPUTE_DEADLINE_S); ask for less work or retry later",
                deadline_s=self.deadline_s,
            )
        raise error[0]


class Gates:
    """The application's two gates: quick estimates and heavy searches."""

    def __init__(self, *, estimate: ComputeGate, heavy: ComputeGate) -> None:
        self.estimate = estimate
        self.heavy = heavy


async def get_gates(request: Request) -> Gates:
    gates = request.app.state.gates
    assert isinstance(gates, Gates)
    return gates


GatesDep = Annotated[Gates, Depends(get_gates)]
