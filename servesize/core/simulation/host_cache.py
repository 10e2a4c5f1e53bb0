"""A replica's host-memory KV tier (CPU offload), an LRU of blocks (internal; used by
:mod:`.kv_pool` and the admission of :mod:`.policies.base`).

What it mirrors:

* vLLM's OffloadingConnector (``vllm/distributed/kv_transfer/kv_connector/v1/
  offloading_connector.py``: ``OffloadingConnectorScheduler.get_num_new_matched_tokens``,
  ``_get_reqs_to_store``; ``vllm/v1/kv_offload/cpu/manager.py`` / ``lru_manager.py``:
  ``LRUOffloadingManager.lookup``, ``touch``, ``prepare_store``). Every full block a request
  computes is stored to the CPU (write-through, asynchronous, off the request's path); a
  request being admitted asks for the longest run of blocks after its GPU prefix hit that the
  CPU holds (``lookup``), allocates GPU blocks for them and loads them before it is scheduled
  (``WAITING_FOR_REMOTE_KVS``). The CPU pool is LRU; ``touch`` walks a request's blocks last to
  first, so a run's first block is its most recent and eviction takes a run from its high end.
  From 0.14.0 a preempted request loads its own blocks back instead of recomputing them
  (vLLM PR #29870, vLLM blog 2026-01-08).
* SGLang's hierarchical cache (``python/sglang/srt/mem_cache/hiradix_cache.py: HiRadixCache``,
  ``hicache_controller.py: HiCacheController``): with the ``write_through`` policy every radix
  node is backed up to the host pool (``write_backup``); GPU eviction then only drops the device
  copy (``evict`` → ``_evict_backuped``); a match that ends in host-only nodes is loaded back
  (``init_load_back`` → ``HiCacheController.load``) layer by layer under the forward pass
  (``LayerDoneCounter``), so the step lasts ``max(compute, load)``. The host pool evicts its
  least recently used leaves (``evict_host``). A retracted request is recomputed.

Modelled as counts, per run of blocks: a prefix ``g`` (its blocks ``0 … len − 1``, key ``g``)
and each request's own blocks after its prefix (key ``−(r + 1)``). A prefill chunk's full
blocks go to the host tier when its step is scheduled (write-through; the copy itself is
asynchronous and not charged), and a request's remaining ones (its decoded tokens) when it
releases them (finish or preemption). A hit loads ``n`` blocks in ``n · block_load_s`` (one
block's per-GPU bytes over the host link, each TP rank on its own link), added to the step that
schedules the request, or overlapped with it (SGLang).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


class HostCache:
    """The host tier of one replica: ``capacity_blocks`` blocks of ``block_size_tokens``."""

    __slots__ = (
        "block_load_s",
        "block_size",
        "capacity",
        "computed",
        "group",
        "hit_tokens",
        "load_s",
        "loaded_blocks",
        "num_tokens",
        "overlap",
        "pending_load_s",
        "reload_own",
        "runs",
        "shared_tokens",
        "used",
    )

    def __init__(
        self,
        *,
        capacity_blocks: int,
        block_size_tokens: int,
        block_load_s: float,
        overlap: bool,
        reload_own: bool,
        computed: np.ndarray,
        num_tokens: np.ndarray,
        group: np.ndarray | None,
        shared_tokens: np.ndarray | None,
    ) -> None:
        self.capacity = capacity_blocks
        self.block_size = block_size_tokens
        self.block_load_s = block_load_s
        self.overlap = overlap
        self.reload_own = reload_own
        self.computed = computed
        self.num_tokens = num_tokens
        self.group = group
        self.shared_tokens = shared_tokens
        self.runs: OrderedDict[int, int] = OrderedDict()
        """Blocks held per run, least recently used first."""
        self.used = 0
        self.pending_load_s = 0.0
        """Load time of the admissions since the last step was planned."""
        self.load_s = 0.0
        self.loaded_blocks = 0
        self.hit_tokens = np.zeros(num_tokens.size, dtype=np.int64)
        """Prompt tokens each request loaded from the host tier, summed over its admissions."""

    def _prefix(self, r: int) -> tuple[int, int]:
        """Request ``r``'s prefix and its whole blocks (``-1, 0`` without one)."""
        if self.group is None or self.shared_tokens is None:
            return -1, 0
        g = int(self.group[r])
        return (g, int(self.shared_tokens[r]) // self.block_size) if g >= 0 else (-1, 0)

    def lookup(self, r: int, gpu_hit_blocks: int) -> int:
        """Blocks after the GPU hit that the host tier holds for request ``r`` (its prefix's
        run, then, once the whole prefix is there, its own blocks), at most
        ``(num_tokens − 1) // block`` in all (the last prompt token is recomputed)."""
        cap = (int(self.num_tokens[r]) - 1) // self.block_size
        g, whole = self._prefix(r)
        reach = min(self.runs.get(g, 0), whole) if g >= 0 else 0
        reach = max(reach, gpu_hit_blocks)
        if self.reload_own and reach >= whole:
            reach = max(reach, whole + self.runs.get(-(r + 1), 0))
        return max(min(reach, cap) - gpu_hit_blocks, 0)

    def acquire(self, r: int, blocks: int) -> None:
        """Request ``r`` was admitted loading ``blocks`` blocks (``touch`` its runs)."""
        g, _ = self._prefix(r)
        for key in (-(r + 1), g):
            if key != -1 and key in self.runs:
                self.runs.move_to_end(key)
        load = blocks * self.block_load_s
        self.pending_load_s += load
        self.load_s += load
        self.loaded_blocks += blocks
        self.hit_tokens[r] += blocks * self.block_size

    def store(self, r: int) -> None:
        """Request ``r`` releases its KV: its full blocks are (already) on the host."""
        self.store_upto(r, int(self.computed[r]))

    def store_scheduled(self, ids: np.ndarray, computed_after: np.ndarray) -> None:
        """The prefill chunks of a step being scheduled: their full blocks are written through
        (``_get_reqs_to_store`` after each step), so a later request finds them even while
        these requests still run."""
        for r, upto in zip(ids.tolist(), computed_after.tolist(), strict=True):
            self.store_upto(r, upto)

    def store_upto(self, r: int, computed: int) -> None:
        """Request ``r``'s first ``computed`` tokens are on the host (their full blocks): the
        run of its prefix becomes the most recent, then the LRU runs are cut to capacity."""
        full = computed // self.block_size
        if full <= 0:
            return
        g, whole = self._prefix(r)
        own = full - whole if g >= 0 else full
        if own > 0:
            self._put(-(r + 1), own)
        if g >= 0:
            self._put(g, min(whole, full))
        runs = self.runs
        while self.used > self.capacity:
            key, size = next(iter(runs.items()))
            cut = min(size, self.used - self.capacity)
            self.used -= cut
            if cut == size:
                del runs[key]
            else:
                runs[key] = size - cut

    def _put(self, key: int, blocks: int) -> None:
        before = self.runs.get(key, 0)
        if blocks > before:
            self.runs[key] = blocks
            self.used += blocks - before
        self.runs.move_to_end(key)

    def take_pending(self) -> float:
        """The load time to add to the step being planned, and reset it."""
        load, self.pending_load_s = self.pending_load_s, 0.0
        return load
