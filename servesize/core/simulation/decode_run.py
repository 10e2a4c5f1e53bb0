"""Skip-ahead over decode runs: steps that provably repeat one batch of decodes (internal).

A step whose batch is all decodes and whose successors provably repeat it (no completion, KV
shortage, deadline or transfer before their start, and no arrival unless admission is blocked
anyway) is extended into a *decode run*: the run's step times are evaluated in one vectorised
call (:class:`~servesize.core.simulation.steptime.DecodeRunStepTime` when the model has it) and
its effects applied in closed form (docs/modeling.md §3.8). The result is identical to stepping one
step at a time, which the tests assert.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from servesize.core.simulation.replica_state import ReplicaState
from servesize.core.simulation.steptime import DecodeRunStepTime, StepTimeModel

_INF = math.inf
# Steps per vectorised step-time call in a decode run grow geometrically from this size.
_FIRST_RUN_CHUNK = 8
_EMPTY_F = np.zeros(0, dtype=np.float64)
_sum = np.add.reduce
_min = np.minimum.reduce
_max = np.maximum.reduce


@dataclass(slots=True, kw_only=True)
class DecodeRun:
    """A batch of decodes repeated step after step (see :meth:`DecodeRunAccelerator.open`)."""

    ids: np.ndarray
    computed: np.ndarray
    remaining: np.ndarray
    first_done: int
    crossing_offsets: np.ndarray
    batch: int
    context: int
    free_blocks: int
    max_steps: int
    window_weight: int
    absorb: bool
    end_s: float
    steps: int = 0
    chunks_evaluated: int = 0
    ahead_durations: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    starts: list[np.ndarray] = field(default_factory=list)
    durations: list[np.ndarray] = field(default_factory=list)
    waiting: list[int | np.ndarray] = field(default_factory=list)


class DecodeRunAccelerator:
    """Opens, extends and closes the decode runs of one replica."""

    __slots__ = ("_decode_run_s", "run", "step_time")

    def __init__(self, step_time: StepTimeModel) -> None:
        self.step_time = step_time
        self.run: DecodeRun | None = None
        # A model that costs a run of pure-decode steps of one batch in one call is called that
        # way (equal to its vectorised call on those steps).
        self._decode_run_s = (
            step_time.decode_run_s if isinstance(step_time, DecodeRunStepTime) else None
        )

    @staticmethod
    def absorbs_arrivals(state: ReplicaState, admission_blocked: bool) -> bool:
        """Whether arrivals during the run just join the queue (nothing could be admitted)."""
        return admission_blocked and state.cap is None and not state.remote_kv

    def cut_at_once(self, state: ReplicaState, admission_blocked: bool) -> bool:
        """Whether a decode run starting now would stop before its first step (an arrival or
        transfer at or before its start, unless arrivals are absorbed, or a deadline before
        it); stepping then does the same with less work."""
        t = state.t
        absorb = admission_blocked and state.cap is None and not state.remote_kv
        if not absorb and state.next_event() <= t:
            return True
        return state.next_deadline() < t

    def open(self, state: ReplicaState, admission_blocked: bool) -> None:
        """Start a decode run from the current batch (all decodes, just stepped).

        With ``B`` decodes, ``c_i`` tokens in KV and ``F`` free blocks, step ``k`` (from 0)
        needs a new block for request ``i`` iff ``(c_i + k) mod bs = 0``; the first crossing is
        ``k0_i = (-c_i) mod bs`` and crossings repeat every ``bs`` steps, so sorted ``k0``
        gives the crossings up to step ``k`` in closed form, ``(k // bs)·B + #{k0 <= k mod bs}``,
        and the step of the ``(F + 1)``-th crossing, ``(F // B)·bs + k0[F mod B]``, where an
        allocation would fail. The run can also last at most until the first completion.
        """
        tab = state.tab
        ids = state.running
        nb = int(ids.size)
        ntok = tab.num_tokens[ids]
        remaining = tab.final_tokens[ids] - ntok
        first_done = int(_min(remaining))
        c = ntok - 1  # every request in a decode batch has computed = num_tokens - 1
        bs = state.pool.block_size_tokens
        k0 = (-c) % bs
        k0.sort()
        kmax = first_done
        free = state.pool.free_blocks
        if not state.pool.reserves_whole and free < nb * (-(-kmax // bs)):
            q, rem = divmod(free, nb)
            kmax = min(kmax, q * bs + int(k0[rem]))
        self.run = DecodeRun(
            ids=ids,
            computed=c,
            remaining=remaining,
            first_done=first_done,
            crossing_offsets=k0,
            batch=nb,
            context=int(_sum(c)) + nb,
            free_blocks=free,
            max_steps=kmax,
            window_weight=int(np.count_nonzero(tab.in_window[ids])),
            absorb=self.absorbs_arrivals(state, admission_blocked),
            end_s=state.t,
        )

    def _durations(self, run: DecodeRun, want: int) -> None:
        """Evaluate at least ``want`` more step times of ``run`` (vectorised, one model call)."""
        k = run.steps + run.ahead_durations.size
        m = min(max(want, _FIRST_RUN_CHUNK), run.max_steps - k)
        if m <= 0:
            return
        nb = run.batch
        ctx = np.arange(run.context + k * nb, run.context + (k + m) * nb, nb, dtype=np.int64)
        if self._decode_run_s is not None:
            dur = np.asarray(self._decode_run_s(nb, ctx), dtype=np.float64)
        else:
            batch = np.full(m, nb, dtype=np.int64)
            zeros = np.zeros(m, dtype=np.int64)
            dur = np.asarray(
                self.step_time(zeros, np.zeros(m), batch, ctx, batch), dtype=np.float64
            )
        if not (_min(dur) > 0 and _max(dur) < _INF):
            raise ValueError("step time must be finite and > 0")
        run.ahead_durations = (
            np.concatenate((run.ahead_durations, dur)) if run.ahead_durations.size else dur
        )

    def extend(self, state: ReplicaState, horizon_s: float, inclusive: bool) -> bool:
        """Commit as many steps of the open run as provably repeat the batch; close the run
        unless only the decision horizon stopped it. Returns whether any step was committed.

        A step is allowed if it starts before the next arrival or transfer completion (unless
        admission is blocked for the whole run: then arrivals just join the queue at the step
        boundary after them, exactly as stepping would record them), at or before the next
        deadline, and before the decision horizon (``<=`` if inclusive).
        """
        run = self.run
        assert run is not None
        limit = _INF if run.absorb else state.next_event()
        deadline = state.next_deadline()
        committed = False
        at_horizon = False
        while run.steps < run.max_steps:
            t0 = run.end_s
            stop = min(limit, deadline, horizon_s)
            if not run.ahead_durations.size:
                want = _FIRST_RUN_CHUNK
                if stop < _INF and state.last_duration_s > 0:
                    want = int((stop - t0) / state.last_duration_s) + 2
                # Grow geometrically while nothing cuts the run (8, 32, 128, ... steps).
                growth = _FIRST_RUN_CHUNK * 4 ** min(run.chunks_evaluated, 6)
                self._durations(run, max(want, growth) if run.chunks_evaluated else want)
                run.chunks_evaluated += 1
            dur = run.ahead_durations
            edges = np.concatenate(((t0,), dur)).cumsum()
            starts = edges[:-1]
            take = int(dur.size)
            reason_other = False
            if limit < _INF:
                cut = int(starts.searchsorted(limit, side="left"))
                if cut < take:
                    take, reason_other = cut, True
            if deadline < _INF:
                cut = int(starts.searchsorted(deadline, side="right"))
                if cut < take:
                    take, reason_other = cut, True
            if horizon_s < _INF:
                side: Literal["left", "right"] = "right" if inclusive else "left"
                cut = int(starts.searchsorted(horizon_s, side=side))
                if cut < take:
                    take, reason_other, at_horizon = cut, False, True
            waiting: int | np.ndarray = state.n_waiting
            if run.absorb and take:
                absorbed, waiting = _absorb_arrivals(state, starts, take)
                if absorbed < take:
                    take, reason_other, at_horizon = absorbed, True, False
                deadline = state.next_deadline()
            if take:
                self._commit(state, run, starts[:take], dur[:take], waiting, float(edges[take]))
                committed = True
            run.ahead_durations = dur[take:]
            if reason_other or at_horizon:
                break
        if not at_horizon or run.steps >= run.max_steps:
            self.close(state)
        return committed

    @staticmethod
    def _commit(
        state: ReplicaState,
        run: DecodeRun,
        starts: np.ndarray,
        durations: np.ndarray,
        waiting: int | np.ndarray,
        end_s: float,
    ) -> None:
        """Account for ``len(starts)`` more run steps (the request table is written on close)."""
        k = int(starts.size)
        run.starts.append(starts)
        run.durations.append(durations)
        run.waiting.append(waiting)
        run.steps += k
        run.end_s = end_s
        state.t = end_s
        state.steps += k
        state.decode_steps += k
        state.last_duration_s = float(durations[-1])
        last = run.steps - 1
        bs = state.pool.block_size_tokens
        crossings = (last // bs) * run.batch + int(
            run.crossing_offsets.searchsorted(last % bs, side="right")
        )
        state.pool.take_run_crossings(run.free_blocks, crossings)

    def close(self, state: ReplicaState) -> None:
        """Write the open run's steps to the log and its effects to the request table."""
        run = self.run
        assert run is not None
        self.run = None
        k = run.steps
        if k == 0:
            return
        tab = state.tab
        pool = state.pool
        bs = pool.block_size_tokens
        ids = run.ids
        steps = np.arange(k, dtype=np.int64)
        crossings = (steps // bs) * run.batch + run.crossing_offsets.searchsorted(
            steps % bs, side="right"
        )

        def joined(parts: list[np.ndarray]) -> np.ndarray:
            return parts[0] if len(parts) == 1 else np.concatenate(parts)

        if len(run.waiting) == 1:
            waiting = run.waiting[0]
        else:
            waiting = np.concatenate(
                [
                    np.full(part.size, w, dtype=np.int64) if isinstance(w, int) else w
                    for part, w in zip(run.starts, run.waiting, strict=True)
                ]
            )
        state.log.append_decode_run(
            start_s=joined(run.starts),
            duration_s=joined(run.durations),
            decode_seqs=run.batch,
            decode_context_tokens=run.context + steps * run.batch,
            kv_blocks_used=(pool.total_blocks - run.free_blocks)
            + (crossings * 0 if pool.reserves_whole else crossings),
            num_waiting=waiting,
            itl_weight=run.window_weight,
        )
        newc = run.computed + k
        pool.hold_after_run(ids, newc)
        tab.computed_tokens[ids] = newc
        tab.num_tokens[ids] = newc + 1
        tab.last_token_s[ids] = run.end_s
        if k == run.first_done:
            state.leave(ids[run.remaining == k], run.end_s)


def _absorb_arrivals(state: ReplicaState, starts: np.ndarray, k: int) -> tuple[int, np.ndarray]:
    """Queue the arrivals that fall inside a blocked decode run, each at the first step start
    at or after it (as stepping would). The run is cut after the deadline of any absorbed
    request. Returns the (possibly shorter) run length and the waiting count at each step
    start."""
    times = state.arr_times
    ids = state.arr_ids
    tab = state.tab
    p = state.arr_ptr
    end = p
    while end < len(times) and k > 0 and times[end] <= starts[k - 1]:
        r = ids[end]
        d = float(tab.deadline_s[r])
        if d != _INF:
            k = min(k, int(starts[:k].searchsorted(d, side="right")))
        end += 1
    while end > p and (k == 0 or times[end - 1] > starts[k - 1]):
        end -= 1
    base = state.n_waiting
    if end == p:
        return k, np.full(k, base, dtype=np.int64)
    arrived = np.asarray(times[p:end], dtype=np.float64)
    seen = starts[:k].searchsorted(arrived, side="left")
    for r, a, j in zip(ids[p:end], times[p:end], seen.tolist(), strict=True):
        state.lag_s += float(starts[j]) - a
        state.waiting.append(r)
        d = float(tab.deadline_s[r])
        if d != _INF:
            heapq.heappush(state.deadlines, (d, r))
    state.n_waiting = base + (end - p)
    state.arr_ptr = end
    counts = arrived.searchsorted(starts[:k], side="right")
    return k, base + counts
