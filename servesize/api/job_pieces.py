"""A sizing's (or a sweep's) independent pieces on the embedded process pool.

:class:`PoolMap` is the :class:`~servesize.core.sizing.TaskMap` the embedded executor hands
to a search that runs in the API process (a sizing or sweep job's driver thread, or a
synchronous ``POST /v1/sizing``): every piece (a screening piece, a verification seed, a sweep
combination) is submitted to the pool as ``run_piece(fn, item, cancel)``, and the answers are
gathered in item order, so the answer is the serial one bit for bit, whichever worker ran
which piece. The driver thread only waits (polling every :data:`POLL_S`, so a
``ComputeInterrupted`` raised in it by a deadline lands within that) and does the light serial
steps in between (rank, render).

Cancelling: a cancel flag (a manager ``Event``) travels with every piece; a piece checks it
before it starts and a watcher thread interrupts it while it runs (as a whole job's run is
stopped, :func:`servesize.api.jobs.run_task`). The map raises
:class:`~servesize.api.compute.ComputeInterrupted` once the flag is set, and when it is
interrupted itself it sets the flag and drops its pieces still queued.

A piece that fails makes the map raise the failure of the first failed piece in item order
(after the pieces already running have finished), as the serial search would have.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from typing import Any, Protocol

from servesize.api.compute import ComputeInterrupted, _Ticket

__all__ = ["POLL_S", "PieceCancelledError", "PoolMap", "run_piece", "watched"]

POLL_S = 0.05
"""How often a waiting driver looks at its pieces and its cancel flag."""


class PieceCancelledError(Exception):
    """A piece stopped (or never started) because its cancel flag was set."""


class _Flag(Protocol):
    def is_set(self) -> bool: ...
    def set(self) -> None: ...
    def wait(self, timeout: float | None = ...) -> bool: ...


class _Submit(Protocol):
    def __call__(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]: ...


@contextmanager
def watched(cancel: _Flag, ticket: _Ticket[Any, Any], name: str) -> Iterator[None]:
    """While the body runs, a watcher thread interrupts ``ticket`` once ``cancel`` is set
    (or once the API process holding the flag has gone)."""
    stop = threading.Event()

    def watch() -> None:
        try:
            while not stop.is_set():
                if cancel.wait(POLL_S):
                    ticket.interrupt("cancelled")
                    return
        except (OSError, EOFError):  # the API process (and its manager) went away
            ticket.interrupt("cancelled")

    watcher = threading.Thread(target=watch, name=f"cancel-{name}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()


def run_piece(fn: Callable[[Any], Any], item: Any, cancel: _Flag | None) -> Any:
    """``fn(item)`` in a pool worker, stopped when ``cancel`` is set."""
    if cancel is None:
        return fn(item)
    if cancel.is_set():
        raise PieceCancelledError
    ticket: _Ticket[None, Any] = _Ticket(lambda: None, lambda _: fn(item))
    try:
        with watched(cancel, ticket, "piece"):
            return ticket()
    except ComputeInterrupted:
        raise PieceCancelledError from None


class PoolMap:
    """``map(fn, items, done)`` over the pool (module docstring)."""

    parallel = True

    def __init__(self, submit: _Submit, cancel: _Flag | None) -> None:
        self._submit = submit
        self._cancel = cancel

    def _stop(self, futures: Sequence[Future[Any]]) -> None:
        for future in futures:
            future.cancel()
        if self._cancel is not None:
            self._cancel.set()

    def __call__(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        if self._cancel is not None and self._cancel.is_set():
            raise ComputeInterrupted
        futures = [self._submit(run_piece, fn, item, self._cancel) for item in items]
        try:
            pending: set[Future[Any]] = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
                if finished and done is not None:
                    done(len(futures) - len(pending))
                if self._cancel is not None and self._cancel.is_set():
                    raise ComputeInterrupted
                if any(not f.cancelled() and f.exception() is not None for f in finished):
                    for future in pending:
                        future.cancel()
                    wait(pending)
                    break
        except BaseException:
            self._stop(futures)
            raise
        for future in futures:
            if future.cancelled():
                continue
            exc = future.exception()
            if isinstance(exc, PieceCancelledError):
                raise ComputeInterrupted
            if exc is not None:
                raise exc
        return [future.result() for future in futures]
