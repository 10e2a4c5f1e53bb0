"""Sarathi-Serve's stall-free batching (``policy="sarathi"``).

``microsoft/sarathi-serve:sarathi/core/scheduler/sarathi_scheduler.py``: every running decode
takes its one token (outside the chunk budget), then partial prefills continue in order within
what is left, then new requests are admitted with ``min(remaining, budget - batched)`` tokens,
also in a step that preempted. A request is admitted only if the blocks of its whole prompt (plus
the watermark) are free, and they are all allocated at admission.

Sarathi's block manager wants a free block before every decode append; here a block is needed
only when the sequence crosses a block boundary, as in vLLM v1.
"""

from __future__ import annotations

import numpy as np

from servesize.core.simulation.policies.vllm_v1 import VllmV1
from servesize.core.simulation.replica_state import ReplicaState


class Sarathi(VllmV1):
    """Decodes first and unbudgeted, then chunked prefills; whole-prompt KV at admission."""

    decodes_bypass_budget = True
    admits_after_preemption = True

    def budget_running(
        self, state: ReplicaState, run: np.ndarray, c_run: np.ndarray, want: np.ndarray
    ) -> np.ndarray:
        """Every decode takes 1 token (no budget check), then partial prefills in order."""
        is_dec = c_run >= state.tab.prefill_end_tokens[run]
        n = np.ones_like(want)
        pre = ~is_dec
        if np.count_nonzero(pre):
            wp = want[pre]
            before = wp.cumsum() - wp + int(np.count_nonzero(is_dec))
            n[pre] = np.minimum(wp, np.maximum(self.budget - before, 0))
        return n

    def rebudget_survivors(
        self, state: ReplicaState, survivors: np.ndarray, tokens: np.ndarray
    ) -> np.ndarray:
        """Decodes kept their single token; partial prefills share what the decodes left."""
        tab = state.tab
        c_s = tab.computed_tokens[survivors]
        return self.budget_running(state, survivors, c_s, tab.num_tokens[survivors] - c_s)

    def admission_blocks(
        self, computed: int, tokens: int, total: int, held: int
    ) -> tuple[int, int]:
        """The whole prompt's blocks, checked and allocated at admission."""
        need = -(-total // self.block_size) - held
        return need, need
