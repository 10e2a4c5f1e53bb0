"""A fixed-window request counter per client, in process memory."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class RateLimiter:
    """Allow ``limit`` requests per client per ``window_s``; report the wait when over.

    Fixed windows keep the state to one counter per client; a burst of up to ``2 * limit``
    across a window boundary is accepted as the price of that simplicity.
    """

    def __init__(
        self, limit: int, *, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._window_start = clock()
        self._counts: dict[str, int] = {}

    def hit(self, client: str) -> int | None:
        """Count one request; ``None`` when allowed, else whole seconds until the next window."""
        with self._lock:
            now = self._clock()
            if now - self._window_start >= self.window_s:
                self._window_start = now
                self._counts.clear()
            count = self._counts.get(client, 0) + 1
            self._counts[client] = count
            if count <= self.limit:
                return None
            return max(1, math.ceil(self._window_start + self.window_s - now))
