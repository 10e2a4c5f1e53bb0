"""A simulated replica's state and the effects of its steps (internal; see
:mod:`.replica_simulator`).

:class:`ReplicaState` holds what a scheduling policy reads and writes: the running set (an
``int64`` array in admission order), the waiting queue (a deque), the KV block pool, the clock
and the step log, with the pending arrivals, deadlines and KV transfers. It applies a decided
step (:meth:`ReplicaState.apply`: tokens, first tokens, ITL samples, departures) and records the
departures, timeouts and rejections of requests.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from servesize.core.simulation._log import StepLog
from servesize.core.simulation.config import SGLANG_INIT_NEW_TOKEN_RATIO, SchedulerConfig
from servesize.core.simulation.host_cache import HostCache
from servesize.core.simulation.kv_pool import KVBlockPool
from servesize.core.simulation.prefix_cache import PrefixCache
from servesize.core.simulation.requests import (
    ACTIVE,
    OK,
    REJECTED,
    TIMED_OUT,
    TRANSFER_MOVING,
    TRANSFER_NONE,
    TRANSFER_PENDING,
    RequestTable,
)
from servesize.core.simulation.steptime import SingleStepTime, StepTimeModel

_INF = math.inf
_EMPTY = np.zeros(0, dtype=np.int64)
_sum = np.add.reduce
_all = np.logical_and.reduce


@dataclass(slots=True)
class StepPlan:
    """A decided step: who computes how many tokens, from when to when."""

    ids: np.ndarray
    tokens: np.ndarray
    computed_before: np.ndarray
    start_s: float
    end_s: float
    row: int
    pure_decode: bool
    admission_blocked: bool
    preempted: bool


class ReplicaState:
    """Queues, KV block pool, clock and step log of one replica (parameters as
    :class:`~servesize.core.simulation.replica_simulator.ReplicaSimulator`)."""

    def __init__(
        self,
        index: int,
        table: RequestTable,
        config: SchedulerConfig,
        step_time: StepTimeModel,
        *,
        prefill_only: bool,
        remote_kv: bool,
        stop_on_exit: bool,
        first_token_after_transfer: bool,
    ) -> None:
        self.index = index
        self.tab = table
        self.cfg = config
        self.step_time = step_time
        self.prefill_only = prefill_only
        self.remote_kv = remote_kv
        self.stop_on_exit = stop_on_exit
        self.first_token_after_transfer = first_token_after_transfer
        self.delay = config.output_delay_steps
        if self.delay and (prefill_only or remote_kv):
            raise ValueError("output_delay_steps is modelled for aggregated engines only")
        self.cap = config.max_waiting_requests
        self.pool = KVBlockPool(
            block_size_tokens=config.block_size_tokens,
            total_blocks=config.num_kv_blocks,
            watermark_blocks=config.watermark_blocks,
            held=table.kv_blocks,
            reserves_whole=config.capacity_policy == "guaranteed_no_evict",
        )
        if (
            config.prefix_caching != "off"
            and table.prefix_group is not None
            and table.prefix_shared_tokens is not None
            and not remote_kv
        ):
            self.pool.prefix = PrefixCache(
                group=table.prefix_group,
                shared_tokens=table.prefix_shared_tokens,
                num_tokens=table.num_tokens,
                block_size_tokens=config.block_size_tokens,
                total_blocks=config.num_kv_blocks,
                eviction=config.prefix_caching,
            )
        host = config.host_kv
        if host is not None and not remote_kv:
            self.pool.host = HostCache(
                capacity_blocks=host.blocks,
                block_size_tokens=config.block_size_tokens,
                block_load_s=host.block_load_s,
                overlap=host.overlap,
                reload_own=host.reload_preempted,
                computed=table.computed_tokens,
                num_tokens=table.num_tokens,
                group=table.prefix_group,
                shared_tokens=table.prefix_shared_tokens,
            )
        self.running = np.zeros(0, dtype=np.int64)
        self.waiting: deque[int] = deque()
        self.n_waiting = 0
        self.n_moving = 0
        self.arr_ids: list[int] = []
        self.arr_times: list[float] = []
        self.arr_ptr = 0
        self.deadlines: list[tuple[float, int]] = []
        self.transfers: list[tuple[float, int]] = []
        self.t = -_INF
        self.steps = 0
        self.decode_steps = 0
        """Steps without prefill tokens so far (SGLang's ``new_token_ratio`` decays on them)."""
        self.token_ratio_anchor = SGLANG_INIT_NEW_TOKEN_RATIO
        """SGLang ``new_token_ratio`` as last set, and :attr:`decode_steps` when it was set
        (:mod:`servesize.core.simulation.policies.capacity`)."""
        self.token_ratio_anchor_step = 0
        self._last_exit_time = -_INF
        self._last_exit_count = 0
        self.last_duration_s = 0.0
        self.exits: list[int] = []
        self.pushed = 0
        self.exited = 0
        self.lag_s = 0.0
        self.log = StepLog()
        self.itl_extra_s: list[float] = []
        self.preemption_s: list[float] = []
        """One entry per preemption (or SGLang retraction): the start of the step whose
        scheduling evicted the request (engine clock)."""
        self.idle: list[tuple[float, float, int]] = []
        # A model that can cost one step without arrays is called that way for single steps.
        self._step_s: Callable[[int, float, int, int, int], float] | None = (
            step_time.single_step_s if isinstance(step_time, SingleStepTime) else None
        )
        # One-step feature buffers, reused for every single-step evaluation.
        self._features = (
            np.zeros(1, dtype=np.int64),
            np.zeros(1, dtype=np.float64),
            np.zeros(1, dtype=np.int64),
            np.zeros(1, dtype=np.int64),
            np.zeros(1, dtype=np.int64),
        )

    # ------------------------------------------------------------------ events

    def has_work(self) -> bool:
        return self.running.size > 0 or self.n_waiting > self.n_moving

    def _next_arrival(self) -> float:
        p = self.arr_ptr
        return self.arr_times[p] if p < len(self.arr_times) else _INF

    def _next_transfer(self) -> float:
        h = self.transfers
        tab = self.tab
        while h:
            end, r = h[0]
            if tab.transfer_state[r] == TRANSFER_MOVING and tab.owner[r] == self.index:
                return end
            heapq.heappop(h)
        return _INF

    def next_deadline(self) -> float:
        h = self.deadlines
        tab = self.tab
        while h:
            d, r = h[0]
            if tab.status[r] == ACTIVE and tab.owner[r] == self.index:
                return d
            heapq.heappop(h)
        return _INF

    def next_event(self) -> float:
        """The next arrival (or, on a decode replica, transfer completion)."""
        nxt = self._next_arrival()
        if self.remote_kv:
            nxt = min(nxt, self._next_transfer())
        return nxt

    def admit_arrivals(self, t: float) -> None:
        """Queue the arrivals due by ``t`` (rejecting those that find the queue full)."""
        times = self.arr_times
        p = self.arr_ptr
        if p >= len(times) or times[p] > t:
            return
        ids = self.arr_ids
        tab = self.tab
        cap = self.cap
        deadline = tab.deadline_s
        while p < len(times) and times[p] <= t:
            r = ids[p]
            self.lag_s += t - times[p]
            p += 1
            if cap is not None and self.n_waiting >= cap:
                self.reject(r, t)
                continue
            self.waiting.append(r)
            self.n_waiting += 1
            if self.remote_kv:
                tab.transfer_state[r] = TRANSFER_PENDING
            d = float(deadline[r])
            if d != _INF:
                heapq.heappush(self.deadlines, (d, r))
        self.arr_ptr = p

    def expire(self, t: float) -> bool:
        """Drop requests whose deadline passed before ``t`` (the client has given up).
        Returns whether any was dropped."""
        h = self.deadlines
        if not h or h[0][0] >= t:
            return False
        tab = self.tab
        pool = self.pool
        dropped = dropped_running = False
        while h and h[0][0] < t:
            _, r = heapq.heappop(h)
            if tab.status[r] != ACTIVE or tab.owner[r] != self.index:
                continue
            dropped = True
            self.settle(r)
            tab.status[r] = TIMED_OUT
            tab.exit_s[r] = t
            tab.owner[r] = -1
            pool.release(r)
            if tab.is_running[r]:
                tab.is_running[r] = False
                dropped_running = True
            else:
                self.n_waiting -= 1
                if tab.transfer_state[r] == TRANSFER_MOVING:
                    self.n_moving -= 1
                tab.transfer_state[r] = TRANSFER_NONE
            self.exits.append(r)
            self.exited += 1
        if dropped_running:
            self.running = self.running[tab.is_running[self.running]]
        return dropped

    def complete_transfers(self, t: float) -> None:
        """KV that has arrived by ``t``: the request becomes an ordinary resumable request."""
        h = self.transfers
        tab = self.tab
        while h and h[0][0] <= t:
            end, r = heapq.heappop(h)
            if tab.transfer_state[r] != TRANSFER_MOVING or tab.owner[r] != self.index:
                continue
            tab.transfer_state[r] = TRANSFER_NONE
            self.n_moving -= 1
            tab.computed_tokens[r] = tab.prompt_tokens[r]
            if self.first_token_after_transfer:
                tab.last_token_s[r] = end
                tab.first_token_s[r] = end

    def start_transfer(self, r: int, t: float, blocks: int) -> None:
        """Reserve ``blocks`` for waiting request ``r`` and start pulling its KV at ``t``."""
        tab = self.tab
        self.pool.reserve(r, blocks)
        tab.transfer_state[r] = TRANSFER_MOVING
        end = t + float(tab.transfer_s[r])
        tab.transfer_start_s[r] = t
        tab.transfer_end_s[r] = end
        heapq.heappush(self.transfers, (end, r))
        self.n_moving += 1

    # ------------------------------------------------------------------ bookkeeping

    def blocks_for_whole(self, r: int) -> int:
        """Blocks request ``r`` holds at its largest: prompt + output - 1 tokens, plus the
        hidden ones of an output delay (prompt only on a prefill replica)."""
        return self.pool.blocks_for(self.whole_tokens(r))

    def whole_tokens(self, r: int) -> int:
        """Tokens request ``r`` holds in KV at its largest (see :meth:`blocks_for_whole`)."""
        tab = self.tab
        return int(tab.prompt_tokens[r] if self.prefill_only else tab.final_tokens[r] - 1)

    def settle(self, ids: np.ndarray | int) -> None:
        """On leaving, count only visible tokens: ``generated = max(computed outputs - delay, 0)``
        (the request table's ``num_tokens`` then reads as prompt + streamed tokens)."""
        if self.delay:
            tab = self.tab
            tab.num_tokens[ids] = np.maximum(
                tab.num_tokens[ids] - self.delay, tab.prompt_tokens[ids]
            )

    def reject(self, r: int, t: float) -> None:
        tab = self.tab
        self.settle(r)
        tab.status[r] = REJECTED
        tab.exit_s[r] = t
        tab.owner[r] = -1
        self.exits.append(r)
        self.exited += 1

    def drop_waiting(self, r: int, t: float) -> None:
        """Reject waiting request ``r`` at ``t``, releasing any blocks it holds."""
        self.waiting.remove(r)
        self.n_waiting -= 1
        if self.tab.transfer_state[r] == TRANSFER_MOVING:
            self.n_moving -= 1
        self.tab.transfer_state[r] = TRANSFER_NONE
        self.pool.release(r)
        self.reject(r, t)

    def requeue_preempted(self, v: int, t: float, *, to_back: bool = False) -> None:
        """Running request ``v`` was preempted while the step starting at ``t`` was scheduled
        (its blocks are freed): it recomputes everything it holds and goes back to the head of
        the waiting queue (``to_back``: its tail, as SGLang's ``_add_request_to_queue`` does
        with a retracted request)."""
        self.preemption_s.append(t)
        tab = self.tab
        tab.computed_tokens[v] = 0
        tab.prefill_end_tokens[v] = tab.num_tokens[v]
        tab.num_preemptions[v] += 1
        tab.is_running[v] = False
        tab.transfer_state[v] = TRANSFER_NONE
        if to_back:
            self.waiting.append(v)
        else:
            self.waiting.appendleft(v)
        self.n_waiting += 1

    # ------------------------------------------------------------------ steps

    def plan_step(
        self,
        t: float,
        ids: np.ndarray,
        tokens: np.ndarray,
        c_before: np.ndarray,
        *,
        pure_decode: bool,
        blocked: bool,
        preempted: bool,
    ) -> StepPlan:
        """Cost and log the step that computes ``tokens`` for ``ids`` from ``t``."""
        tab = self.tab
        if self.pool.prefix is not None:
            self.pool.prefix.cache_scheduled(ids, c_before + tokens)
        is_prefill = c_before < tab.prefill_end_tokens[ids]
        seqs = int(ids.size)
        if self.pool.host is not None:
            self.pool.host.store_scheduled(ids[is_prefill], (c_before + tokens)[is_prefill])
        if np.count_nonzero(is_prefill):
            chunk = tokens[is_prefill]
            ctx = c_before[is_prefill]
            prefill_tokens = int(_sum(chunk))
            attention = float(_sum(chunk * (ctx + 0.5 * chunk)))
            is_decode = ~is_prefill
            decodes = int(np.count_nonzero(is_decode))
            context = int(_sum(c_before[is_decode])) + decodes
        else:
            prefill_tokens, attention = 0, 0.0
            decodes = seqs
            context = int(_sum(c_before)) + seqs
        duration = self._step_duration(prefill_tokens, attention, decodes, context, seqs)
        host = self.pool.host
        if host is not None and host.pending_load_s:
            load = host.take_pending()
            duration = max(duration, load) if host.overlap else duration + load
        row = self.log.append_row(
            t,
            duration,
            prefill_tokens,
            attention,
            decodes,
            context,
            seqs,
            self.pool.total_blocks - self.pool.free_blocks,
            self.n_waiting,
            int(self.running.size),
        )
        self.steps += 1
        if prefill_tokens == 0:
            self.decode_steps += 1
        return StepPlan(
            ids=ids,
            tokens=tokens,
            computed_before=c_before,
            start_s=t,
            end_s=t + duration,
            row=row,
            pure_decode=pure_decode and prefill_tokens == 0,
            admission_blocked=blocked,
            preempted=preempted,
        )

    def _step_duration(
        self, prefill_tokens: int, attention: float, decodes: int, context: int, seqs: int
    ) -> float:
        scalar = self._step_s
        if scalar is not None:
            duration = float(scalar(prefill_tokens, attention, decodes, context, seqs))
        else:
            f = self._features
            f[0][0], f[1][0], f[2][0], f[3][0], f[4][0] = (
                prefill_tokens,
                attention,
                decodes,
                context,
                seqs,
            )
            duration = float(self.step_time(f[0], f[1], f[2], f[3], f[4])[0])
        if not (duration > 0 and duration < _INF):
            raise ValueError(f"step time must be finite and > 0, got {duration}")
        self.last_duration_s = duration
        return duration

    def apply(self, p: StepPlan) -> bool:
        """Apply a decided step; returns whether every request in it produced a token."""
        tab = self.tab
        ids = p.ids
        end = p.end_s
        self.t = end
        newc = p.computed_before + p.tokens
        tab.computed_tokens[ids] = newc
        emit = newc == tab.num_tokens[ids]
        # A request that emits has computed all its tokens: it now holds one more.
        if _all(emit):
            em, ntok = ids, newc + 1
        else:
            em, ntok = ids[emit], newc[emit] + 1
        ne = int(em.size)
        weight = 0
        hidden = _EMPTY
        if ne:
            tab.num_tokens[em] = ntok
            # A token is a regular ITL sample (gap = this step's duration) iff the request's
            # previous token came out when this step started.
            regular = tab.last_token_s[em] == p.start_s
            if _all(regular):
                weight = int(np.count_nonzero(tab.in_window[em]))
            else:
                weight = int(np.count_nonzero(tab.in_window[em[regular]]))
                other = em[~regular]
                last = tab.last_token_s[other]
                first = np.isnan(last)
                n_first = np.count_nonzero(first)
                if n_first:
                    shown = first
                    if self.delay:
                        # The first computed token(s) of an output delay stay hidden.
                        early = tab.num_tokens[other] - tab.prompt_tokens[other] <= self.delay
                        hidden = other[first & early]
                        shown = first & ~early
                    tab.first_token_s[other[shown]] = end
                if n_first < first.size:
                    gap_ids = other[~first]
                    counted = tab.in_window[gap_ids]
                    if np.count_nonzero(counted):
                        gaps = end - tab.last_token_s[gap_ids[counted]]
                        self.itl_extra_s.extend(gaps.tolist())
            tab.last_token_s[em] = end
            if hidden.size:
                tab.last_token_s[hidden] = np.nan
                ne -= int(hidden.size)
            done = em if self.prefill_only else em[ntok >= tab.final_tokens[em]]
            if done.size:
                self.leave(done, end)
        cols = self.log.columns
        cols["output_tokens"][p.row] = ne
        cols["itl_weight"][p.row] = weight
        return ne == ids.size

    def leave(self, done: np.ndarray, end: float) -> None:
        """Requests that finished (on a prefill worker: finished their prefill) at ``end``."""
        tab = self.tab
        self.pool.release_many(done)
        self.settle(done)
        tab.is_running[done] = False
        tab.owner[done] = -1
        self.running = self.running[tab.is_running[self.running]]
        finished = done
        if self.prefill_only:
            more = tab.output_tokens[done] > 1
            tab.handoff_s[done[more]] = end
            finished = done[~more]
        if finished.size:
            tab.finish_s[finished] = end
            tab.exit_s[finished] = end
            late = end > tab.deadline_s[finished]
            tab.status[finished] = np.where(late, TIMED_OUT, OK).astype(np.int8)
        self.exits.extend(done.tolist())
        self.exited += int(done.size)
        self._last_exit_time = end
        self._last_exit_count = int(done.size)
