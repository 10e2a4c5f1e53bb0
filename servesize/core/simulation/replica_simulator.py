"""One serving-engine replica, stepped iteration by iteration (internal; use :mod:`.simulate`).

A replica is a scheduling policy (:mod:`.policies`: vLLM v1, Sarathi, whole-prompt, SGLang's
prefill-first), a KV block pool (:mod:`.kv_pool`), its queues and step log (:mod:`.replica_state`)
and the decode-run accelerator (:mod:`.decode_run`). Token accounting follows vLLM v1's
``Scheduler.schedule`` (``vllm-project/vllm:vllm/v1/core/sched/scheduler.py``) and KV manager
(``vllm/v1/core/kv_cache_manager.py: allocate_slots``):

* A request has ``computed`` tokens (in the KV cache) and ``num_tokens = prompt + generated``;
  each step lets ``computed`` catch up. A step that brings ``computed`` to ``num_tokens`` samples
  one new token (the last prompt chunk emits the first token; a decode emits the next one).
* A preempted request frees its blocks, restarts from ``computed = 0`` at the head of the
  waiting queue, and recomputes prompt *and* generated tokens when resumed.

Choices where the engines leave room, and what is not modelled:

* Timeouts are client-side: past its deadline the client has given up, and the replica drops the
  request (freeing its blocks) at its first step boundary after the deadline.
* A request that can never be scheduled (its whole sequence needs more blocks than the replica
  has; without chunking, more tokens than the budget) is rejected when it arrives. With
  ``max_waiting_requests`` an arrival that finds the queue full is rejected at the next boundary.
* On a disaggregated decode replica, blocks reserved for queued KV transfers can starve the head
  of the queue while nothing runs (vLLM would wait forever); that request is rejected instead.
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

State is struct-of-arrays over request ids (:class:`~.requests.RequestTable`, shared by every
replica of a simulation). There is no event heap: the only events are the next arrival, the end
of the current step, transfer completions and deadlines. A step whose batch is all decodes and
whose successors provably repeat it is extended into a decode run (:mod:`.decode_run`). A run
also starts right after a step with prefills when that step leaves a batch of decodes that all
just produced a token and nothing can be admitted (the next step would be the run's first).
The result is identical to stepping one step at a time (``skip_decode_runs=False``), which the
tests assert.
"""

from __future__ import annotations

import math

import numpy as np

from servesize.core.simulation.config import SchedulerConfig
from servesize.core.simulation.decode_run import DecodeRunAccelerator
from servesize.core.simulation.policies import batch_formation
from servesize.core.simulation.replica_state import ReplicaState
from servesize.core.simulation.requests import REJECTED, RequestTable
from servesize.core.simulation.steptime import StepTimeModel

_INF = math.inf


