"""The simulator's per-request state, shared by every replica of a simulation (internal).

One array per field, indexed by request id (struct of arrays). A request's ``status`` is
:data:`UNSENT` until its client sends it, :data:`ACTIVE` while a replica holds it, then one of the
terminal values of :class:`~servesize.core.simulation.result.RequestStatus`.
"""

from __future__ import annotations

import math

import numpy as np

UNSENT = -2
ACTIVE = -1
OK = 0
TIMED_OUT = 1
REJECTED = 2

TRANSFER_NONE = 0
TRANSFER_PENDING = 1  # waiting for blocks on the decode replica
TRANSFER_MOVING = 2  # blocks reserved, KV in flight

_INF = math.inf


class RequestTable:
    """Per-request state, one array per field, indexed by request id.

    Token counts follow vLLM's ``Request``: ``computed_tokens`` are in the KV cache,
    ``num_tokens = prompt + generated``; a step brings ``computed_tokens`` up to ``num_tokens``.

    Attributes
    ----------
    prompt_tokens, output_tokens : numpy.ndarray
        Requested lengths (``int64``).
    timeout_s : numpy.ndarray
        Client timeout, measured from the send time (``inf`` for none).
    in_window : numpy.ndarray
        Whether the request is measured (``bool``).
    overhead_s : float
        Client-side latency outside the replicas.
    arrival_s, deadline_s : numpy.ndarray
        Send time, and the time after which the replica drops the request.
    final_tokens : numpy.ndarray
        ``num_tokens`` at which the request leaves (prompt + output, + the hidden tokens of an
        output delay).
    computed_tokens, num_tokens : numpy.ndarray
        Tokens in the KV cache; prompt + generated tokens.
    prefill_end_tokens : numpy.ndarray
        ``computed_tokens`` below which a step computes prefill (the prompt; everything after a
        preemption, since a resumed request recomputes its generated tokens too).
    kv_blocks : numpy.ndarray
        KV blocks held; written only by :class:`~servesize.core.simulation.kv_pool.KVBlockPool`.
    first_scheduled_s, first_token_s, last_token_s, finish_s, exit_s : numpy.ndarray
        First admission, first visible token, latest visible token, completion, departure.
    num_preemptions : numpy.ndarray
        Times the request was preempted (recompute).
    status : numpy.ndarray
        ``UNSENT``, ``ACTIVE`` or a terminal status (``int8``).
    owner : numpy.ndarray
        Replica that holds the request now (-1: none).
    is_running : numpy.ndarray
        Whether the request is in its replica's running set.
    replica, decode_replica : numpy.ndarray
        Replica it was routed to (on a disaggregated pair: the prefill one), and its decode
        replica (-1 if none).
    handoff_s : numpy.ndarray
        When a prefill replica handed the request over to the decode pool.
    transfer_state : numpy.ndarray
        ``TRANSFER_NONE``, ``TRANSFER_PENDING`` or ``TRANSFER_MOVING`` (``int8``).
    transfer_s, transfer_start_s, transfer_end_s : numpy.ndarray
        KV transfer duration, start and end.
    prefix_group, prefix_shared_tokens : numpy.ndarray or None
        The shared prefix of each request (-1: none) and the prompt tokens it covers; None for a
        workload without shared prefixes.
    """

    def __init__(
        self,
        *,
        prompt_tokens: np.ndarray,
        output_tokens: np.ndarray,
        timeout_s: np.ndarray,
        in_window: np.ndarray,
        overhead_s: float,
    ) -> None:
        n = int(prompt_tokens.size)
        self.size = n
        self.prompt_tokens = prompt_tokens.astype(np.int64, copy=True)
        self.output_tokens = output_tokens.astype(np.int64, copy=True)
        self.timeout_s = timeout_s.astype(np.float64, copy=True)
        self.in_window = in_window.astype(bool, copy=True)
        self.overhead_s = overhead_s
        self.arrival_s = np.full(n, np.nan)
        self.deadline_s = np.full(n, _INF)
        self.final_tokens = self.prompt_tokens + self.output_tokens
        self.computed_tokens = np.zeros(n, dtype=np.int64)
        self.num_tokens = self.prompt_tokens.copy()
        self.prefill_end_tokens = self.prompt_tokens.copy()
        self.kv_blocks = np.zeros(n, dtype=np.int64)
        self.first_scheduled_s = np.full(n, np.nan)
        self.first_token_s = np.full(n, np.nan)
        self.last_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.exit_s = np.full(n, np.nan)
        self.num_preemptions = np.zeros(n, dtype=np.int64)
        self.status = np.full(n, UNSENT, dtype=np.int8)
        self.owner = np.full(n, -1, dtype=np.int32)
        self.is_running = np.zeros(n, dtype=bool)
        self.replica = np.full(n, -1, dtype=np.int32)
        self.decode_replica = np.full(n, -1, dtype=np.int32)
        self.handoff_s = np.full(n, np.nan)
        self.transfer_state = np.zeros(n, dtype=np.int8)
        self.transfer_s = np.zeros(n, dtype=np.float64)
        self.transfer_start_s = np.full(n, np.nan)
        self.transfer_end_s = np.full(n, np.nan)
        self.prefix_group: np.ndarray | None = None
        self.prefix_shared_tokens: np.ndarray | None = None

    def send(self, r: int, t: float) -> None:
        """Mark request ``r`` as sent at ``t``; its replica deadline is
        ``t + timeout - client overheads`` (so a client-observed E2E above the timeout fails)."""
        self.arrival_s[r] = t
        self.deadline_s[r] = t + self.timeout_s[r] - self.overhead_s
        self.status[r] = ACTIVE

    def send_all(self, arrival_s: np.ndarray) -> None:
        """Vectorised :meth:`send` for an open loop."""
        self.arrival_s[:] = arrival_s
        self.deadline_s[:] = arrival_s + self.timeout_s - self.overhead_s
        self.status[:] = ACTIVE
