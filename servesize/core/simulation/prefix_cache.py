"""A replica's block-granular prefix cache (internal; used by :mod:`.kv_pool`).

What it mirrors (vLLM v1, ``vllm/v1/core/kv_cache_manager.py`` and ``block_pool.py``, v0.11.0):

* Blocks are named by the hash of their tokens and of every token before them, so only *whole*
  blocks are shared, and a request's hit is the longest run of cached blocks from its first
  (``KVCacheManager.get_computed_blocks`` → ``find_longest_cache_hit``). At least the last prompt
  token is recomputed (``max_cache_hit_length = request.num_tokens - 1``).
* A block is cached as soon as a step is scheduled that fills it
  (``KVCacheManager.allocate_slots`` → ``cache_blocks`` for ``num_computed + num_new`` tokens),
  so the next step's admissions can already hit it.
* A cached block whose reference count falls to 0 stays in the pool's free queue, still cached
  and counted as free (``BlockPool.free_blocks``). A hit on it takes it out of the queue
  (``BlockPool.touch``); admission counts those blocks against the free ones
  (``allocate_slots``: ``num_evictable_computed_blocks``). A request frees its blocks last block
  first (``KVCacheManager.free``: ``reversed(blocks)``), so a prefix loses its tail first.
* Allocation pops from the head of the free queue (``FreeKVCacheBlockQueue.popleft_n``); a
  popped block that is cached loses its hash (``BlockPool._maybe_evict_cached_block``). The
  queue mixes never-cached and cached blocks in the order they were freed, so under vLLM the
  least recently freed block goes first, cached or not (``eviction="free_queue_lru"``,
  TensorRT-LLM's block reuse alike: ``kv_cache_manager`` evicts from its free-block LRU).
* SGLang (``python/sglang/srt/mem_cache/radix_cache.py: RadixCache.evict``) evicts cached
  leaves, least recently used first, only when the free token slots run out
  (``eviction="radix_lru"``): blocks that were never cached are used first. The radix cache works
  on pages (``page_size``), here the replica's block size.

Modelled as counts. The pool's ``free_blocks`` keeps vLLM's meaning (free + evictable cached).
The free queue is a deque of runs of uncached blocks and of runs of cached blocks of one prefix;
allocations are not seen one by one but read off ``free_blocks`` whenever the cache is consulted
(every allocation pops from the head, so popping them late is exact as long as every release
and every hit passes through here first, which :class:`~.kv_pool.KVBlockPool` guarantees).

Runs suffice because a prefix's cached blocks are always blocks ``0 … len − 1``: a request holds
blocks ``0 … k − 1`` of its prefix, so a block's holders include those of every later block, a
block is freed no earlier than the blocks after it and, freed at once, after them (last block
first). The blocks no one holds, ``m … len − 1`` with ``m`` the most blocks a running request of
that prefix holds, sit in the queue in runs, the highest nearest the head: a hit takes runs from
the low end, an eviction from the high end. A request that computes a prefix block someone else
cached meanwhile keeps its own copy privately (vLLM would cache the duplicate too); its later
prefix blocks are then not cached by it.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

import numpy as np

PrefixEviction = Literal["free_queue_lru", "radix_lru"]


class _Run:
    """Blocks ``lo … hi − 1`` of prefix ``group`` in the free queue (cached, held by no one)."""

    __slots__ = ("alive", "group", "hi", "lo")

    def __init__(self, group: int, lo: int, hi: int) -> None:
        self.group = group
        self.lo = lo
        self.hi = hi
        self.alive = True


class PrefixCache:
    """Cached prefix blocks of one replica: per prefix, how many leading blocks are cached, how
    many each running request holds, and the runs of them in the free queue.

    ``group[r]`` is request ``r``'s prefix (-1: none) and ``shared_tokens[r]`` the prompt tokens
    it covers; ``num_tokens`` is the request table's column (the hit cap ``num_tokens − 1``).
    """

    __slots__ = (
        "_anon_head",
        "_last_free",
        "_queue",
        "block_size",
        "evictions",
        "free_first",
        "group",
        "hit_tokens",
        "holders",
        "length",
        "num_tokens",
        "refs",
        "runs",
        "shared_tokens",
        "stopped",
    )

    def __init__(
        self,
        *,
        group: np.ndarray,
        shared_tokens: np.ndarray,
        num_tokens: np.ndarray,
        block_size_tokens: int,
        total_blocks: int,
        eviction: PrefixEviction,
    ) -> None:
        self.group = group
        self.shared_tokens = shared_tokens
        self.num_tokens = num_tokens
        self.block_size = block_size_tokens
        self.free_first = eviction == "radix_lru"
        self.length: dict[int, int] = {}
        """Cached leading blocks of each prefix."""
        self.holders: dict[int, dict[int, int]] = {}
        """Per prefix: running requests by the number of its blocks they hold."""
        self.runs: dict[int, deque[_Run]] = {}
        """Per prefix: its runs in the free queue, lowest blocks first."""
        self.refs = np.zeros(group.size, dtype=np.int64)
        """Leading blocks of each request that are cached blocks it holds."""
        self.stopped = np.zeros(group.size, dtype=bool)
        self.hit_tokens = np.zeros(group.size, dtype=np.int64)
        """Prompt tokens each request found cached, summed over its admissions."""
        self.evictions = 0
        self._anon_head = total_blocks
        self._queue: deque[int | _Run] = deque()
        self._last_free = total_blocks

    # ------------------------------------------------------------------ free queue

    def sync(self, free_now: int) -> None:
        """Pop the blocks allocated since the last call from the head of the free queue,
        evicting the cached ones among them (``BlockPool.get_new_blocks``)."""
        pop = self._last_free - free_now
        self._last_free = free_now
        if pop <= 0:
            return
        take = min(pop, self._anon_head)
        self._anon_head -= take
        pop -= take
        q = self._queue
        while pop > 0:
            item = q[0]
            if isinstance(item, int):
                if item > pop:
                    q[0] = item - pop
                    return
                q.popleft()
                pop -= item
                continue
            if not item.alive:
                q.popleft()
                continue
            size = item.hi - item.lo
            take = size if size < pop else pop
            item.hi -= take
            self.length[item.group] = item.hi
            self.evictions += take
            pop -= take
            if item.hi == item.lo:
                item.alive = False
                q.popleft()
                self.runs[item.group].pop()

    def _free_anonymous(self, blocks: int) -> None:
        if blocks <= 0:
            return
        if self.free_first:
            self._anon_head += blocks
            return
        q = self._queue
        if q and isinstance(q[-1], int):
            q[-1] += blocks
        else:
            q.append(blocks)

    def _held_most(self, g: int) -> int:
        """Most blocks of prefix ``g`` a running request holds (0 if none)."""
        h = self.holders.get(g)
        return max(h) if h else 0

    def _hold(self, g: int, before: int, after: int) -> None:
        h = self.holders.setdefault(g, {})
        if before:
            n = h[before] - 1
            if n:
                h[before] = n
            else:
                del h[before]
        if after:
            h[after] = h.get(after, 0) + 1

    # ------------------------------------------------------------------ requests

    def lookup(self, r: int, free_now: int) -> tuple[int, int]:
        """Request ``r``'s hit in whole blocks, and how many of them no one holds (they leave
        the free queue if it is admitted)."""
        self.sync(free_now)
        g = int(self.group[r])
        if g < 0:
            return 0, 0
        cap = min(int(self.shared_tokens[r]), int(self.num_tokens[r]) - 1) // self.block_size
        hit = min(self.length.get(g, 0), cap)
        return hit, max(hit - self._held_most(g), 0)

    def acquire(self, r: int, hit: int, touched: int) -> None:
        """Request ``r`` was admitted with its first ``hit`` blocks from the cache
        (``BlockPool.touch``: the ``touched`` ones no one held leave the free queue)."""
        g = int(self.group[r])
        if touched:
            runs = self.runs[g]
            while runs and runs[0].lo < hit:
                run = runs[0]
                if run.hi <= hit:
                    run.alive = False
                    runs.popleft()
                else:
                    run.lo = hit
        self._hold(g, 0, hit)
        self.refs[r] = hit
        self.hit_tokens[r] += hit * self.block_size
        self._last_free -= touched

    def cache_scheduled(self, ids: np.ndarray, computed_after: np.ndarray) -> None:
        """Cache the prefix blocks the step being scheduled fills (``cache_blocks``)."""
        g_ids = self.group[ids]
        bs = self.block_size
        full = np.minimum(self.shared_tokens[ids], computed_after) // bs
        todo = (g_ids >= 0) & (full > self.refs[ids]) & ~self.stopped[ids]
        if not np.count_nonzero(todo):
            return
        length = self.length
        for r, g, upto in zip(
            ids[todo].tolist(), g_ids[todo].tolist(), full[todo].tolist(), strict=True
        ):
            i = int(self.refs[r])
            if length.get(g, 0) > i:
                self.stopped[r] = True
                continue
            length[g] = upto
            self._hold(g, i, upto)
            self.refs[r] = upto

    def release(self, r: int, held: int, free_now: int) -> int:
        """Request ``r`` gives back its ``held`` blocks; returns how many become free (its
        private ones and the cached ones no one else holds, which stay cached)."""
        self.sync(free_now)
        k = int(self.refs[r])
        private = held - k
        self._free_anonymous(private)
        freed = private
        if k:
            g = int(self.group[r])
            self._hold(g, k, 0)
            rest = self._held_most(g)
            if k > rest:
                run = _Run(g, rest, k)
                self._queue.append(run)
                self.runs.setdefault(g, deque()).appendleft(run)
                freed += k - rest
        self.refs[r] = 0
        self.stopped[r] = False
        self._last_free = free_now + freed
        return freed

    # ------------------------------------------------------------------ reporting

    def cached_blocks(self) -> tuple[int, int]:
        """Cached blocks held by running requests (pinned) and held by none (evictable)."""
        pinned = sum(self._held_most(g) for g in self.length)
        return pinned, sum(self.length.values()) - pinned
