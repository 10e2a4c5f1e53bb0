"""SGLang's KV admission and retraction (``capacity_policy="new_token_ratio"``).

Mirrors sgl-project/sglang (the v0.5 line; read at main, commit 00550cd1, where the formulas
below are those of ``python/sglang/srt/managers/schedule_policy.py`` and
``schedule_batch.py``; v0.5.1.post1 counts a resumed request's whole ``max_new_tokens``):

* ``schedule_policy.py: PrefillAdder``: the room for new requests is
  ``rem_total = free + evictable - Σ_running min(max_new - generated, 4096) · ratio``; a waiting
  request (FCFS) is refused — and admission stops — when ``extend + max_new + page_size >=
  rem_total`` with ``max_new = min(max(max_new_tokens - generated, 0), 4096)``
  (``add_one_req``: its own output counts in full); once admitted, ``rem_total`` loses its
  (paged) prompt tokens scheduled now and, unless it was chunked, its ``max_new``
  (``_update_prefill_budget``).
* ``scheduler.py: update_running_batch``: before a decode step, if the pool cannot take one more
  token of every decode (``ScheduleBatch.check_decode_mem``), ``ScheduleBatch.retract_decode``
  retracts requests — fewest generated tokens first, the longest prompt first among equals,
  keeping at least one — freeing their KV (not kept in the radix cache) and appending them to
  the waiting queue, where they recompute prompt and generated tokens; the ratio becomes
  ``min(1, (Σ generated + 20 · n) / Σ max_new)`` over the ``n`` requests kept. Otherwise the
  ratio decays by ``(0.7 - 0.098) / 600`` per decode step down to 0.098.

Evictable radix-cache tokens count as free: the benchmarks' random prompts share no prefix, so a
finished request's cached KV is evicted whenever it is needed. Pages are the pool's blocks.
"""

from __future__ import annotations

import numpy as np

from servesize.core.simulation.config import (
    SGLANG_CLIP_MAX_NEW_TOKENS,
    SGLANG_MIN_NEW_TOKEN_RATIO,
    SGLANG_NEW_TOKEN_RATIO_DECAY,
    SGLANG_RETRACT_DECODE_STEPS,
)
from servesize.core.simulation.replica_state import ReplicaState

_sum = np.add.reduce


def new_token_ratio(state: ReplicaState) -> float:
    """``new_token_ratio`` now: the last value set, less one decay per decode step since."""
    steps = state.decode_steps - state.token_ratio_anchor_step
    ratio = state.token_ratio_anchor - SGLANG_NEW_TOKEN_RATIO_DECAY * max(steps, 0)
    return max(ratio, SGLANG_MIN_NEW_TOKEN_RATIO)


def admission_room_tokens(state: ReplicaState) -> float:
    """``PrefillAdder.rem_total_tokens`` before any admission in this step."""
    tab = state.tab
    run = state.running
    free = float(state.pool.free_blocks * state.pool.block_size_tokens)
    if run.size == 0:
        return free
    generated = tab.num_tokens[run] - tab.prompt_tokens[run]
    left = np.minimum(np.maximum(tab.output_tokens[run] - generated, 0), SGLANG_CLIP_MAX_NEW_TOKENS)
    return free - float(_sum(left)) * new_token_ratio(state)


def _max_new_left(state: ReplicaState, r: int) -> int:
    """``min(max(max_new_tokens - len(output_ids), 0), 4096)`` of request ``r``."""
    tab = state.tab
    left = int(tab.output_tokens[r] - (tab.num_tokens[r] - tab.prompt_tokens[r]))
    return min(max(left, 0), SGLANG_CLIP_MAX_NEW_TOKENS)


def admission_estimate_tokens(state: ReplicaState, r: int) -> int:
    """``extend_input_len + max_new + page_size`` of waiting request ``r`` (``add_one_req``);
    with a prefix cache the extend is what its radix-cache match leaves
    (``Req.init_next_round_input``: ``extend_input_len = len(fill_ids) - len(prefix_indices)``)."""
    tab = state.tab
    computed = int(tab.computed_tokens[r])
    extend = int(tab.num_tokens[r]) - computed
    pool = state.pool
    if computed == 0:
        hit = pool.prefix.lookup(r, pool.free_blocks)[0] if pool.prefix is not None else 0
        if pool.host is not None:
            hit += pool.host.lookup(r, hit)
        extend -= hit * pool.block_size_tokens
    return extend + _max_new_left(state, r) + state.pool.block_size_tokens


def admitted_tokens(state: ReplicaState, r: int, tokens: int, whole: bool) -> int:
    """What admitting ``r`` with ``tokens`` prompt tokens now takes from the room
    (``_update_prefill_budget``): the paged tokens, plus its ``max_new`` unless its prompt was
    chunked."""
    bs = state.pool.block_size_tokens
    paged = -(-tokens // bs) * bs
    return paged + (_max_new_left(state, r) if whole else 0)


def retract_decode(
    state: ReplicaState, run: np.ndarray, n: np.ndarray, t: float
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Retract running requests until the others' ``n`` tokens fit (see the module docstring).
    Returns the survivors in running order, their tokens and whether any was retracted; when a
    lone survivor still cannot grow, the survivors are empty and nothing is allocated."""
    tab = state.tab
    pool = state.pool
    comp = tab.computed_tokens
    bs = pool.block_size_tokens
    need = np.maximum((comp[run] + n + (bs - 1)) // bs - pool.held[run], 0)
    need[n == 0] = 0
    generated = tab.num_tokens[run] - tab.prompt_tokens[run]
    # Sorted by (generated, -prompt) descending; retracted from the end. Only requests that
    # decode in this step are candidates (SGLang's running batch holds no unfinished chunk).
    order = [i for i in np.lexsort((tab.prompt_tokens[run], -generated)).tolist() if n[i] > 0]
    keep = np.ones(run.size, dtype=bool)
    total = int(_sum(need))
    retracted = False
    while total > pool.free_blocks and len(order) > 1:
        i = order.pop()
        v = int(run[i])
        keep[i] = False
        total -= int(need[i])
        pool.release(v)
        state.requeue_preempted(v, t, to_back=True)
        retracted = True
    survivors, tokens = run[keep], n[keep]
    if total > pool.free_blocks:
        return survivors[:0], tokens[:0], retracted
    assert pool.grow_to(survivors, comp[survivors] + tokens)
    if retracted:
        kept_generated = generated[keep]
        max_new = int(_sum(tab.output_tokens[survivors]))
        ratio = (float(_sum(kept_generated)) + SGLANG_RETRACT_DECODE_STEPS * survivors.size) / max(
            max_new, 1
        )
        state.token_ratio_anchor = min(1.0, ratio)
        # The decode step about to run does not decay the ratio it set.
        state.token_ratio_anchor_step = state.decode_steps + 1
    return survivors, tokens, retracted
