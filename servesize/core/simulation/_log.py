"""Append-only per-step columns with amortised O(1) appends (internal)."""

from __future__ import annotations

import numpy as np

_INT_COLUMNS = (
    "prefill_tokens",
    "decode_seqs",
    "decode_context_tokens",
    "num_seqs",
    "kv_blocks_used",
    "num_waiting",
    "num_running",
    "output_tokens",
    "itl_weight",
)
_FLOAT_COLUMNS = ("start_s", "duration_s", "prefill_attention_work")


class StepLog:
    """One row per engine step; grows by doubling."""

    __slots__ = ("_cap", "columns", "size")

    def __init__(self, capacity: int = 1024) -> None:
        self._cap = capacity
        self.size = 0
        self.columns: dict[str, np.ndarray] = {
            **{name: np.empty(capacity, dtype=np.float64) for name in _FLOAT_COLUMNS},
            **{name: np.empty(capacity, dtype=np.int64) for name in _INT_COLUMNS},
        }

    def _reserve(self, extra: int) -> None:
        need = self.size + extra
        if need <= self._cap:
            return
        cap = max(need, 2 * self._cap)
        for name, col in self.columns.items():
            grown = np.empty(cap, dtype=col.dtype)
            grown[: self.size] = col[: self.size]
            self.columns[name] = grown
        self._cap = cap

    def append_row(
        self,
        start_s: float,
        duration_s: float,
        prefill_tokens: int,
        prefill_attention_work: float,
        decode_seqs: int,
        decode_context_tokens: int,
        num_seqs: int,
        kv_blocks_used: int,
        num_waiting: int,
        num_running: int,
    ) -> int:
        """Write one step (output tokens and ITL weight are filled in when it completes)."""
        self._reserve(1)
        i = self.size
        c = self.columns
        c["start_s"][i] = start_s
        c["duration_s"][i] = duration_s
        c["prefill_tokens"][i] = prefill_tokens
        c["prefill_attention_work"][i] = prefill_attention_work
        c["decode_seqs"][i] = decode_seqs
        c["decode_context_tokens"][i] = decode_context_tokens
        c["num_seqs"][i] = num_seqs
        c["kv_blocks_used"][i] = kv_blocks_used
        c["num_waiting"][i] = num_waiting
        c["num_running"][i] = num_running
        c["output_tokens"][i] = 0
        c["itl_weight"][i] = 0
        self.size = i + 1
        return i

    def append_decode_run(
        self,
        *,
        start_s: np.ndarray,
        duration_s: np.ndarray,
        decode_seqs: int,
        decode_context_tokens: np.ndarray,
        kv_blocks_used: np.ndarray,
        num_waiting: int | np.ndarray,
        itl_weight: int,
    ) -> None:
        """Write ``len(start_s)`` pure-decode steps of a fixed batch at once."""
        k = int(start_s.size)
        self._reserve(k)
        i, j = self.size, self.size + k
        c = self.columns
        c["start_s"][i:j] = start_s
        c["duration_s"][i:j] = duration_s
        c["prefill_tokens"][i:j] = 0
        c["prefill_attention_work"][i:j] = 0.0
        c["decode_seqs"][i:j] = decode_seqs
        c["decode_context_tokens"][i:j] = decode_context_tokens
        c["num_seqs"][i:j] = decode_seqs
        c["kv_blocks_used"][i:j] = kv_blocks_used
        c["num_waiting"][i:j] = num_waiting
        c["num_running"][i:j] = decode_seqs
        c["output_tokens"][i:j] = decode_seqs
        c["itl_weight"][i:j] = itl_weight
        self.size = j

    def finish(self) -> dict[str, np.ndarray]:
        """Trimmed copies of every column."""
        return {name: col[: self.size].copy() for name, col in self.columns.items()}
