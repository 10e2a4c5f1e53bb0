"""One engine replica, stepped iteration by iteration (internal; use :mod:`.simulate`).

Semantics follow vLLM v1's ``Scheduler.schedule`` (``vllm-project/vllm:vllm/v1/core/sched/
scheduler.py``) and KV manager (``vllm/v1/core/kv_cache_manager.py: allocate_slots``):

* A request has ``computed`` tokens (in the KV cache) and ``num_tokens = prompt + generated``;
  each step lets ``computed`` catch up. A step that brings ``computed`` to ``num_tokens`` samples
  one new token (the last prompt chunk emits the first token; a decode emits the next one).
* Running requests are served first, in admission order, ``min(num_tokens - computed, budget
  left)`` tokens each; blocks are allocated for ``computed + scheduled`` tokens. When a request
  cannot get its blocks, the most recently admitted running request is preempted (blocks freed,
  ``computed = 0``, prepended to the waiting queue), until the allocation succeeds or the request
  preempted itself. A resumed request recomputes prompt *and* generated tokens.
* Waiting requests are admitted FCFS only if no preemption happened in this step, fewer than
  ``max_num_seqs`` run, budget is left and their first chunk's blocks (plus the watermark) are free.

``prefill_first`` (SGLang's default scheduler, ``get_next_batch_to_run``) replaces the step
composition: a step holds prefills only whenever one can run (unfinished prompt chunks, then
waiting requests FCFS within the budget), and the running decodes wait; otherwise every running
request decodes in one step, whatever the budget, with preemption as above on block shortage.

Choices where the engines leave room, and what is not modelled:

* Timeouts are client-side: past its deadline the client has given up, and the engine drops the
  request (freeing its blocks) at its first step boundary after the deadline.
* A request that can never be scheduled (its whole sequence needs more blocks than the replica
  has; without chunking, more tokens than the budget) is rejected when it arrives. With
  ``max_waiting_requests`` an arrival that finds the queue full is rejected at the next boundary.
* On a disaggregated decode replica, blocks reserved for queued KV transfers can starve the head
  of the queue while nothing runs (vLLM would wait forever); that request is rejected instead.
* Sarathi's block manager wants a free block before every decode append; here a block is needed
  only when the sequence crosses a block boundary, as in vLLM v1.
* ``output_delay_steps = 1`` (an overlap scheduler, TensorRT-LLM's ``_executor_loop_overlap``):
  a request computes one token more than it outputs; the first computed token is hidden, every
  later one is visible when computed (so visible token ``j`` comes out one of the request's own
  steps after it was sampled), and the request leaves after computing its extra token. The extra
  token is a real decode (batch slot, step time, KV) as in the real loop, which only learns that
  a request finished after launching the next step with it. A decode run never starts while a
  running request's only computed token is hidden (its next token is a first token, not an ITL
  sample); that step is stepped on its own, so skipping stays exact.
* Not modelled: prefix caching, speculative decoding, ``long_prefill_token_threshold``,
  ``max_model_len``, async scheduling, pipeline parallelism.

State is struct-of-arrays over request ids (:class:`RequestTable`, shared by every engine of a
simulation); the running set is an ``int64`` array in admission order, the waiting queue a deque.
There is no event heap: the only events are the next arrival, the end of the current step,
transfer completions and deadlines. A step whose batch is all decodes and whose successors
provably repeat it (no completion, KV shortage, deadline or transfer before their start, and no
arrival unless admission is blocked anyway) is extended into a *decode run*: the run's step times
are evaluated in one vectorised call and its effects applied in closed form (modeling.md §3.8).
A run also starts right after a step with prefills when that step leaves a batch of decodes that
all just produced a token and nothing can be admitted (the next step would be the run's first).
The result is identical to stepping one step at a time (``skip_decode_runs=False``), which the
tests assert.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from servesize.core.simulation._log import StepLog
from servesize.core.simulation.config import SchedulerConfig
from servesize.core.simulation.steptime import StepTimeModel

UNSENT = -2
ACTIVE = -1
OK = 0
TIMED_OUT = 1
REJECTED = 2

XFER_NONE = 0
XFER_PENDING = 1  # waiting for blocks on the decode replica
XFER_MOVING = 2  # blocks reserved, KV in flight

_INF = math.inf
# Steps per vectorised step-time call in a decode run grow geometrically from this size.
_FIRST_RUN_CHUNK = 8
_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY_F = np.zeros(0, dtype=np.float64)
_sum = np.add.reduce


class RequestTable:
    """Per-request state, one array per field, indexed by request id."""

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
        self.prompt = prompt_tokens.astype(np.int64, copy=True)
        self.output = output_tokens.astype(np.int64, copy=True)
        self.timeout = timeout_s.astype(np.float64, copy=True)
        self.in_window = in_window.astype(bool, copy=True)
        self.overhead_s = overhead_s
        self.arrival = np.full(n, np.nan)
        self.deadline = np.full(n, _INF)
        self.final_tokens = self.prompt + self.output
        self.computed = np.zeros(n, dtype=np.int64)
        self.num_tokens = self.prompt.copy()
        self.prefill_end = self.prompt.copy()
        self.blocks = np.zeros(n, dtype=np.int64)
        self.first_scheduled = np.full(n, np.nan)
        self.first_token = np.full(n, np.nan)
        self.last_token = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.exit = np.full(n, np.nan)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.status = np.full(n, UNSENT, dtype=np.int8)
        self.owner = np.full(n, -1, dtype=np.int32)
        self.running = np.zeros(n, dtype=bool)
        self.replica = np.full(n, -1, dtype=np.int32)
        self.decode_replica = np.full(n, -1, dtype=np.int32)
        self.handoff = np.full(n, np.nan)
        self.xfer_state = np.zeros(n, dtype=np.int8)
        self.xfer_time = np.zeros(n, dtype=np.float64)
        self.xfer_start = np.full(n, np.nan)
        self.xfer_end = np.full(n, np.nan)

    def send(self, r: int, t: float) -> None:
        """Mark request ``r`` as sent at ``t``; its engine deadline is
        ``t + timeout - client overheads`` (so a client-observed E2E above the timeout fails)."""
        self.arrival[r] = t
        self.deadline[r] = t + self.timeout[r] - self.overhead_s
        self.status[r] = ACTIVE

    def send_all(self, arrival_s: np.ndarray) -> None:
        """Vectorised :meth:`send` for an open loop."""
        self.arrival[:] = arrival_s
        self.deadline[:] = arrival_s + self.timeout - self.overhead_s
        self.status[:] = ACTIVE


@dataclass(slots=True)
class _Plan:
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


@dataclass(slots=True, kw_only=True)
class _DecodeRun:
    """A batch of decodes repeated step after step (see :meth:`Engine._open_run`)."""

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


class Engine:
    """One replica: scheduler, KV block pool and step log.

    Parameters
    ----------
    index : int
        Engine id (owner tag in the request table, ``replica`` in results).
    table : RequestTable
        Shared request state.
    config : SchedulerConfig
        Scheduler and KV settings.
    step_time : StepTimeModel
        Vectorised step duration.
    prefill_only : bool
        A disaggregated prefill worker: requests leave after their first token.
    remote_kv : bool
        A disaggregated decode worker: requests arrive with their prompt KV still to be pulled.
    skip_decode_runs : bool
        Extend pure-decode steps into vectorised runs (identical results, faster).
    stop_on_exit : bool
        Return from :meth:`advance` whenever a request leaves, so that a closed-loop client can
        send its next request before the engine decides further steps.
    first_token_after_transfer : bool
        Decode worker only: the client sees the first token when the transfer completes.
    """

    def __init__(
        self,
        index: int,
        table: RequestTable,
        config: SchedulerConfig,
        step_time: StepTimeModel,
        *,
        prefill_only: bool = False,
        remote_kv: bool = False,
        skip_decode_runs: bool = True,
        stop_on_exit: bool = False,
        first_token_after_transfer: bool = False,
    ) -> None:
        self.index = index
        self.tab = table
        self.cfg = config
        self.step_time = step_time
        self.prefill_only = prefill_only
        self.remote_kv = remote_kv
        self.skip = skip_decode_runs
        self.stop_on_exit = stop_on_exit
        self.first_token_after_transfer = first_token_after_transfer
        self.delay = config.output_delay_steps
        if self.delay and (prefill_only or remote_kv):
            raise ValueError("output_delay_steps is modelled for aggregated engines only")
        self.bs = config.block_size_tokens
        self.budget = config.max_num_batched_tokens
        self.max_seqs = config.max_num_seqs
        self.total_blocks = config.num_kv_blocks
        self.watermark = config.watermark_blocks
        self.sarathi = config.policy == "sarathi"
        self.chunked = config.policy != "no_chunking"
        # A disaggregated decode replica receives prompts as KV and admits them as vLLM does
        # (remote-KV handling); prefill_first shapes the steps of every other replica.
        self.prefill_first = config.policy == "prefill_first" and not remote_kv
        self.full_prompt_gate = config.admit_full_prompt or self.sarathi
        self.cap = config.max_waiting_requests
        self.free = config.num_kv_blocks
        self.running = np.zeros(0, dtype=np.int64)
        self.waiting: deque[int] = deque()
        self.n_waiting = 0
        self.n_moving = 0
        self.arr_ids: list[int] = []
        self.arr_times: list[float] = []
        self.arr_ptr = 0
        self.deadlines: list[tuple[float, int]] = []
        self.xfers: list[tuple[float, int]] = []
        self.t = -_INF
        self.steps = 0
        self._last_exit_time = -_INF
        self._last_exit_count = 0
        # A decode run in progress (stopped at a decision horizon, to be continued).
        self._run: _DecodeRun | None = None
        self._last_duration = 0.0
        self.exits: list[int] = []
        self.pushed = 0
        self.exited = 0
        self.lag_s = 0.0
        self.log = StepLog()
        self.itl_extra_s: list[float] = []
        self.idle: list[tuple[float, float, int]] = []
        # A model that can cost one step without arrays (``single_step_s``, equal to an
        # element of its vectorised call) is called that way for single steps.
        scalar = getattr(step_time, "single_step_s", None)
        self._step_s: Callable[[int, float, int, int, int], float] | None = (
            scalar if callable(scalar) else None
        )
        # And one that can cost a run of pure-decode steps of one batch (``decode_run_s``,
        # equal to its vectorised call on those steps) is called that way for decode runs.
        run_s = getattr(step_time, "decode_run_s", None)
        self._decode_run_s: Callable[[int, np.ndarray], np.ndarray] | None = (
            run_s if callable(run_s) else None
        )
        # One-step feature buffers, reused for every single-step evaluation.
        self._features = (
            np.zeros(1, dtype=np.int64),
            np.zeros(1, dtype=np.float64),
            np.zeros(1, dtype=np.int64),
            np.zeros(1, dtype=np.int64),
            np.zeros(1, dtype=np.int64),
        )

    # ------------------------------------------------------------------ inputs

    def push(self, r: int, t: float) -> None:
        """Route request ``r`` to this engine at time ``t`` (calls must come in time order).
        A request that could never be scheduled here is rejected on the spot."""
        self.pushed += 1
        if self.delay:
            self.tab.final_tokens[r] = self.tab.prompt[r] + self.tab.output[r] + self.delay
        if self._infeasible(r):
            self._reject(r, t)
            return
        self.arr_ids.append(r)
        self.arr_times.append(t)
        self.tab.owner[r] = self.index

    def push_many(self, ids: np.ndarray, times: np.ndarray) -> None:
        """Route many requests at once (sorted by time); vectorised :meth:`push`."""
        tab = self.tab
        if self.delay:
            tab.final_tokens[ids] = tab.prompt[ids] + tab.output[ids] + self.delay
        tokens = tab.prompt[ids] if self.prefill_only else tab.final_tokens[ids] - 1
        bad = (tokens + (self.bs - 1)) // self.bs + self.watermark > self.total_blocks
        if not self.chunked:
            bad |= tokens > self.budget
        self.pushed += int(ids.size)
        if np.count_nonzero(bad):
            rejected = ids[bad]
            tab.status[rejected] = REJECTED
            tab.exit[rejected] = times[bad]
            self.exits.extend(rejected.tolist())
            self.exited += int(rejected.size)
            ids, times = ids[~bad], times[~bad]
        self.arr_ids.extend(ids.tolist())
        self.arr_times.extend(times.tolist())
        tab.owner[ids] = self.index

    # ------------------------------------------------------------------ queries

    @property
    def outstanding(self) -> int:
        """Requests routed here that have not left yet."""
        return self.pushed - self.exited

    def outstanding_at(self, t: float) -> int:
        """Requests routed here and not gone by ``t``. The last applied step may end after
        ``t`` (see :meth:`advance`); its departures do not count yet."""
        late = self._last_exit_count if self._last_exit_time > t else 0
        return self.pushed - self.exited + late

    def _has_work(self) -> bool:
        return self.running.size > 0 or self.n_waiting > self.n_moving

    def _next_arrival(self) -> float:
        p = self.arr_ptr
        return self.arr_times[p] if p < len(self.arr_times) else _INF

    def _next_xfer(self) -> float:
        h = self.xfers
        tab = self.tab
        while h:
            end, r = h[0]
            if tab.xfer_state[r] == XFER_MOVING and tab.owner[r] == self.index:
                return end
            heapq.heappop(h)
        return _INF

    def _next_deadline(self) -> float:
        h = self.deadlines
        tab = self.tab
        while h:
            d, r = h[0]
            if tab.status[r] == ACTIVE and tab.owner[r] == self.index:
                return d
            heapq.heappop(h)
        return _INF

    def _next_event(self) -> float:
        nxt = self._next_arrival()
        if self.remote_kv:
            nxt = min(nxt, self._next_xfer())
        return nxt

    def next_decision_s(self) -> float:
        """When this engine next schedules a step (``inf`` if idle with nothing routed to it).
        Anything it emits afterwards happens strictly later (steps take positive time)."""
        if self._has_work():
            return self.t
        return max(self._next_event(), self.t)

    # ------------------------------------------------------------------ main loop

    def advance(self, horizon_s: float = _INF, inclusive: bool = True) -> bool:
        """Make every scheduling decision at times ``< horizon_s`` (``<=`` when ``inclusive``).

        A decided step is applied at once, so the last one may end after the horizon; its
        effects are then already visible (see :meth:`outstanding_at`). That is sound because a
        step's composition is fixed when it is decided: a request routed here later is seen at
        the next decision. Returns whether anything happened.
        """
        progressed = False
        while True:
            if self._run is not None:
                # A decode run stopped at the previous horizon: continue it (it re-checks
                # arrivals, deadlines and blocks itself and closes when it cannot go on).
                progressed |= self._continue_run(horizon_s, inclusive)
                if self._run is not None:
                    return progressed
                if self.stop_on_exit and self.exits:
                    return True
            if not self._has_work() and not self._idle_until_next_event(horizon_s, inclusive):
                return progressed
            t = self.t
            if t > horizon_s or (t == horizon_s and not inclusive):
                if t == horizon_s and self._expire(t):
                    # Drops at this boundary are its effects: the router must see them.
                    return True
                return progressed
            before = (self.arr_ptr, self.exited, self.n_moving, self.free)
            # Clients that gave up leave first; then arrivals join (an arrival whose deadline
            # has already passed leaves at once).
            self._expire(t)
            self._admit_arrivals(t)
            self._expire(t)
            if self.remote_kv:
                self._complete_transfers(t)
            if self.stop_on_exit and self.exits:
                return True
            plan = self._decide(t)
            if plan is None:
                progressed |= before != (self.arr_ptr, self.exited, self.n_moving, self.free)
                if not self._idle_until_next_event(horizon_s, inclusive):
                    return progressed
                progressed = True
                continue
            progressed = True
            exits_before = len(self.exits)
            all_emitted = self._apply(plan)
            if self.stop_on_exit and self.exits:
                return True
            if not self.skip or len(self.exits) != exits_before:
                continue
            blocked = plan.admission_blocked
            if not plan.pure_decode:
                after = self._decodes_next(plan, all_emitted)
                if after is None:
                    continue
                blocked = after
            if self.delay and np.isnan(self.tab.last_token[self.running]).any():
                # A running request's next token is its first visible one: step it alone.
                continue
            if self._run_cut_at_once(blocked):
                continue
            self._open_run(blocked)
            self._continue_run(horizon_s, inclusive)
            if self._run is not None:
                return True
            if self.stop_on_exit and self.exits:
                return True

    def _run_cut_at_once(self, admission_blocked: bool) -> bool:
        """Whether a decode run starting now would stop before its first step (an arrival or
        transfer at or before its start, unless arrivals are absorbed, or a deadline before
        it); stepping then does the same with less work."""
        t = self.t
        absorb = admission_blocked and self.cap is None and not self.remote_kv
        if not absorb and self._next_event() <= t:
            return True
        return self._next_deadline() < t

    def _decodes_next(self, p: _Plan, all_emitted: bool) -> bool | None:
        """After a step that was not pure decode: whether the next step provably is one of the
        same batch (then with its ``admission_blocked``), or None.

        It is when every running request was in the step and produced a token there (so each is
        now a decode whose next token is a regular ITL sample), nothing was preempted, the batch
        fits the budget whole, and no waiting request can be admitted: none waits, or the batch
        is full or out of budget. The next decision would then schedule exactly that step (or
        meet an arrival, deadline or block shortage first, where the run stops with no step).
        """
        if p.preempted or not all_emitted or self.remote_kv or self.prefill_only:
            return None
        batch = int(p.ids.size)
        unbudgeted = self.sarathi or self.prefill_first
        if batch != self.running.size or not (unbudgeted or batch <= self.budget):
            return None
        full = batch >= self.max_seqs or (not self.prefill_first and self.budget - batch <= 0)
        if self.n_waiting and not full:
            return None
        return full

    def _idle_until_next_event(self, horizon_s: float, inclusive: bool) -> bool:
        """Jump the clock to the next arrival or transfer completion if the horizon allows."""
        nxt = self._next_event()
        if nxt == _INF:
            return False
        nxt = max(nxt, self.t)
        if nxt > horizon_s or (nxt == horizon_s and not inclusive):
            return False
        if nxt > self.t and self.n_waiting:
            self.idle.append((self.t, nxt, self.n_waiting))
        self.t = nxt
        return True

    # ------------------------------------------------------------------ arrivals, deadlines

    def _infeasible(self, r: int) -> bool:
        """Never schedulable here: more blocks than the replica has, or (without chunking) more
        tokens than the budget in one step (a resumed request recomputes all of them)."""
        blocks = self._blocks_for_whole(r)
        if blocks + self.watermark > self.total_blocks:
            return True
        if self.chunked:
            return False
        tab = self.tab
        tokens = int(tab.prompt[r] if self.prefill_only else tab.final_tokens[r] - 1)
        return tokens > self.budget

    def _blocks_for_whole(self, r: int) -> int:
        """Blocks request ``r`` holds at its largest: prompt + output - 1 tokens, plus the
        hidden ones of an output delay (prompt only on a prefill replica)."""
        tab = self.tab
        tokens = int(tab.prompt[r] if self.prefill_only else tab.final_tokens[r] - 1)
        return -(-tokens // self.bs)

    def _settle(self, ids: np.ndarray | int) -> None:
        """On leaving, count only visible tokens: ``generated = max(computed outputs - delay, 0)``
        (the request table's ``num_tokens`` then reads as prompt + streamed tokens)."""
        if self.delay:
            tab = self.tab
            tab.num_tokens[ids] = np.maximum(tab.num_tokens[ids] - self.delay, tab.prompt[ids])

    def _reject(self, r: int, t: float) -> None:
        tab = self.tab
        self._settle(r)
        tab.status[r] = REJECTED
        tab.exit[r] = t
        tab.owner[r] = -1
        self.exits.append(r)
        self.exited += 1

    def _admit_arrivals(self, t: float) -> None:
        times = self.arr_times
        p = self.arr_ptr
        if p >= len(times) or times[p] > t:
            return
        ids = self.arr_ids
        tab = self.tab
        cap = self.cap
        deadline = tab.deadline
        while p < len(times) and times[p] <= t:
            r = ids[p]
            self.lag_s += t - times[p]
            p += 1
            if cap is not None and self.n_waiting >= cap:
                self._reject(r, t)
                continue
            self.waiting.append(r)
            self.n_waiting += 1
            if self.remote_kv:
                tab.xfer_state[r] = XFER_PENDING
            d = float(deadline[r])
            if d != _INF:
                heapq.heappush(self.deadlines, (d, r))
        self.arr_ptr = p

    def _expire(self, t: float) -> bool:
        """Drop requests whose deadline passed before ``t`` (the client has given up).
        Returns whether any was dropped."""
        h = self.deadlines
        if not h or h[0][0] >= t:
            return False
        tab = self.tab
        dropped = dropped_running = False
        while h and h[0][0] < t:
            _, r = heapq.heappop(h)
            if tab.status[r] != ACTIVE or tab.owner[r] != self.index:
                continue
            dropped = True
            self._settle(r)
            tab.status[r] = TIMED_OUT
            tab.exit[r] = t
            tab.owner[r] = -1
            self.free += int(tab.blocks[r])
            tab.blocks[r] = 0
            if tab.running[r]:
                tab.running[r] = False
                dropped_running = True
            else:
                self.n_waiting -= 1
                if tab.xfer_state[r] == XFER_MOVING:
                    self.n_moving -= 1
                tab.xfer_state[r] = XFER_NONE
            self.exits.append(r)
            self.exited += 1
        if dropped_running:
            self.running = self.running[tab.running[self.running]]
        return dropped

    def _complete_transfers(self, t: float) -> None:
        """KV that has arrived by ``t``: the request becomes an ordinary resumable request."""
        h = self.xfers
        tab = self.tab
        while h and h[0][0] <= t:
            end, r = heapq.heappop(h)
            if tab.xfer_state[r] != XFER_MOVING or tab.owner[r] != self.index:
                continue
            tab.xfer_state[r] = XFER_NONE
            self.n_moving -= 1
            tab.computed[r] = tab.prompt[r]
            if self.first_token_after_transfer:
                tab.last_token[r] = end
                tab.first_token[r] = end

    # ------------------------------------------------------------------ scheduling

    def _decide(self, t: float) -> _Plan | None:
        """Schedule one step at ``t`` (vLLM ``schedule()``); None if nothing can run now."""
        if self.prefill_first:
            return self._decide_prefill_first(t)
        tab = self.tab
        comp = tab.computed
        run = self.running
        preempted = False
        used = 0
        tokens_run = c_run = _EMPTY
        whole_batch = True
        if run.size:
            c_run = comp[run]
            after = tab.num_tokens[run]
            want = after - c_run  # >= 1 for every running request
            used = int(_sum(want))
            if used <= self.budget and not self.sarathi:
                tokens_run = want  # everyone gets all it wants
            else:
                tokens_run = self._budget_running(run, c_run, want)
                used = int(_sum(tokens_run))
                whole_batch = False
                after = c_run + tokens_run
            need = (after + (self.bs - 1)) // self.bs - tab.blocks[run]
            np.maximum(need, 0, out=need)
            total = int(_sum(need))
            if total <= self.free:
                self.free -= total
                tab.blocks[run] += need
            else:
                run, tokens_run, preempted = self._allocate_with_preemption(t, run, tokens_run)
                self.running = run
                c_run = comp[run]
                used = int(_sum(tokens_run))
                whole_batch = False
        adm: list[int] = []
        adm_n: list[int] = []
        # Whether a request arriving now could not be admitted either, for as long as the batch
        # stays as it is (full, out of budget, or behind a FCFS head that does not fit).
        blocked = False
        if not preempted or self.sarathi:
            left = self.budget - used
            if left <= 0 or run.size >= self.max_seqs:
                blocked = True
            elif self.n_waiting:
                if self.remote_kv:
                    stuck = self._admit_remote(t, left, int(run.size), adm, adm_n)
                    if stuck >= 0 and run.size == 0 and not adm:
                        # Nothing runs, so no block will ever be freed: KV reserved by queued
                        # transfers starves the head of the queue (vLLM would hang here).
                        self._drop_waiting(stuck, t)
                        return self._decide(t)
                else:
                    blocked = self._admit(t, left, int(run.size), adm, adm_n)
        if not whole_batch and run.size:
            scheduled = tokens_run > 0
            if np.count_nonzero(scheduled) < scheduled.size:
                run, tokens_run, c_run = run[scheduled], tokens_run[scheduled], c_run[scheduled]
            elif not preempted:
                whole_batch = True
        if adm:
            adm_ids = np.array(adm, dtype=np.int64)
            self.running = np.concatenate((self.running, adm_ids))
            ids = np.concatenate((run, adm_ids))
            tokens = np.concatenate((tokens_run, np.array(adm_n, dtype=np.int64)))
            c_before = np.concatenate((c_run, comp[adm_ids]))
        else:
            ids, tokens, c_before = run, tokens_run, c_run
        if ids.size == 0:
            # Everything running was preempted: vLLM runs an empty step and admits next time.
            return self._decide(t) if preempted else None
        return self._plan(
            t,
            ids,
            tokens,
            c_before,
            pure_decode=not preempted and not adm and whole_batch,
            blocked=blocked,
            preempted=preempted,
        )

    def _plan(
        self,
        t: float,
        ids: np.ndarray,
        tokens: np.ndarray,
        c_before: np.ndarray,
        *,
        pure_decode: bool,
        blocked: bool,
        preempted: bool,
    ) -> _Plan:
        """Cost and log the step that computes ``tokens`` for ``ids`` from ``t``."""
        tab = self.tab
        is_prefill = c_before < tab.prefill_end[ids]
        seqs = int(ids.size)
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
        row = self.log.append_row(
            t,
            duration,
            prefill_tokens,
            attention,
            decodes,
            context,
            seqs,
            self.total_blocks - self.free,
            self.n_waiting,
            int(self.running.size),
        )
        self.steps += 1
        return _Plan(
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

    def _decide_prefill_first(self, t: float) -> _Plan | None:
        """``prefill_first`` (SGLang's scheduler without mixed chunks): a step of prefills only
        when any can run — the unfinished prompt chunks of running requests first, then waiting
        requests FCFS, within the token budget; none is admitted while a running chunk waits for
        blocks — else one decode step of every running request (no budget). On block shortage
        the most recently admitted running requests are preempted, a stalled chunk included."""
        tab = self.tab
        comp = tab.computed
        run = self.running
        left = self.budget
        ids: list[int] = []
        ns: list[int] = []
        stuck = False
        if run.size:
            for r in run[comp[run] < tab.prefill_end[run]].tolist():
                c = int(comp[r])
                n = min(int(tab.num_tokens[r]) - c, left)
                need = max(-(-(c + n) // self.bs) - int(tab.blocks[r]), 0)
                if n <= 0 or need > self.free:
                    stuck = n > 0
                    break
                self.free -= need
                tab.blocks[r] += need
                ids.append(r)
                ns.append(n)
                left -= n
        adm: list[int] = []
        adm_n: list[int] = []
        blocked = stuck or int(run.size) >= self.max_seqs
        if self.n_waiting and left > 0 and not blocked:
            blocked = self._admit(t, left, int(run.size), adm, adm_n)
        if ids or adm:
            if adm:
                self.running = np.concatenate((self.running, np.array(adm, dtype=np.int64)))
            step_ids = np.array(ids + adm, dtype=np.int64)
            return self._plan(
                t,
                step_ids,
                np.array(ns + adm_n, dtype=np.int64),
                comp[step_ids],
                pure_decode=False,
                blocked=blocked,
                preempted=False,
            )
        if run.size == 0:
            return None
        decoding = comp[run] >= tab.prefill_end[run]
        if np.count_nonzero(decoding):
            # A decode step: one token for every decode; stalled chunks wait (0 tokens).
            want = decoding.astype(np.int64)
        elif stuck:
            # Only stalled chunks run: their next chunks, in order, within the budget.
            want = self._budget_running(run, comp[run], tab.num_tokens[run] - comp[run])
        else:
            return None
        # A stalled chunk (0 tokens) already holds the blocks of what it computed: no growth.
        grow = (comp[run] + want + (self.bs - 1)) // self.bs - tab.blocks[run]
        np.maximum(grow, 0, out=grow)
        total = int(_sum(grow))
        preempted = False
        if total <= self.free:
            self.free -= total
            tab.blocks[run] += grow
            survivors, tokens = run, want
        else:
            survivors, tokens, preempted = self._allocate_with_preemption(t, run, want)
            self.running = self.running[tab.running[self.running]]
        scheduled = tokens > 0
        step_ids, step_tokens = survivors[scheduled], tokens[scheduled]
        if step_ids.size == 0:
            return self._decide_prefill_first(t) if preempted else None
        return self._plan(
            t,
            step_ids,
            step_tokens,
            comp[step_ids],
            pure_decode=not preempted and step_ids.size == self.running.size,
            blocked=blocked,
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
        self._last_duration = duration
        return duration

    def _budget_running(self, run: np.ndarray, c_run: np.ndarray, want: np.ndarray) -> np.ndarray:
        """Tokens per running request in this step, in the policy's order."""
        budget = self.budget
        if not self.sarathi:
            # vLLM v1: in admission order, each min(want, budget left); zero once it runs out.
            before = np.cumsum(want) - want
            return np.asarray(np.minimum(want, np.maximum(budget - before, 0)))
        # Sarathi: every decode takes 1 token (no budget check), then partial prefills in order.
        is_dec = c_run >= self.tab.prefill_end[run]
        n = np.ones_like(want)
        pre = ~is_dec
        if np.count_nonzero(pre):
            wp = want[pre]
            before = np.cumsum(wp) - wp + int(np.count_nonzero(is_dec))
            n[pre] = np.minimum(wp, np.maximum(budget - before, 0))
        return n

    def _allocate_with_preemption(
        self, t: float, run: np.ndarray, n: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """Allocate in running order; on shortage preempt from the tail (vLLM ``running.pop()``,
        Sarathi ``running.pop(-1)``) until the allocation fits or the request preempted itself.

        A request that preempts itself while nothing else runs, and whose whole sequence does
        not fit in the blocks left free, can never finish: the missing blocks are reserved for
        KV transfers of requests queued behind it (decode replica of a disaggregated pair). The
        scheduler would re-admit and preempt it forever; it is dropped as rejected instead.
        """
        tab = self.tab
        comp, blocks, bs = tab.computed, tab.blocks, self.bs
        ids: list[int] = run.tolist()
        ns: list[int] = n.tolist()
        keep = len(ids)
        free = self.free
        preempted = False
        i = 0
        while i < keep:
            r = ids[i]
            ni = ns[i]
            need = 0 if ni == 0 else max(-(-(int(comp[r]) + ni) // bs) - int(blocks[r]), 0)
            self_preempted = False
            while need > free:
                keep -= 1
                v = ids[keep]
                free += int(blocks[v])
                self._preempt(v)
                preempted = True
                if v == r:
                    self_preempted = True
                    break
            if self_preempted:
                if keep == 0 and self._blocks_for_whole(r) > free:
                    self._drop_waiting(r, t)
                break
            free -= need
            blocks[r] += need
            i += 1
        self.free = free
        survivors = np.array(ids[:i], dtype=np.int64)
        if self.sarathi:
            # Decodes kept their single token; partial prefills share what the decodes left.
            c_s = comp[survivors]
            n_s = self._budget_running(survivors, c_s, tab.num_tokens[survivors] - c_s)
        else:
            n_s = np.array(ns[:i], dtype=np.int64)
        return survivors, n_s, preempted

    def _preempt(self, v: int) -> None:
        tab = self.tab
        tab.blocks[v] = 0
        tab.computed[v] = 0
        tab.prefill_end[v] = tab.num_tokens[v]
        tab.preemptions[v] += 1
        tab.running[v] = False
        tab.xfer_state[v] = XFER_NONE
        self.waiting.appendleft(v)
        self.n_waiting += 1

    def _try_admit(self, r: int, t: float, left: int) -> int:
        """Admit waiting request ``r`` with up to ``left`` tokens; 0 if it does not fit now."""
        tab = self.tab
        bs = self.bs
        c = int(tab.computed[r])
        total = int(tab.num_tokens[r])
        want = total - c
        if not self.chunked and want > left:
            return 0
        tokens = want if want < left else left
        held = int(tab.blocks[r])
        if self.sarathi:
            need = gate = -(-total // bs) - held
        else:
            need = -(-(c + tokens) // bs) - held
            gate = -(-total // bs) - held if self.full_prompt_gate else need
        if gate + self.watermark > self.free:
            return 0
        self.free -= need
        tab.blocks[r] = held + need
        tab.running[r] = True
        if math.isnan(tab.first_scheduled[r]):
            tab.first_scheduled[r] = t
        return tokens

    def _admit(self, t: float, left: int, nrun: int, adm: list[int], adm_n: list[int]) -> bool:
        """FCFS admission; returns True when it stopped at a head that does not fit."""
        tab = self.tab
        waiting = self.waiting
        me = self.index
        while self.n_waiting and left > 0 and nrun + len(adm) < self.max_seqs:
            r = waiting[0]
            if tab.status[r] != ACTIVE or tab.owner[r] != me:
                waiting.popleft()
                continue
            tokens = self._try_admit(r, t, left)
            if tokens == 0:
                return True
            waiting.popleft()
            self.n_waiting -= 1
            adm.append(r)
            adm_n.append(tokens)
            left -= tokens
        return False

    def _admit_remote(
        self, t: float, left: int, nrun: int, adm: list[int], adm_n: list[int]
    ) -> int:
        """Decode worker: vLLM's ``WAITING_FOR_REMOTE_KVS`` handling. A request first reserves
        the blocks of its prompt KV and starts the transfer, then is skipped; once its KV has
        arrived it is admitted like a resumed request with ``computed = prompt``. Returns the
        request that did not fit (-1 if none)."""
        tab = self.tab
        waiting = self.waiting
        skipped: list[int] = []
        stuck = -1
        me, bs = self.index, self.bs
        while waiting and left > 0 and nrun + len(adm) < self.max_seqs:
            r = waiting[0]
            if tab.status[r] != ACTIVE or tab.owner[r] != me:
                waiting.popleft()
                continue
            state = tab.xfer_state[r]
            if state == XFER_MOVING:
                waiting.popleft()
                skipped.append(r)
                continue
            if state == XFER_PENDING:
                need = -(-int(tab.prompt[r]) // bs)
                if need + self.watermark > self.free:
                    stuck = r
                    break
                self.free -= need
                tab.blocks[r] = need
                tab.xfer_state[r] = XFER_MOVING
                end = t + float(tab.xfer_time[r])
                tab.xfer_start[r] = t
                tab.xfer_end[r] = end
                heapq.heappush(self.xfers, (end, r))
                self.n_moving += 1
                waiting.popleft()
                skipped.append(r)
                continue
            tokens = self._try_admit(r, t, left)
            if tokens == 0:
                stuck = r
                break
            waiting.popleft()
            self.n_waiting -= 1
            adm.append(r)
            adm_n.append(tokens)
            left -= tokens
        waiting.extendleft(reversed(skipped))
        return stuck

    def _drop_waiting(self, r: int, t: float) -> None:
        """Reject waiting request ``r`` at ``t``, releasing any blocks it holds."""
        self.waiting.remove(r)
        self.n_waiting -= 1
        if self.tab.xfer_state[r] == XFER_MOVING:
            self.n_moving -= 1
        self.tab.xfer_state[r] = XFER_NONE
        self.free += int(self.tab.blocks[r])
        self.tab.blocks[r] = 0
        self._reject(r, t)

    # ------------------------------------------------------------------ effects

    def _apply(self, p: _Plan) -> bool:
        """Apply a decided step; returns whether every request in it produced a token."""
        tab = self.tab
        ids = p.ids
        end = p.end_s
        self.t = end
        newc = p.computed_before + p.tokens
        tab.computed[ids] = newc
        emit = newc == tab.num_tokens[ids]
        # A request that emits has computed all its tokens: it now holds one more.
        if emit.all():
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
            regular = tab.last_token[em] == p.start_s
            if regular.all():
                weight = int(np.count_nonzero(tab.in_window[em]))
            else:
                weight = int(np.count_nonzero(tab.in_window[em[regular]]))
                other = em[~regular]
                last = tab.last_token[other]
                first = np.isnan(last)
                n_first = np.count_nonzero(first)
                if n_first:
                    shown = first
                    if self.delay:
                        # The first computed token(s) of an output delay stay hidden.
                        early = tab.num_tokens[other] - tab.prompt[other] <= self.delay
                        hidden = other[first & early]
                        shown = first & ~early
                    tab.first_token[other[shown]] = end
                if n_first < first.size:
                    gap_ids = other[~first]
                    counted = tab.in_window[gap_ids]
                    if np.count_nonzero(counted):
                        gaps = end - tab.last_token[gap_ids[counted]]
                        self.itl_extra_s.extend(gaps.tolist())
            tab.last_token[em] = end
            if hidden.size:
                tab.last_token[hidden] = np.nan
                ne -= int(hidden.size)
            done = em if self.prefill_only else em[ntok >= tab.final_tokens[em]]
            if done.size:
                self._leave(done, end)
        cols = self.log.columns
        cols["output_tokens"][p.row] = ne
        cols["itl_weight"][p.row] = weight
        return ne == ids.size

    def _leave(self, done: np.ndarray, end: float) -> None:
        """Requests that finished (on a prefill worker: finished their prefill) at ``end``."""
        tab = self.tab
        self.free += int(_sum(tab.blocks[done]))
        self._settle(done)
        tab.blocks[done] = 0
        tab.running[done] = False
        tab.owner[done] = -1
        self.running = self.running[tab.running[self.running]]
        finished = done
        if self.prefill_only:
            more = tab.output[done] > 1
            tab.handoff[done[more]] = end
            finished = done[~more]
        if finished.size:
            tab.finish[finished] = end
            tab.exit[finished] = end
            late = end > tab.deadline[finished]
            tab.status[finished] = np.where(late, TIMED_OUT, OK).astype(np.int8)
        self.exits.extend(done.tolist())
        self.exited += int(done.size)
        self._last_exit_time = end
        self._last_exit_count = int(done.size)

    def close(self) -> None:
        """Finish any decode run left open at a horizon (before reading the results)."""
        if self._run is not None:
            self._close_run()

    def _open_run(self, admission_blocked: bool) -> None:
        """Start a decode run from the current batch (all decodes, just stepped).

        With ``B`` decodes, ``c_i`` tokens in KV and ``F`` free blocks, step ``k`` (from 0)
        needs a new block for request ``i`` iff ``(c_i + k) mod bs = 0``; the first crossing is
        ``k0_i = (-c_i) mod bs`` and crossings repeat every ``bs`` steps, so sorted ``k0``
        gives the crossings up to step ``k`` in closed form, ``(k // bs)·B + #{k0 <= k mod bs}``,
        and the step of the ``(F + 1)``-th crossing, ``(F // B)·bs + k0[F mod B]``, where an
        allocation would fail. The run can also last at most until the first completion.
        """
        tab = self.tab
        ids = self.running
        nb = int(ids.size)
        ntok = tab.num_tokens[ids]
        remaining = tab.final_tokens[ids] - ntok
        first_done = int(remaining.min())
        c = ntok - 1  # every request in a decode batch has computed = num_tokens - 1
        bs = self.bs
        k0 = (-c) % bs
        k0.sort()
        kmax = first_done
        free = self.free
        if free < nb * (-(-kmax // bs)):
            q, rem = divmod(free, nb)
            kmax = min(kmax, q * bs + int(k0[rem]))
        self._run = _DecodeRun(
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
            absorb=admission_blocked and self.cap is None and not self.remote_kv,
            end_s=self.t,
        )

    def _run_durations(self, run: _DecodeRun, want: int) -> None:
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
        if not (dur.min() > 0 and np.isfinite(dur.max())):
            raise ValueError("step time must be finite and > 0")
        run.ahead_durations = (
            np.concatenate((run.ahead_durations, dur)) if run.ahead_durations.size else dur
        )

    def _continue_run(self, horizon_s: float, inclusive: bool) -> bool:
        """Commit as many steps of the open run as provably repeat the batch; close the run
        unless only the decision horizon stopped it. Returns whether any step was committed.

        A step is allowed if it starts before the next arrival or transfer completion (unless
        admission is blocked for the whole run: then arrivals just join the queue at the step
        boundary after them, exactly as stepping would record them), at or before the next
        deadline, and before the decision horizon (``<=`` if inclusive).
        """
        run = self._run
        assert run is not None
        limit = _INF if run.absorb else self._next_event()
        deadline = self._next_deadline()
        committed = False
        at_horizon = False
        while run.steps < run.max_steps:
            t0 = run.end_s
            stop = min(limit, deadline, horizon_s)
            if not run.ahead_durations.size:
                want = _FIRST_RUN_CHUNK
                if stop < _INF and self._last_duration > 0:
                    want = int((stop - t0) / self._last_duration) + 2
                # Grow geometrically while nothing cuts the run (8, 32, 128, ... steps).
                growth = _FIRST_RUN_CHUNK * 4 ** min(run.chunks_evaluated, 6)
                self._run_durations(run, max(want, growth) if run.chunks_evaluated else want)
                run.chunks_evaluated += 1
            dur = run.ahead_durations
            edges = np.cumsum(np.concatenate(((t0,), dur)))
            starts = edges[:-1]
            take = int(dur.size)
            reason_other = False
            if limit < _INF:
                cut = int(np.searchsorted(starts, limit, side="left"))
                if cut < take:
                    take, reason_other = cut, True
            if deadline < _INF:
                cut = int(np.searchsorted(starts, deadline, side="right"))
                if cut < take:
                    take, reason_other = cut, True
            if horizon_s < _INF:
                side: Literal["left", "right"] = "right" if inclusive else "left"
                cut = int(np.searchsorted(starts, horizon_s, side=side))
                if cut < take:
                    take, reason_other, at_horizon = cut, False, True
            waiting: int | np.ndarray = self.n_waiting
            if run.absorb and take:
                absorbed, waiting = self._absorb_arrivals(starts, take)
                if absorbed < take:
                    take, reason_other, at_horizon = absorbed, True, False
                deadline = self._next_deadline()
            if take:
                self._commit(run, starts[:take], dur[:take], waiting, float(edges[take]))
                committed = True
            run.ahead_durations = dur[take:]
            if reason_other or at_horizon:
                break
        if not at_horizon or run.steps >= run.max_steps:
            self._close_run()
        return committed

    def _commit(
        self,
        run: _DecodeRun,
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
        self.t = end_s
        self.steps += k
        self._last_duration = float(durations[-1])
        last = run.steps - 1
        crossings = (last // self.bs) * run.batch + int(
            np.searchsorted(run.crossing_offsets, last % self.bs, side="right")
        )
        self.free = run.free_blocks - crossings

    def _close_run(self) -> None:
        """Write the run's steps to the log and its effects to the request table."""
        run = self._run
        assert run is not None
        self._run = None
        k = run.steps
        if k == 0:
            return
        tab = self.tab
        bs = self.bs
        ids = run.ids
        steps = np.arange(k, dtype=np.int64)
        crossings = (steps // bs) * run.batch + np.searchsorted(
            run.crossing_offsets, steps % bs, side="right"
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
        self.log.append_decode_run(
            start_s=joined(run.starts),
            duration_s=joined(run.durations),
            decode_seqs=run.batch,
            decode_context_tokens=run.context + steps * run.batch,
            kv_blocks_used=(self.total_blocks - run.free_blocks) + crossings,
            num_waiting=waiting,
            itl_weight=run.window_weight,
        )
        newc = run.computed + k
        tab.blocks[ids] = (newc + (bs - 1)) // bs
        tab.computed[ids] = newc
        tab.num_tokens[ids] = newc + 1
        tab.last_token[ids] = run.end_s
        if k == run.first_done:
            self._leave(ids[run.remaining == k], run.end_s)

    def _absorb_arrivals(self, starts: np.ndarray, k: int) -> tuple[int, np.ndarray]:
        """Queue the arrivals that fall inside a blocked decode run, each at the first step
        start at or after it (as stepping would). The run is cut after the deadline of any
        absorbed request. Returns the (possibly shorter) run length and the waiting count at
        each step start."""
        times = self.arr_times
        ids = self.arr_ids
        tab = self.tab
        p = self.arr_ptr
        end = p
        while end < len(times) and k > 0 and times[end] <= starts[k - 1]:
            r = ids[end]
            d = float(tab.deadline[r])
            if d != _INF:
                k = min(k, int(np.searchsorted(starts[:k], d, side="right")))
            end += 1
        while end > p and (k == 0 or times[end - 1] > starts[k - 1]):
            end -= 1
        base = self.n_waiting
        if end == p:
            return k, np.full(k, base, dtype=np.int64)
        arrived = np.asarray(times[p:end], dtype=np.float64)
        seen = np.searchsorted(starts[:k], arrived, side="left")
        for r, a, j in zip(ids[p:end], times[p:end], seen.tolist(), strict=True):
            self.lag_s += float(starts[j]) - a
            self.waiting.append(r)
            d = float(tab.deadline[r])
            if d != _INF:
                heapq.heappush(self.deadlines, (d, r))
        self.n_waiting = base + (end - p)
        self.arr_ptr = end
        counts = np.searchsorted(arrived, starts[:k], side="right")
        return k, base + counts
