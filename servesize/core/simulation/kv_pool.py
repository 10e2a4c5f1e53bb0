"""A replica's KV block pool: allocation, freeing and preemption victims (internal).

A request holding ``c`` tokens in the KV cache holds ``ceil(c / block_size)`` blocks (vLLM v1
``KVCacheManager.allocate_slots``); blocks are allocated when a step schedules tokens and freed
when the request leaves, times out or is preempted (recompute: all its blocks at once). The pool
is the only writer of the free count and of the request table's ``kv_blocks`` column.

Under TensorRT-LLM's ``GUARANTEED_NO_EVICT`` (``reserves_whole``) a request takes the blocks of
its whole sequence at admission: ``NoEvictScheduledBlocksManager`` subtracts every running
request's remaining blocks to completion from the free count before it admits one, which is the
same admission test as holding them; decodes then never allocate.

With a prefix cache (:class:`~.prefix_cache.PrefixCache`, ``prefix``) a request's ``held`` count
includes the cached blocks it shares; every release goes through the cache, which says how many
blocks become free (a block others still hold does not), and the free count keeps cached blocks
no request holds (vLLM's free queue: free, evictable). Without one every path is as before.
"""

from __future__ import annotations

import numpy as np

from servesize.core.simulation.host_cache import HostCache
from servesize.core.simulation.prefix_cache import PrefixCache

_sum = np.add.reduce


