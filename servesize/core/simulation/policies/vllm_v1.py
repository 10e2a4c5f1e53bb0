"""vLLM v1's scheduler: running requests first, chunked prefill (``policy="vllm_v1"``).

``vllm-project/vllm:vllm/v1/core/sched/scheduler.py: schedule``: running requests are served
first, in admission order, ``min(num_tokens - computed, budget left)`` tokens each; blocks are
allocated for ``computed + scheduled`` tokens. When a request cannot get its blocks, the most
recently admitted running request is preempted (blocks freed, ``computed = 0``, prepended to the
waiting queue), until the allocation succeeds or the request preempted itself. Waiting requests
are admitted FCFS only if no preemption happened in this step, fewer than ``max_num_seqs`` run,
budget is left and their first chunk's blocks (plus the watermark) are free.

The preemption is vLLM's, release v0.11.0 (``Scheduler.schedule``: ``self.running.pop()``,
``kv_cache_manager.free``, ``num_computed_tokens = 0``, ``self.waiting.prepend_request``, stop
when the request preempted itself; waiting requests only ``if not preempted_reqs``); the
allocation is ``KVCacheManager.allocate_slots`` for ``computed + scheduled`` tokens, with no
watermark in v1. This is ``capacity_policy="incremental"``; under the other capacity policies
(:mod:`.capacity`, TensorRT-LLM's ``guaranteed_no_evict`` in :meth:`BatchFormation.try_admit`)
admission and eviction follow the engine named, the batch formation stays as here.

On the decode replica of a disaggregated pair a waiting request first reserves the blocks of its
prompt KV and starts the transfer (vLLM ``WAITING_FOR_REMOTE_KVS``); every policy but
``prefill_first`` admits such requests this way.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from servesize.core.simulation.policies.base import BatchFormation
from servesize.core.simulation.replica_state import ReplicaState, StepPlan
from servesize.core.simulation.requests import ACTIVE, TRANSFER_MOVING, TRANSFER_PENDING

_EMPTY = np.zeros(0, dtype=np.int64)
_sum = np.add.reduce


class VllmV1(BatchFormation):
    """Running requests first, then FCFS admission, within one token budget per step.

    ``admits_after_preemption``: whether waiting requests are admitted in a step that preempted
    (vLLM v1: no).
    """

    admits_after_preemption: ClassVar[bool] = False

    def decide(self, state: ReplicaState, t: float) -> StepPlan | None:
        self.estimate_refused = False
        tab = state.tab
        comp = tab.computed_tokens
        run = state.running
        preempted = False
        used = 0
        tokens_run = c_run = _EMPTY
        whole_batch = True
        if run.size:
            c_run = comp[run]
            after = tab.num_tokens[run]
            want = after - c_run  # >= 1 for every running request
            used = int(_sum(want))
            if used <= self.budget and not self.decodes_bypass_budget:
                tokens_run = want  # everyone gets all it wants
            else:
                tokens_run = self.budget_running(state, run, c_run, want)
                used = int(_sum(tokens_run))
                whole_batch = False
                after = c_run + tokens_run
            if not state.pool.grow_to(run, after):
                run, tokens_run, preempted = self.allocate_with_preemption(
                    state, t, run, tokens_run
                )
                state.running = run
                c_run = comp[run]
                used = int(_sum(tokens_run))
                whole_batch = False
        adm: list[int] = []
        adm_n: list[int] = []
        # Whether a request arriving now could not be admitted either, for as long as the batch
        # stays as it is (full, out of budget, or behind a FCFS head that does not fit).
        blocked = False
        if not preempted or self.admits_after_preemption:
            left = self.budget - used
            if left <= 0 or run.size >= self.max_seqs:
                blocked = True
            elif state.n_waiting:
                if state.remote_kv:
                    stuck = self.admit_remote(state, t, left, int(run.size), adm, adm_n)
                    if stuck >= 0 and run.size == 0 and not adm:
                        # Nothing runs, so no block will ever be freed: KV reserved by queued
                        # transfers starves the head of the queue (vLLM would hang here).
                        state.drop_waiting(stuck, t)
                        return self.decide(state, t)
                else:
                    blocked = self.admit(state, t, left, int(run.size), adm, adm_n)
        if not whole_batch and run.size:
            scheduled = tokens_run > 0
            if np.count_nonzero(scheduled) < scheduled.size:
                run, tokens_run, c_run = run[scheduled], tokens_run[scheduled], c_run[scheduled]
            elif not preempted:
                whole_batch = True
        if adm:
            adm_ids = np.array(adm, dtype=np.int64)
            state.running = np.concatenate((state.running, adm_ids))
            ids = np.concatenate((run, adm_ids))
            tokens = np.concatenate((tokens_run, np.array(adm_n, dtype=np.int64)))
            c_before = np.concatenate((c_run, comp[adm_ids]))
        else:
            ids, tokens, c_before = run, tokens_run, c_run
        if ids.size == 0:
            # Everything running was preempted: vLLM runs an empty step and admits next time.
            return self.decide(state, t) if preempted else None
        return state.plan_step(
            t,
            ids,
            tokens,
            c_before,
            pure_decode=not preempted and not adm and whole_batch and not self.estimate_refused,
            blocked=blocked,
            preempted=preempted,
        )

    def admit_remote(
        self, state: ReplicaState, t: float, left: int, nrun: int, adm: list[int], adm_n: list[int]
    ) -> int:
        """Decode worker: vLLM's ``WAITING_FOR_REMOTE_KVS`` handling. A request first reserves
        the blocks of its prompt KV and starts the transfer, then is skipped; once its KV has
        arrived it is admitted like a resumed request with ``computed = prompt``. Returns the
        request that did not fit (-1 if none)."""
        tab = state.tab
        pool = state.pool
        waiting = state.waiting
        skipped: list[int] = []
        stuck = -1
        me = state.index
        while waiting and left > 0 and nrun + len(adm) < self.max_seqs:
            r = waiting[0]
            if tab.status[r] != ACTIVE or tab.owner[r] != me:
                waiting.popleft()
                continue
            transfer = tab.transfer_state[r]
            if transfer == TRANSFER_MOVING:
                waiting.popleft()
                skipped.append(r)
                continue
            if transfer == TRANSFER_PENDING:
                need = pool.blocks_for(int(tab.prompt_tokens[r]))
                if not pool.admits(need):
                    stuck = r
                    break
                state.start_transfer(r, t, need)
                waiting.popleft()
                skipped.append(r)
                continue
            tokens = self.try_admit(state, r, t, left)
            if tokens == 0:
                stuck = r
                break
            waiting.popleft()
            state.n_waiting -= 1
            adm.append(r)
            adm_n.append(tokens)
            left -= tokens
        waiting.extendleft(reversed(skipped))
        return stuck
