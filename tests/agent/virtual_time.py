"""An asyncio event loop on virtual time, for timing tests that hold on a loaded machine.

The loop's clock moves only when every task waits: where a normal loop would block in
``select`` until the next timer, this one jumps its clock to that timer and carries on. So
``asyncio.sleep(0.05)`` takes exactly 0.05 virtual seconds however busy the CPU is, and a
latency measured on ``loop.time`` is the sum of the sleeps on its path, to rounding.

Only for code that waits on timers alone (``httpx2.MockTransport`` rather than sockets): a task
waiting on I/O with no timer set is a deadlock here, reported as such.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("every task waits and no timer is set: nothing can wake the loop")
        self._loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` starts at 0 and jumps from timer to timer."""

    def __init__(self) -> None:
        self._now_s = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self._now_s

    def advance(self, seconds: float) -> None:
        self._now_s += seconds


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a fresh :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)


def virtual_clock() -> float:
    """The running loop's clock: pass as ``clock=`` to code run under :func:`run_virtual`."""
    return asyncio.get_running_loop().time()