class KVBlockPool:
    """``total_blocks`` blocks of ``block_size_tokens`` tokens, ``watermark_blocks`` of which
    must stay free after an admission.

    ``held`` is the request table's ``kv_blocks`` array (shared by the replicas of a
    simulation; a request is held by one replica at a time).
    """

    __slots__ = (
        "block_size_tokens",
        "free_blocks",
        "held",
        "host",
        "prefix",
        "reserves_whole",
        "total_blocks",
        "watermark_blocks",
    )

    def __init__(
        self,
        *,
        block_size_tokens: int,
        total_blocks: int,
        watermark_blocks: int,
        held: np.ndarray,
        reserves_whole: bool = False,
    ) -> None:
        self.block_size_tokens = block_size_tokens
        self.reserves_whole = reserves_whole
        self.total_blocks = total_blocks
        self.watermark_blocks = watermark_blocks
        self.free_blocks = total_blocks
        self.held = held
        self.prefix: PrefixCache | None = None
        self.host: HostCache | None = None
        """The host tier every release is stored to (:mod:`.host_cache`)."""

    def blocks_for(self, tokens: int) -> int:
        """``ceil(tokens / block_size)``."""
        return -(-tokens // self.block_size_tokens)

    def never_fits(self, tokens: np.ndarray) -> np.ndarray:
        """Whether a sequence of ``tokens`` could never be admitted, even to an empty pool."""
        bs = self.block_size_tokens
        return np.asarray((tokens + (bs - 1)) // bs + self.watermark_blocks > self.total_blocks)

    def admits(self, blocks: int) -> bool:
        """Whether ``blocks`` can be taken at admission and leave the watermark free."""
        return blocks + self.watermark_blocks <= self.free_blocks

    def admit(self, r: int, blocks: int, gate_blocks: int) -> bool:
        """Admit request ``r`` with ``blocks`` more blocks if ``gate_blocks`` can be taken and
        leave the watermark free; returns whether it was admitted."""
        if gate_blocks + self.watermark_blocks > self.free_blocks:
            return False
        self.free_blocks -= blocks
        self.held[r] += blocks
        return True

    def admit_with_hit(
        self, r: int, blocks: int, gate_blocks: int, hit_blocks: int, touched: int
    ) -> bool:
        """:meth:`admit` for a request whose first ``hit_blocks`` blocks are cached, ``touched``
        of them held by no one (they leave the free count: ``allocate_slots`` counts
        ``num_evictable_computed_blocks`` against the free blocks)."""
        if gate_blocks + touched + self.watermark_blocks > self.free_blocks:
            return False
        self.free_blocks -= blocks + touched
        self.held[r] += blocks + hit_blocks
        assert self.prefix is not None
        self.prefix.acquire(r, hit_blocks, touched)
        return True

    def growth(self, r: int, tokens: int) -> int:
        """Blocks request ``r`` must add to hold ``tokens`` tokens (0 if it holds enough)."""
        need = -(-tokens // self.block_size_tokens) - int(self.held[r])
        return need if need > 0 else 0

    def allocate(self, r: int, blocks: int) -> None:
        """Give request ``r`` ``blocks`` more blocks (the caller has checked they are free)."""
        self.free_blocks -= blocks
        self.held[r] += blocks

    def reserve(self, r: int, blocks: int) -> None:
        """Reserve ``blocks`` for request ``r``'s incoming KV transfer (it holds none yet)."""
        self.free_blocks -= blocks
        self.held[r] = blocks

    def grow_to(self, ids: np.ndarray, tokens: np.ndarray) -> bool:
        """Grow every request ``ids[i]`` to hold ``tokens[i]`` tokens if all the new blocks are
        free (then returns True); else change nothing and return False."""
        bs = self.block_size_tokens
        held = self.held
        need = (tokens + (bs - 1)) // bs - held[ids]
        np.maximum(need, 0, out=need)
        total = int(_sum(need))
        if total > self.free_blocks:
            return False
        self.free_blocks -= total
        held[ids] += need
        return True

    def allocate_or_preempt(
        self, ids: list[int], tokens: list[int], computed: np.ndarray
    ) -> tuple[int, list[int], bool]:
        """Allocate for ``computed[ids[i]] + tokens[i]`` tokens in order; on shortage free the
        blocks of the last request of ``ids`` not yet preempted (vLLM ``running.pop()``, Sarathi
        ``running.pop(-1)``) until the allocation fits or the request preempted itself.

        Returns how many of ``ids`` (a prefix) got their blocks, the preempted requests in
        preemption order (their blocks are freed here; the caller requeues them), and whether
        the last request considered preempted itself.
        """
        held, bs = self.held, self.block_size_tokens
        keep = len(ids)
        free = self.free_blocks
        victims: list[int] = []
        self_preempted = False
        i = 0
        while i < keep:
            r = ids[i]
            ni = tokens[i]
            need = 0 if ni == 0 else max(-(-(int(computed[r]) + ni) // bs) - int(held[r]), 0)
            while need > free:
                keep -= 1
                v = ids[keep]
                if self.host is not None:
                    self.host.store(v)
                if self.prefix is None:
                    free += int(held[v])
                else:
                    free += self.prefix.release(v, int(held[v]), free)
                held[v] = 0
                victims.append(v)
                if v == r:
                    self_preempted = True
                    break
            if self_preempted:
                break
            free -= need
            held[r] += need
            i += 1
        self.free_blocks = free
        return i, victims, self_preempted

    def release(self, r: int) -> None:
        """Free every block request ``r`` holds."""
        if self.host is not None:
            self.host.store(r)
        if self.prefix is None:
            self.free_blocks += int(self.held[r])
        else:
            self.free_blocks += self.prefix.release(r, int(self.held[r]), self.free_blocks)
        self.held[r] = 0

    def release_many(self, ids: np.ndarray) -> None:
        """Free every block the requests ``ids`` hold."""
        if self.prefix is not None or self.host is not None:
            for r in ids.tolist():
                self.release(r)
            return
        self.free_blocks += int(_sum(self.held[ids]))
        self.held[ids] = 0

    def take_run_crossings(self, free_at_start: int, crossings: int) -> None:
        """A decode run has taken ``crossings`` blocks from the ``free_at_start`` it began with
        (the requests' own counts are written by :meth:`hold_after_run`). A pool that reserves
        whole sequences at admission takes none."""
        if self.reserves_whole:
            return
        self.free_blocks = free_at_start - crossings

    def hold_after_run(self, ids: np.ndarray, computed: np.ndarray) -> None:
        """After a decode run: request ``ids[i]`` holds ``computed[i]`` tokens (unchanged when
        the pool reserved its whole sequence at admission)."""
        if self.prefix is not None:  # the run's steps filled these blocks (``cache_blocks``)
            self.prefix.cache_scheduled(ids, computed)
        if self.reserves_whole:
            return
        bs = self.block_size_tokens
        self.held[ids] = (computed + (bs - 1)) // bs
