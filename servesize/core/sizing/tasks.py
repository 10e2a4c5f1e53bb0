"""How a sizing runs its independent pieces: a map over pure tasks, gathered in order.

A sizing has two kinds of independent work: screening candidates (each one's prune, build and
Tier A screen reads only the sizing's fixed inputs) and the first
:data:`~servesize.core.sizing.verify.MIN_REPLICATIONS` seeds of a verification (each one a
simulation of one plan on its own seed). :func:`~servesize.core.sizing.search.size` hands both
to a :class:`TaskMap`: ``map(fn, items)`` returns ``[fn(item) for item in items]`` in item
order, however and wherever it runs them. ``fn`` is a module-level function and each item
carries everything the piece reads (seeds included), so a process pool or a distributed
engine can run them on any worker and the answer is the same bit for bit.

:func:`serial_map` (the default) runs them in this thread; ``parallel = False`` tells the
search to screen all candidates as one piece (one step-time model cache for the whole space,
as before the split).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["TaskMap", "serial_map"]

T = TypeVar("T")
R = TypeVar("R")


class TaskMap(Protocol):
    """``map(fn, items, done)`` → ``[fn(item) for item in items]`` (in order); ``done(k)``
    after ``k`` items have finished, in any order."""

    parallel: bool

    def __call__(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        done: Callable[[int], None] | None = None,
    ) -> list[Any]: ...


class _SerialMap:
    parallel = False

    def __call__(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        out: list[Any] = []
        for item in items:
            out.append(fn(item))
            if done is not None:
                done(len(out))
        return out


serial_map: TaskMap = _SerialMap()
"""Every piece in the calling thread, one after another."""
