"""SGLang's default scheduler: prefill steps first (``policy="prefill_first"``).

``sgl-project/sglang:python/sglang/srt/managers/scheduler.py: get_next_batch_to_run`` without
``--enable-mixed-chunk``: a step holds prefills only whenever one can run (unfinished prompt
chunks, then waiting requests FCFS within the budget, SGLang ``max_prefill_tokens``), and the
running decodes wait; otherwise every running request decodes in one step, whatever the budget,
with preemption as in vLLM v1 on block shortage. On the decode replica of a disaggregated pair,
whose prompts arrive as KV, the replica admits as ``vllm_v1`` does.
"""

from __future__ import annotations

import numpy as np

from servesize.core.simulation.policies.base import BatchFormation
from servesize.core.simulation.policies.vllm_v1 import VllmV1
from servesize.core.simulation.replica_state import ReplicaState, StepPlan


class PrefillFirst(BatchFormation):
    """Prefill-only steps whenever a prefill can run, else one decode step of everyone."""

    decodes_bypass_budget = True

    @classmethod
    def on_decode_replica(cls) -> type[BatchFormation]:
        """Prompts arrive as KV: the replica admits and steps as vLLM v1 does."""
        return VllmV1

    def decide(self, state: ReplicaState, t: float) -> StepPlan | None:
        """A step of prefills only when any can run — the unfinished prompt chunks of running
        requests first, then waiting requests FCFS, within the token budget; none is admitted
        while a running chunk waits for blocks — else one decode step of every running request
        (no budget). On block shortage the most recently admitted running requests are
        preempted, a stalled chunk included."""
        self.estimate_refused = False
        tab = state.tab
        pool = state.pool
        comp = tab.computed_tokens
        run = state.running
        left = self.budget
        ids: list[int] = []
        ns: list[int] = []
        stuck = False
        if run.size:
            for r in run[comp[run] < tab.prefill_end_tokens[run]].tolist():
                c = int(comp[r])
                n = min(int(tab.num_tokens[r]) - c, left)
                need = pool.growth(r, c + n)
                if n <= 0 or need > pool.free_blocks:
                    stuck = n > 0
                    break
                pool.allocate(r, need)
                ids.append(r)
                ns.append(n)
                left -= n
        adm: list[int] = []
        adm_n: list[int] = []
        blocked = stuck or int(run.size) >= self.max_seqs
        if state.n_waiting and left > 0 and not blocked:
            blocked = self.admit(state, t, left, int(run.size), adm, adm_n)
        if ids or adm:
            if adm:
                state.running = np.concatenate((state.running, np.array(adm, dtype=np.int64)))
            step_ids = np.array(ids + adm, dtype=np.int64)
            return state.plan_step(
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
        decoding = comp[run] >= tab.prefill_end_tokens[run]
        if np.count_nonzero(decoding):
            # A decode step: one token for every decode; stalled chunks wait (0 tokens).
            want = decoding.astype(np.int64)
        elif stuck:
            # Only stalled chunks run: their next chunks, in order, within the budget.
            want = self.budget_running(state, run, comp[run], tab.num_tokens[run] - comp[run])
        else:
            return None
        # A stalled chunk (0 tokens) already holds the blocks of what it computed: no growth.
        preempted = False
        if pool.grow_to(run, comp[run] + want):
            survivors, tokens = run, want
        else:
            survivors, tokens, preempted = self.allocate_with_preemption(state, t, run, want)
            state.running = state.running[tab.is_running[state.running]]
        scheduled = tokens > 0
        step_ids, step_tokens = survivors[scheduled], tokens[scheduled]
        if step_ids.size == 0:
            return self.decide(state, t) if preempted else None
        return state.plan_step(
            t,
            step_ids,
            step_tokens,
            comp[step_ids],
            pure_decode=not preempted
            and step_ids.size == state.running.size
            and not self.estimate_refused,
            blocked=blocked,
            preempted=preempted,
        )

    def decodes_next(self, state: ReplicaState, p: StepPlan, all_emitted: bool) -> bool | None:
        """As :meth:`BatchFormation.decodes_next`, but a decode step does not use the budget a
        prefill step would admit with: only a full running set blocks admission."""
        if p.preempted or not all_emitted or state.remote_kv or state.prefill_only:
            return None
        batch = int(p.ids.size)
        if batch != state.running.size:
            return None
        full = batch >= self.max_seqs
        if state.n_waiting and not full:
            return None
        return full
