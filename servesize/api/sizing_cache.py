"""The sizing answer cache: one per application (``app.state.sizing_cache``, made by the app
factory), reached by routes as the ``SizingCacheDep`` dependency.

An answer is a pure function of the request body, the model's config, the searched hardware
profiles (figures, prices and version), and the measurements the planner reads for them, so the
key is a SHA-256 of all of these; measurements are never updated, so their ids name their
contents. An upload therefore changes the key of every sizing over its profile, and the old
answer ages out of the LRU.

With a shared store (``STATE_STORE`` ``database`` or ``redis``) every answer is also written
there, with a TTL, and a local miss reads it: an answer one API process computed is a hit in
the others. The local LRU stays in front (an answer never changes under its key).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Annotated, Any

from fastapi import Depends, Request

from servesize.api.metrics import HttpMetrics
from servesize.api.shared_state import AnswerStore
from servesize.schemas.sizing import SizingResponse

CACHE_ENTRIES = 32


def sizing_key(**parts: Any) -> str:
    """SHA-256 of ``parts`` as canonical JSON (sorted keys; other types by ``str``)."""
    canonical = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class SizingCache:
    """A thread-safe LRU of sizing responses by :func:`sizing_key`.

    With ``metrics``, every lookup counts as a hit or a miss, and every answer stored (each
    one computed) records its duration, candidates and simulated requests."""

    def __init__(
        self,
        entries: int = CACHE_ENTRIES,
        *,
        metrics: HttpMetrics | None = None,
        shared: AnswerStore | None = None,
        ttl_s: float = 3600.0,
    ) -> None:
        if entries < 1:
            raise ValueError(f"entries must be >= 1, got {entries}")
        self.entries = entries
        self.metrics = metrics
        self.shared = shared
        self.ttl_s = ttl_s
        self._answers: OrderedDict[str, SizingResponse] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> SizingResponse | None:
        """The cached answer, marked ``cached``, or ``None``."""
        with self._lock:
            hit = self._answers.get(key)
            if hit is not None:
                self._answers.move_to_end(key)
        if hit is None and self.shared is not None:
            body = self.shared.get(key)
            if body is not None:
                hit = SizingResponse.model_validate(body)
                self._remember(key, hit)
        if self.metrics is not None:
            self.metrics.sizing_cache(hit=hit is not None)
        if hit is None:
            return None
        return hit.model_copy(update={"cached": True})

    def put(self, key: str, response: SizingResponse) -> None:
        if self.metrics is not None:
            self.metrics.sizing_answer(
                elapsed_s=response.elapsed_s,
                candidates_evaluated=response.candidates_evaluated,
                simulated_requests=response.simulated_requests,
            )
        if self.shared is not None:
            self.shared.put(key, response.model_dump(mode="json"), self.ttl_s)
        self._remember(key, response)

    def _remember(self, key: str, response: SizingResponse) -> None:
        with self._lock:
            self._answers[key] = response
            self._answers.move_to_end(key)
            while len(self._answers) > self.entries:
                self._answers.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._answers)


async def get_sizing_cache(request: Request) -> SizingCache:
    """The application's cache."""
    cache: SizingCache = request.app.state.sizing_cache
    return cache


SizingCacheDep = Annotated[SizingCache, Depends(get_sizing_cache)]
