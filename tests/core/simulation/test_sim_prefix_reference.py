"""The prefix cache against a block-by-block reference model of the engines' free queues.

The reference keeps every physical block: its hash ``(prefix, index)`` or none, its reference
count, and the free queue as an explicit list of block ids (vLLM ``FreeKVCacheBlockQueue``:
allocation pops the head, a popped cached block loses its hash, a request frees its blocks last
first onto the tail; SGLang: uncached free blocks are used before any cached one is evicted,
cached ones least recently freed first). Random admissions, caching and releases drive both;
every hit must agree.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from servesize.core.simulation.prefix_cache import PrefixCache, PrefixEviction


class _Reference:
    def __init__(self, blocks: int, radix: bool) -> None:
        self.radix = radix
        self.hash: list[tuple[int, int] | None] = [None] * blocks
        self.ref = [0] * blocks
        self.queue: deque[int] = deque(range(blocks))  # free blocks, head first
        self.table: dict[tuple[int, int], int] = {}
        self.slots: dict[int, list[int]] = {}  # request -> its block table
        self.cached_upto: dict[int, int] = {}
        self.stopped: set[int] = set()

    def free_count(self) -> int:
        return len(self.queue)

    def lookup(self, g: int, cap: int) -> tuple[int, int]:
        hit = 0
        while hit < cap and (g, hit) in self.table:
            hit += 1
        touched = sum(1 for i in range(hit) if self.ref[self.table[(g, i)]] == 0)
        return hit, touched

    def _pop(self) -> int:
        if self.radix:
            for b in self.queue:  # an uncached free block first
                if self.hash[b] is None:
                    self.queue.remove(b)
                    return b
        b = self.queue.popleft()
        key = self.hash[b]
        if key is not None:
            del self.table[key]
            self.hash[b] = None
        return b

    def admit(self, r: int, g: int, hit: int, private: int) -> None:
        table = []
        for i in range(hit):
            b = self.table[(g, i)]
            if self.ref[b] == 0:
                self.queue.remove(b)
            self.ref[b] += 1
            table.append(b)
        for _ in range(private):
            b = self._pop()
            self.ref[b] = 1
            table.append(b)
        self.slots[r] = table
        self.cached_upto[r] = hit

    def cache(self, r: int, g: int, upto: int) -> None:
        if r in self.stopped:
            return
        i = self.cached_upto[r]
        while i < upto:
            if (g, i) in self.table:
                self.stopped.add(r)
                break
            b = self.slots[r][i]
            self.hash[b] = (g, i)
            self.table[(g, i)] = b
            i += 1
        self.cached_upto[r] = i

    def release(self, r: int) -> None:
        for b in reversed(self.slots.pop(r)):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.queue.append(b)
        self.stopped.discard(r)


@pytest.mark.parametrize("eviction", ["free_queue_lru", "radix_lru"])
@pytest.mark.parametrize("seed", range(6))
def test_random_traffic_matches_the_block_reference(eviction: PrefixEviction, seed: int) -> None:
    rng = np.random.default_rng(seed)
    blocks, n, groups = 40, 400, 4
    group = rng.integers(-1, groups, size=n)
    prefix_blocks = rng.integers(1, 9, size=n)
    shared = (prefix_blocks * 4).astype(np.int64)
    num_tokens = (shared + rng.integers(1, 12, size=n)).astype(np.int64)
    cache = PrefixCache(
        group=group.astype(np.int64),
        shared_tokens=shared,
        num_tokens=num_tokens,
        block_size_tokens=4,
        total_blocks=blocks,
        eviction=eviction,
    )
    ref = _Reference(blocks, radix=eviction == "radix_lru")
    free = blocks
    held: dict[int, int] = {}
    hits_model, hits_ref = [], []
    for r in range(n):
        # Release a random share of the running requests, in random order.
        for q in [q for q in list(held) if rng.random() < 0.4]:
            free += cache.release(q, held.pop(q), free)
            ref.release(q)
            assert free == ref.free_count()
        g = int(group[r])
        total_blocks = -(-int(num_tokens[r]) // 4)
        hit, touched = cache.lookup(r, free)
        cap = min(int(shared[r]), int(num_tokens[r]) - 1) // 4 if g >= 0 else 0
        expected = ref.lookup(g, cap) if g >= 0 else (0, 0)
        hits_model.append((hit, touched))
        hits_ref.append(expected)
        need = total_blocks - hit
        if need + touched > free:
            continue
        free -= need + touched
        if hit:
            cache.acquire(r, hit, touched)
        ref.admit(r, g, hit, need)
        held[r] = total_blocks
        if g >= 0:
            # Its whole prompt is scheduled: the full prefix blocks are cached.
            cache.cache_scheduled(np.array([r]), np.array([int(num_tokens[r])]))
            ref.cache(r, g, min(int(shared[r]), int(num_tokens[r])) // 4)
        assert free == ref.free_count()
    assert hits_model == hits_ref
    assert sum(h for h, _ in hits_ref) > 0  # the traffic does hit
    assert cache.evictions > 0  # and the pool does evict
