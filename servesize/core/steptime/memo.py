"""Closed-loop estimates of one workload point kept by their inputs, per step-time model.

:func:`~servesize.core.steptime.serving.closed_loop` of one point is a deterministic function of
the step-time model and ``(C, P, n, kv_capacity_tokens, policy, output_delay_steps,
mean_field)``: the fixed point, the lock-step loop and the reported steps involve nothing
random. A caller that asks again with the same model object (a compiled replica kept by
:class:`~servesize.core.replica.ReplicaCache`, a planner probing one point twice) gets the
estimate computed the first time, so the answer is the same bit for bit. A hit returns fresh
copies of the arrays: what a caller does to one answer does not reach the next.

The last :data:`MEMO_SIZE` points are kept, over all models; an entry holds its model, so an
``id``-based key is never reused by another object while the entry lives.

:func:`shared_value` keeps intermediate results the same way (the open-loop mean-field state
at a grid of resident counts, which every rate of a capacity bisection recomputes): the same
object is handed out, so it is only for values nobody modifies.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import fields
from typing import Any, TypeVar

import numpy as np

from servesize.core.steptime.model import StepTimeModel

__all__ = [
    "MEMO_SIZE",
    "SHARED_SIZE",
    "clear_estimates",
    "memo_stats",
    "memoized_estimate",
    "shared_value",
]

MEMO_SIZE = 1024
"""Workload points kept (least recently used dropped first)."""

ServingEstimate = TypeVar("ServingEstimate")
"""``serving.ServingEstimate`` (a frozen dataclass; not imported, serving imports this module)."""

SHARED_SIZE = 256
"""Intermediate values kept by :func:`shared_value` (least recently used dropped first)."""

_memo: OrderedDict[tuple[Hashable, ...], tuple[StepTimeModel, Any]] = OrderedDict()
_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0}
_shared: OrderedDict[tuple[Hashable, ...], tuple[StepTimeModel, Any]] = OrderedDict()
Value = TypeVar("Value")


def _copy(estimate: ServingEstimate) -> ServingEstimate:
    """The estimate with its arrays and ``sources`` copied (the rest is immutable)."""
    values: dict[str, Any] = {}
    for f in fields(estimate):  # type: ignore[arg-type]
        value = getattr(estimate, f.name)
        if isinstance(value, np.ndarray):
            value = value.copy()
        elif isinstance(value, dict):
            value = dict(value)
        values[f.name] = value
    return type(estimate)(**values)


def memoized_estimate(
    model: StepTimeModel,
    key: tuple[Hashable, ...],
    compute: Callable[[], ServingEstimate],
) -> ServingEstimate:
    """``compute()`` for ``model`` at ``key``, or a copy of the estimate it gave before."""
    full = (id(model), *key)
    with _lock:
        entry = _memo.get(full)
        if entry is not None and entry[0] is model:
            _memo.move_to_end(full)
            _stats["hits"] += 1
            kept: ServingEstimate = _copy(entry[1])
            return kept
        _stats["misses"] += 1
    estimate = compute()
    with _lock:
        _memo[full] = (model, _copy(estimate))
        while len(_memo) > MEMO_SIZE:
            _memo.popitem(last=False)
    return estimate


def shared_value(
    model: StepTimeModel, key: tuple[Hashable, ...], compute: Callable[[], Value]
) -> Value:
    """``compute()`` for ``model`` at ``key``, or the very object it gave before (callers
    must not modify it)."""
    full = (id(model), *key)
    with _lock:
        entry = _shared.get(full)
        if entry is not None and entry[0] is model:
            _shared.move_to_end(full)
            kept: Value = entry[1]
            return kept
    value = compute()
    with _lock:
        _shared[full] = (model, value)
        while len(_shared) > SHARED_SIZE:
            _shared.popitem(last=False)
    return value


def clear_estimates() -> None:
    """Forget every kept estimate and intermediate value (a benchmark timing the computation
    itself)."""
    with _lock:
        _memo.clear()
        _shared.clear()


def memo_stats() -> dict[str, int]:
    """Hits and misses since the process started, and the points kept."""
    with _lock:
        return {**_stats, "size": len(_memo)}
