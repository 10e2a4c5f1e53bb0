"""The scheduling-policy interface and the admission and preemption steps policies share.

A policy is a :class:`BatchFormation`: given a replica's state at a step boundary it decides the
next step (:meth:`BatchFormation.decide`: who computes how many tokens, admitting, allocating KV
blocks and preempting as it goes) and says whether the step after a mixed one is provably a
decode step of the same batch (:meth:`BatchFormation.decodes_next`, which lets the simulator
skip ahead over decode runs). The shared pieces follow vLLM v1 (``vllm-project/vllm:vllm/v1/
core/sched/scheduler.py: schedule``): FCFS admission, the running requests' token budget in
admission order, and preemption of the most recently admitted running request on block
shortage.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from servesize.core.simulation.config import SchedulerConfig
from servesize.core.simulation.policies.capacity import (
    admission_estimate_tokens,
    admission_room_tokens,
    admitted_tokens,
    retract_decode,
)
from servesize.core.simulation.replica_state import ReplicaState, StepPlan
from servesize.core.simulation.requests import ACTIVE


class BatchFormation(ABC):
    """How a replica forms each step's batch.

    Class attributes describe the policy to the simulator:

    ``chunks_prompts``
        False if a waiting request (or a resumed one, which recomputes prompt and generated
        tokens) must run all its tokens in one step: it is admitted only if they fit in the
        budget left, and a request whose whole sequence exceeds the budget is rejected.
    ``decodes_bypass_budget``
        True if every decode takes its token whatever the budget (then a decode batch larger
        than the budget can still repeat).
    """

    chunks_prompts: ClassVar[bool] = True
    decodes_bypass_budget: ClassVar[bool] = False

    def __init__(self, config: SchedulerConfig) -> None:
        self.budget = config.max_num_batched_tokens
        self.max_seqs = config.max_num_seqs
        self.block_size = config.block_size_tokens
        self.full_prompt_gate = config.admit_full_prompt
        self.capacity = config.capacity_policy
        self.reserve_whole = config.capacity_policy == "guaranteed_no_evict"
        self.token_ratio = config.capacity_policy == "new_token_ratio"
        self.estimate_refused = False
        """Whether the last :meth:`admit` stopped at SGLang's token estimate: the room grows as
        the ratio decays and outputs shrink, so the step is no decode run's start."""

    @classmethod
    def on_decode_replica(cls) -> type[BatchFormation]:
        """The formation of a disaggregated decode replica, whose prompts arrive as KV."""
        return cls

    @abstractmethod
    def decide(self, state: ReplicaState, t: float) -> StepPlan | None:
        """Schedule one step at ``t`` (costed and logged by :meth:`ReplicaState.plan_step`);
        None if nothing can run now."""

    def decodes_next(self, state: ReplicaState, p: StepPlan, all_emitted: bool) -> bool | None:
        """After a step that was not pure decode: whether the next step provably is one of the
        same batch (then with its ``admission_blocked``), or None.

        It is when every running request was in the step and produced a token there (so each is
        now a decode whose next token is a regular ITL sample), nothing was preempted, the batch
        fits the budget whole, and no waiting request can be admitted: none waits, or the batch
        is full or out of budget. The next decision would then schedule exactly that step (or
        meet an arrival, deadline or block shortage first, where the run stops with no step).
        """
        if p.preempted or not all_emitted or state.remote_kv or state.prefill_only:
            return None
        batch = int(p.ids.size)
        if batch != state.running.size or not (self.decodes_bypass_budget or batch <= self.budget):
            return None
        full = batch >= self.max_seqs or self.budget - batch <= 0
        if state.n_waiting and not full:
            return None
        return full

    # ------------------------------------------------------------------ shared steps

    def budget_running(
        self, state: ReplicaState, run: np.ndarray, c_run: np.ndarray, want: np.ndarray
    ) -> np.ndarray:
        """Tokens per running request in this step: vLLM v1 serves them in admission order,
        each ``min(want, budget left)``, zero once the budget runs out."""
        before = want.cumsum() - want
        return np.asarray(np.minimum(want, np.maximum(self.budget - before, 0)))

    def rebudget_survivors(
        self, state: ReplicaState, survivors: np.ndarray, tokens: np.ndarray
    ) -> np.ndarray:
        """Tokens of the requests that survived a preemption (vLLM: what they were given)."""
        return tokens

    def allocate_with_preemption(
        self, state: ReplicaState, t: float, run: np.ndarray, n: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """Allocate in running order; on shortage preempt from the tail (vLLM ``running.pop()``,
        Sarathi ``running.pop(-1)``) until the allocation fits or the request preempted itself
        (:meth:`KVBlockPool.allocate_or_preempt`). Returns the survivors, their tokens and
        whether anything was preempted. Under ``new_token_ratio`` SGLang's retraction picks the
        victims instead (:func:`~.capacity.retract_decode`); vLLM's rule is the fallback when a
        lone survivor still cannot grow.

        A request that preempts itself while nothing else runs, and whose whole sequence does
        not fit in the blocks left free, can never finish: the missing blocks are reserved for
        KV transfers of requests queued behind it (decode replica of a disaggregated pair). The
        scheduler would re-admit and preempt it forever; it is dropped as rejected instead.
        """
        if self.token_ratio:
            survivors, tokens, retracted = retract_decode(state, run, n, t)
            if survivors.size:
                return survivors, tokens, retracted
            run, n = run[state.tab.is_running[run]], n[state.tab.is_running[run]]
        ids: list[int] = run.tolist()
        ns: list[int] = n.tolist()
        pool = state.pool
        kept, victims, self_preempted = pool.allocate_or_preempt(ids, ns, state.tab.computed_tokens)
        for v in victims:
            state.requeue_preempted(v, t)
        if self_preempted:
            r = ids[kept]
            if len(victims) == len(ids) and state.blocks_for_whole(r) > pool.free_blocks:
                state.drop_waiting(r, t)
        survivors = np.array(ids[:kept], dtype=np.int64)
        tokens = self.rebudget_survivors(state, survivors, np.array(ns[:kept], dtype=np.int64))
        return survivors, tokens, bool(victims)

    def admission_blocks(
        self, computed: int, tokens: int, total: int, held: int
    ) -> tuple[int, int]:
        """Blocks to allocate when admitting a request with ``computed`` of ``total`` tokens
        in KV for ``tokens`` more, and the blocks that must be free for it to be admitted (vLLM:
        its first chunk's, or with ``admit_full_prompt`` its whole prompt's)."""
        bs = self.block_size
        need = -(-(computed + tokens) // bs) - held
        gate = -(-total // bs) - held if self.full_prompt_gate else need
        return need, gate

    def try_admit(self, state: ReplicaState, r: int, t: float, left: int) -> int:
        """Admit waiting request ``r`` with up to ``left`` tokens; 0 if it does not fit now.

        Under ``guaranteed_no_evict`` it takes the blocks of its whole sequence
        (:meth:`ReplicaState.blocks_for_whole`) and only if they are free."""
        tab = state.tab
        c = int(tab.computed_tokens[r])
        total = int(tab.num_tokens[r])
        pool = state.pool
        held = int(pool.held[r])
        hit = touched = 0
        fresh = c == 0
        if pool.prefix is not None and fresh:
            # Cached prefix blocks count as computed (vLLM ``get_computed_blocks``).
            hit, touched = pool.prefix.lookup(r, pool.free_blocks)
            c = hit * self.block_size
            held += hit
        loaded = 0
        if pool.host is not None and fresh:
            # Blocks after the GPU hit that the host tier holds are loaded, not recomputed
            # (vLLM ``OffloadingConnectorScheduler.get_num_new_matched_tokens``).
            loaded = pool.host.lookup(r, hit)
            c += loaded * self.block_size
        want = total - c
        if not self.chunks_prompts and want > left:
            return 0
        tokens = want if want < left else left
        if self.reserve_whole:
            need = gate = max(state.blocks_for_whole(r) - held, 0)
        else:
            need, gate = self.admission_blocks(c, tokens, total, held)
        if hit:
            if not pool.admit_with_hit(r, need, gate, hit, touched):
                return 0
        elif not pool.admit(r, need, gate):
            return 0
        if hit or loaded:
            tab.computed_tokens[r] = c
        if loaded:
            assert pool.host is not None
            pool.host.acquire(r, loaded)
        tab.is_running[r] = True
        if math.isnan(tab.first_scheduled_s[r]):
            tab.first_scheduled_s[r] = t
        return tokens

    def admit(
        self, state: ReplicaState, t: float, left: int, nrun: int, adm: list[int], adm_n: list[int]
    ) -> bool:
        """FCFS admission into ``adm``/``adm_n``; returns True when it stopped at a head that
        does not fit (under ``new_token_ratio`` also SGLang's token estimate, :mod:`.capacity`)."""
        tab = state.tab
        waiting = state.waiting
        me = state.index
        room = admission_room_tokens(state) if self.token_ratio else 0.0
        self.estimate_refused = False
        while state.n_waiting and left > 0 and nrun + len(adm) < self.max_seqs:
            r = waiting[0]
            if tab.status[r] != ACTIVE or tab.owner[r] != me:
                waiting.popleft()
                continue
            if self.token_ratio and (nrun or adm) and admission_estimate_tokens(state, r) >= room:
                # (An idle replica admits on blocks alone, so a request whose estimate exceeds
                # the whole pool cannot stall it.)
                self.estimate_refused = True
                return True
            tokens = self.try_admit(state, r, t, left)
            if tokens == 0:
                return True
            if self.token_ratio:
                whole = tokens == int(tab.num_tokens[r] - tab.computed_tokens[r])
                room -= admitted_tokens(state, r, tokens, whole)
            waiting.popleft()
            state.n_waiting -= 1
            adm.append(r)
            adm_n.append(tokens)
            left -= tokens
        return False
