"""Compiled replicas kept by their inputs, so that a service compiles each deployment once.

:func:`~servesize.core.replica.compile_replica` is a pure function of ``(architecture,
hardware, deployment, measurements, engine, calibrated, policy, chunked_prefill, kv_link)``.
:class:`ReplicaCache` keeps the replica it returned, and with it the step-time model whose
tables (:mod:`~servesize.core.steptime.fast`) and estimates (:mod:`~servesize.core.steptime.memo`)
are built on first use: the next request for the same deployment costs a dictionary look-up.

Keys: the deployment, engine profile, KV link and flags by value; the architecture, hardware
spec and measured tables by identity (they hold dicts and arrays). A caller that reloads one of
them after a change (a new profile version, new measurements, an updated custom model) passes
new objects, so a changed input never meets an old replica. Each entry holds its inputs, so
an ``id`` is not reused while the entry lives; the least recently used entry is dropped beyond
``size``. A compilation that raises is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from servesize.core.architecture import Architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment
from servesize.core.replica.compile import KVLink, Replica, compile_replica
from servesize.core.simulation import SchedulingPolicy
from servesize.core.speculative import SpeculativeDecoding
from servesize.core.steptime import EngineProfile, MeasuredProfile

__all__ = ["REPLICA_CACHE_SIZE", "ReplicaCache"]

REPLICA_CACHE_SIZE = 64
"""Compiled replicas a :class:`ReplicaCache` keeps by default."""


class ReplicaCache:
    """See the module docstring. Thread-safe (two threads missing on one key both compile; the
    replicas are equal and the later one is kept)."""

    def __init__(self, size: int = REPLICA_CACHE_SIZE) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Hashable, ...], tuple[Replica, tuple[object, ...]]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def compile(
        self,
        architecture: Architecture,
        hardware: HardwareSpec,
        deployment: Deployment,
        measurements: MeasuredProfile | None = None,
        engine: EngineProfile | None = None,
        *,
        calibrated: bool = True,
        policy: SchedulingPolicy | None = None,
        chunked_prefill: bool = False,
        kv_link: KVLink | None = None,
        speculative: SpeculativeDecoding | None = None,
    ) -> Replica:
        """:func:`~servesize.core.replica.compile_replica` of these inputs, compiled once."""
        key: tuple[Hashable, ...] = (
            id(architecture),
            id(hardware),
            id(measurements),
            deployment,
            engine,
            calibrated,
            policy,
            chunked_prefill,
            kv_link,
            speculative,
        )
        held = (architecture, hardware, measurements)
        try:
            hash(key)
        except TypeError:  # a deployment field that is not hashable: compile, keep nothing
            key = ()
        with self._lock:
            entry = self._entries.get(key) if key else None
            if entry is not None and all(a is b for a, b in zip(entry[1], held, strict=True)):
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[0]
            self.misses += 1
        replica = compile_replica(
            architecture,
            hardware,
            deployment,
            measurements,
            engine,
            calibrated=calibrated,
            policy=policy,
            chunked_prefill=chunked_prefill,
            speculative=speculative,
            kv_link=kv_link,
        )
        if not key:
            return replica
        with self._lock:
            self._entries[key] = (replica, held)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return replica
