"""A sizing's pieces as Celery tasks: the :class:`~servesize.core.sizing.TaskMap` of a sizing
job driven from the API process when ``BROKER_URL`` is set.

Each ``map(fn, items)`` of the search (its screening pieces, then each verification's seeds)
is sent as a :func:`celery.group` of ``servesize.piece`` tasks, ``piece(fn, item) = fn(item)``,
with task ids ``{job}.p{n}`` numbered in the order the search sends them (the search is
deterministic, so a re-run sends the same pieces under the same ids). The driver polls the
group every :data:`POLL_S`, reports how many have finished, and gathers the results in item
order; a failed piece fails the map with its exception (the first in item order of those
failed when it is seen). A set cancel
flag revokes the unfinished pieces (terminating running ones) and raises
:class:`~servesize.api.compute.ComputeInterrupted`.

Piece results are pickled objects (plans, compiled replicas): the result backend, like the
broker, must be a trusted, private service.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from celery import Celery, group
from celery.result import AsyncResult, GroupResult
from celery.states import FAILURE, READY_STATES, REVOKED

from servesize.api.compute import ComputeInterrupted

__all__ = ["PIECE_TASK", "CeleryMap"]

PIECE_TASK = "servesize.piece"
POLL_S = 0.1
"""How often the driver reads its pieces' states."""


class _DetachedError(Exception):
    """The API process stops: leave the pieces running."""


class CeleryMap:
    """``map(fn, items, done)`` over ``servesize.piece`` tasks (module docstring)."""

    parallel = True

    def __init__(
        self,
        celery: Celery,
        *,
        queue: str,
        job_id: str,
        cancel: threading.Event,
        stop: threading.Event,
    ) -> None:
        self._stop = stop
        """Set when the API process stops: the driver leaves, its pieces keep running."""
        self._celery = celery
        self._queue = queue
        self._job_id = job_id
        self._cancel = cancel
        self._sent = 0
        self.outstanding: list[str] = []
        """Ids of the pieces of the map in progress (revoked on cancel)."""

    def _revoke(self, results: Sequence[AsyncResult[Any]]) -> None:
        ids = [r.id for r in results if r.state not in READY_STATES]
        if ids:
            self._celery.control.revoke(ids, terminate=True, signal="SIGKILL")

    def __call__(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        if self._cancel.is_set():
            raise ComputeInterrupted
        piece = self._celery.tasks[PIECE_TASK]
        first, self._sent = self._sent, self._sent + len(items)
        sent = group(
            piece.signature((fn, item), task_id=f"{self._job_id}.p{first + i}", queue=self._queue)
            for i, item in enumerate(items)
        ).apply_async()
        assert isinstance(sent, GroupResult)
        results: list[AsyncResult[Any]] = list(sent.results or [])
        self.outstanding = [r.id for r in results]
        finished = 0
        try:
            while True:
                states = [str(r.state) for r in results]
                ready = sum(s in READY_STATES for s in states)
                if ready != finished:
                    finished = ready
                    if done is not None:
                        done(ready)
                if self._stop.is_set():
                    raise _DetachedError
                if self._cancel.is_set():
                    raise ComputeInterrupted
                if ready == len(results) or FAILURE in states or REVOKED in states:
                    break
                time.sleep(POLL_S)
        except _DetachedError:
            raise ComputeInterrupted from None
        except BaseException:
            self._revoke(results)
            raise
        for result, state in zip(results, states, strict=True):
            if state == REVOKED:
                raise ComputeInterrupted
            if state == FAILURE:
                self._revoke(results)
                exc = result.result
                raise exc if isinstance(exc, BaseException) else RuntimeError(str(exc))
        values = [r.result for r in results]
        for result in results:
            result.forget()
        self.outstanding = []
        return values