class ReplicaSimulator(ReplicaState):
    """One replica: scheduling policy, KV block pool and step log.

    Parameters
    ----------
    index : int
        Replica id (owner tag in the request table, ``replica`` in results).
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
        send its next request before the replica decides further steps.
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
        super().__init__(
            index,
            table,
            config,
            step_time,
            prefill_only=prefill_only,
            remote_kv=remote_kv,
            stop_on_exit=stop_on_exit,
            first_token_after_transfer=first_token_after_transfer,
        )
        self.policy = batch_formation(config, remote_kv=remote_kv)
        self.skip = skip_decode_runs
        # A decode run in progress (stopped at a decision horizon, to be continued).
        self.runs = DecodeRunAccelerator(step_time)

    # ------------------------------------------------------------------ inputs

    def push(self, r: int, t: float) -> None:
        """Route request ``r`` to this replica at time ``t`` (calls must come in time order).
        A request that could never be scheduled here is rejected on the spot."""
        tab = self.tab
        self.pushed += 1
        if self.delay:
            tab.final_tokens[r] = tab.prompt_tokens[r] + tab.output_tokens[r] + self.delay
        if self._infeasible(r):
            self.reject(r, t)
            return
        self.arr_ids.append(r)
        self.arr_times.append(t)
        tab.owner[r] = self.index

    def push_many(self, ids: np.ndarray, times: np.ndarray) -> None:
        """Route many requests at once (sorted by time); vectorised :meth:`push`."""
        tab = self.tab
        if self.delay:
            tab.final_tokens[ids] = tab.prompt_tokens[ids] + tab.output_tokens[ids] + self.delay
        tokens = tab.prompt_tokens[ids] if self.prefill_only else tab.final_tokens[ids] - 1
        bad = self.pool.never_fits(tokens)
        if not self.policy.chunks_prompts:
            # Without preemption (guaranteed_no_evict) a step only ever holds the prompt.
            one_step = tab.prompt_tokens[ids] if self.pool.reserves_whole else tokens
            bad |= one_step > self.policy.budget
        self.pushed += int(ids.size)
        if np.count_nonzero(bad):
            rejected = ids[bad]
            tab.status[rejected] = REJECTED
            tab.exit_s[rejected] = times[bad]
            self.exits.extend(rejected.tolist())
            self.exited += int(rejected.size)
            ids, times = ids[~bad], times[~bad]
        self.arr_ids.extend(ids.tolist())
        self.arr_times.extend(times.tolist())
        tab.owner[ids] = self.index

    def _infeasible(self, r: int) -> bool:
        """Never schedulable here: more blocks than the replica has, or (without chunking) more
        tokens than the budget in one step (a resumed request recomputes all of them; without
        preemption, under ``guaranteed_no_evict``, only the prompt is ever computed at once)."""
        pool = self.pool
        if self.blocks_for_whole(r) + pool.watermark_blocks > pool.total_blocks:
            return True
        if self.policy.chunks_prompts:
            return False
        if pool.reserves_whole:
            return int(self.tab.prompt_tokens[r]) > self.policy.budget
        return self.whole_tokens(r) > self.policy.budget

    # ------------------------------------------------------------------ queries

    @property
    def total_blocks(self) -> int:
        """KV blocks of the replica."""
        return self.pool.total_blocks

    @property
    def outstanding(self) -> int:
        """Requests routed here that have not left yet."""
        return self.pushed - self.exited

    def outstanding_at(self, t: float) -> int:
        """Requests routed here and not gone by ``t``. The last applied step may end after
        ``t`` (see :meth:`advance`); its departures do not count yet."""
        late = self._last_exit_count if self._last_exit_time > t else 0
        return self.pushed - self.exited + late

    def next_decision_s(self) -> float:
        """When this replica next schedules a step (``inf`` if idle with nothing routed to it).
        Anything it emits afterwards happens strictly later (steps take positive time)."""
        if self.has_work():
            return self.t
        return max(self.next_event(), self.t)

    # ------------------------------------------------------------------ main loop

    def advance(self, horizon_s: float = _INF, inclusive: bool = True) -> bool:
        """Make every scheduling decision at times ``< horizon_s`` (``<=`` when ``inclusive``).

        A decided step is applied at once, so the last one may end after the horizon; its
        effects are then already visible (see :meth:`outstanding_at`). That is sound because a
        step's composition is fixed when it is decided: a request routed here later is seen at
        the next decision. Returns whether anything happened.
        """
        runs = self.runs
        policy = self.policy
        pool = self.pool
        progressed = False
        while True:
            if runs.run is not None:
                # A decode run stopped at the previous horizon: continue it (it re-checks
                # arrivals, deadlines and blocks itself and closes when it cannot go on).
                progressed |= runs.extend(self, horizon_s, inclusive)
                if runs.run is not None:
                    return progressed
                if self.stop_on_exit and self.exits:
                    return True
            if not self.has_work() and not self._idle_until_next_event(horizon_s, inclusive):
                return progressed
            t = self.t
            if t > horizon_s or (t == horizon_s and not inclusive):
                if t == horizon_s and self.expire(t):
                    # Drops at this boundary are its effects: the router must see them.
                    return True
                return progressed
            before = (self.arr_ptr, self.exited, self.n_moving, pool.free_blocks)
            # Clients that gave up leave first; then arrivals join (an arrival whose deadline
            # has already passed leaves at once).
            self.expire(t)
            self.admit_arrivals(t)
            self.expire(t)
            if self.remote_kv:
                self.complete_transfers(t)
            if self.stop_on_exit and self.exits:
                return True
            plan = policy.decide(self, t)
            if plan is None:
                progressed |= before != (self.arr_ptr, self.exited, self.n_moving, pool.free_blocks)
                if not self._idle_until_next_event(horizon_s, inclusive):
                    return progressed
                progressed = True
                continue
            progressed = True
            exits_before = len(self.exits)
            all_emitted = self.apply(plan)
            if self.stop_on_exit and self.exits:
                return True
            if not self.skip or len(self.exits) != exits_before:
                continue
            blocked = plan.admission_blocked
            if not plan.pure_decode:
                after = policy.decodes_next(self, plan, all_emitted)
                if after is None:
                    continue
                blocked = after
            if self.delay and np.count_nonzero(np.isnan(self.tab.last_token_s[self.running])):
                # A running request's next token is its first visible one: step it alone.
                continue
            if runs.cut_at_once(self, blocked):
                continue
            runs.open(self, blocked)
            runs.extend(self, horizon_s, inclusive)
            if runs.run is not None:
                return True
            if self.stop_on_exit and self.exits:
                return True

    def _idle_until_next_event(self, horizon_s: float, inclusive: bool) -> bool:
        """Jump the clock to the next arrival or transfer completion if the horizon allows."""
        nxt = self.next_event()
        if nxt == _INF:
            return False
        nxt = max(nxt, self.t)
        if nxt > horizon_s or (nxt == horizon_s and not inclusive):
            return False
        if nxt > self.t and self.n_waiting:
            self.idle.append((self.t, nxt, self.n_waiting))
        self.t = nxt
        return True

    def close(self) -> None:
        """Finish any decode run left open at a horizon (before reading the results)."""
        if self.runs.run is not None:
            self.runs.close(self)
