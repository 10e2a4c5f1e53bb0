"""Shared-prefix structure of a workload and what a prefix cache saves on it in steady state.

A workload either states its prefix structure — a system prompt of ``S`` tokens shared by a
fraction ``f`` of the requests, spread over ``K`` distinct prompts (``num_prefixes``) — or a
measured ``cache_hit_rate`` (the share of prompt tokens the engine served from its cache, as
vLLM's ``prefix_cache_hits / prefix_cache_queries`` counters report it).

:func:`assign_prefixes` gives every request of a workload its prefix (deterministic, no random
numbers, so common random numbers across probes are kept): request ``k`` shares one when
``floor((k + 1) f) > floor(k f)`` (an even spread of the fraction ``f``), and the ``j``-th sharing
request takes prefix ``j mod K`` (round-robin, the access order of ``K`` system prompts used in
turn). With a measured hit rate ``h`` every request shares its first ``floor(h · P)`` tokens with
every other (one prefix).

:func:`steady_state_hits` is the steady-state tier's estimate: the expected prompt tokens a
request finds cached, ``f · floor(min(S, ISL − 1) / block) · block · p_hit``, where ``p_hit`` is
the probability that its prefix is still in the pool. ``p_hit`` follows Che's approximation of an
LRU cache under the independent reference model (H. Che, Y. Tung, Z. Wang, "Hierarchical Web
caching systems: modeling, design and experimental results", IEEE JSAC 20(7), 2002; C. Fricker,
P. Robert, J. Roberts, "A versatile and accurate approximation for LRU cache performance",
ITC 24, 2012): with ``K`` equally popular prefixes of ``S_b`` blocks, each referenced by a
fraction ``f / K`` of the requests, and ``u`` blocks per request that are never referenced again
(its own suffix and output, which also enter the engines' LRU order), the characteristic time
``T`` (in requests) solves ``K · S_b · (1 − e^{−f T / K}) + u · T = C`` for a cache of ``C``
blocks, and ``p_hit = 1 − e^{−f T / K}``. The cache ``C`` is what the running batch leaves of the
pool. A cyclic (round-robin) access to a working set larger than an LRU cache hits never; the
independent reference model is the kinder, random-order case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PrefixAssignment",
    "PrefixCacheEstimate",
    "PrefixTraffic",
    "assign_prefixes",
    "che_lru_hit_probability",
    "prefix_hit_tokens",
    "steady_state_hits",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixTraffic:
    """Shared-prefix structure of a workload.

    Either ``shared_prefix_tokens`` (``S``, with ``shared_fraction`` ``f`` and ``num_prefixes``
    ``K``) or ``cache_hit_rate`` (a measured share of prompt tokens served from the cache).
    """

    shared_prefix_tokens: int = 0
    shared_fraction: float = 1.0
    num_prefixes: int = 1
    cache_hit_rate: float | None = None

    def __post_init__(self) -> None:
        if self.cache_hit_rate is not None:
            if not (math.isfinite(self.cache_hit_rate) and 0.0 <= self.cache_hit_rate <= 1.0):
                raise ValueError(f"cache_hit_rate must be in [0, 1], got {self.cache_hit_rate}")
            if self.shared_prefix_tokens:
                raise ValueError("give shared_prefix_tokens or cache_hit_rate, not both")
            return
        if isinstance(self.shared_prefix_tokens, bool) or self.shared_prefix_tokens < 1:
            raise ValueError(
                f"shared_prefix_tokens must be >= 1, got {self.shared_prefix_tokens!r}"
            )
        if not (math.isfinite(self.shared_fraction) and 0.0 < self.shared_fraction <= 1.0):
            raise ValueError(f"shared_fraction must be in (0, 1], got {self.shared_fraction}")
        if isinstance(self.num_prefixes, bool) or self.num_prefixes < 1:
            raise ValueError(f"num_prefixes must be >= 1, got {self.num_prefixes!r}")


@dataclass(frozen=True, slots=True)
class PrefixAssignment:
    """Per request: the prefix it shares (``group``, -1 for none) and how many of its leading
    prompt tokens that prefix covers (``shared_tokens``)."""

    group: np.ndarray
    shared_tokens: np.ndarray


def assign_prefixes(traffic: PrefixTraffic, prompt_tokens: np.ndarray) -> PrefixAssignment:
    """The prefix of every request (module docstring): an even spread of the fraction ``f``,
    round-robin over the ``K`` prefixes; a prefix longer than a prompt covers the prompt."""
    prompt = np.asarray(prompt_tokens, dtype=np.int64)
    n = int(prompt.size)
    if traffic.cache_hit_rate is not None:
        shared = np.floor(traffic.cache_hit_rate * prompt).astype(np.int64)
        group = np.where(shared > 0, 0, -1).astype(np.int64)
        return PrefixAssignment(group=group, shared_tokens=np.where(group >= 0, shared, 0))
    k = np.arange(n + 1, dtype=np.float64)
    count = np.floor(k * traffic.shared_fraction + 1e-9).astype(np.int64)
    sharing = count[1:] > count[:-1]
    group = np.where(sharing, (count[1:] - 1) % traffic.num_prefixes, -1).astype(np.int64)
    shared = np.where(sharing, np.minimum(traffic.shared_prefix_tokens, prompt), 0)
    return PrefixAssignment(group=group, shared_tokens=shared.astype(np.int64))


def prefix_hit_tokens(shared_tokens: int, prompt_tokens: int, block_size_tokens: int) -> int:
    """Tokens of a prompt a warm cache serves: whole blocks of the shared prefix, at least the
    last prompt token recomputed (vLLM ``KVCacheManager.get_computed_blocks``:
    ``max_cache_hit_length = request.num_tokens - 1``, hits in whole blocks)."""
    usable = min(shared_tokens, prompt_tokens - 1)
    return max(usable, 0) // block_size_tokens * block_size_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixCacheEstimate:
    """Steady-state prefix-cache figures for one workload point.

    Attributes
    ----------
    hit_tokens_per_request : float
        Expected prompt tokens a request finds in the cache (prefill skipped).
    hit_probability : float
        Probability that a sharing request's prefix is resident (``p_hit``).
    working_set_blocks : int
        ``K · S_b``: the blocks of every distinct prefix.
    cache_blocks : int
        ``C``: pool blocks left beside the running batch.
    pinned_blocks : int
        Blocks held by running requests, a prefix shared by several counted once.
    evictable_blocks : int
        Cached prefix blocks no running request holds (free to evict, kept until needed).
    host_hit_tokens_per_request : float
        Of ``hit_tokens_per_request``, the tokens a host KV tier serves (loaded back, not
        recomputed); 0 without one.
    host_hit_probability : float
        ``p_host``: the probability that a prefix is in the host tier (Che's approximation on
        the host's LRU); 0 without one.
    """

    hit_tokens_per_request: float
    hit_probability: float
    working_set_blocks: int
    cache_blocks: int
    pinned_blocks: int
    evictable_blocks: int
    host_hit_tokens_per_request: float = 0.0
    host_hit_probability: float = 0.0


def che_lru_hit_probability(
    prefixes: int, prefix_blocks: int, fraction: float, unique_blocks: float, cache_blocks: int
) -> float:
    """``1 − e^{−f T / K}`` with ``K S_b (1 − e^{−f T / K}) + u T = C`` (Che's approximation;
    ``K`` prefixes of ``S_b`` blocks, ``u`` never reused blocks per request, ``C`` blocks)."""
    if prefix_blocks == 0:
        return 0.0
    working = prefixes * prefix_blocks
    if unique_blocks <= 0.0 and working <= cache_blocks:
        return 1.0
    if cache_blocks <= 0:
        return 0.0

    def filled(t: float) -> float:
        return working * -math.expm1(-fraction * t / prefixes) + unique_blocks * t

    lo, hi = 0.0, 1.0
    while filled(hi) < cache_blocks:
        hi *= 2.0
        if hi > 1e15:
            return 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if filled(mid) < cache_blocks:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return -math.expm1(-fraction * 0.5 * (lo + hi) / prefixes)


def steady_state_hits(
    traffic: PrefixTraffic,
    *,
    input_tokens: int,
    output_tokens: int,
    block_size_tokens: int,
    pool_blocks: int,
    running_requests: float,
    host_blocks: int = 0,
) -> PrefixCacheEstimate:
    """Expected cache hits of one request of a steady workload (module docstring).

    ``running_requests`` requests are resident, each holding on average
    ``ceil((ISL + OSL / 2) / block)`` blocks (halfway through its output); the sharing ones
    among them hold their prefix once per distinct prefix in use,
    ``D = K (1 − (1 − f / K)^n)`` prefixes for ``n`` running requests. A measured hit rate
    ``h`` gives ``h · ISL`` tokens (floored to whole blocks, at most ``ISL − 1``) and no LRU
    estimate.

    A host tier of ``host_blocks`` (every computed block written through to it, so it holds
    the device's blocks as well) is an LRU on the same reference stream: its characteristic time
    solves Che's equation with the host's capacity and every request's full blocks,
    ``u_h = ⌊(ISL + OSL)/block⌋ − f·S_b``, giving ``p_host``. A prefix is found when it is
    pinned, in the GPU's LRU part or in the host's (the events nest: referenced within the
    shorter or the longer characteristic time), ``p = D/K + (1 − D/K)·max(p_LRU, p_host)``;
    the host serves the share ``(1 − D/K)·max(p_host − p_LRU, 0)``.
    """
    bs = block_size_tokens
    per_request = -(-(input_tokens + output_tokens // 2) // bs)
    n = max(running_requests, 0.0)
    if traffic.cache_hit_rate is not None:
        shared = math.floor(traffic.cache_hit_rate * input_tokens)
        hit = prefix_hit_tokens(shared, input_tokens, bs)
        pinned = min(pool_blocks, math.ceil(n * per_request - max(n - 1.0, 0.0) * hit / bs))
        return PrefixCacheEstimate(
            hit_tokens_per_request=float(hit),
            hit_probability=1.0 if hit else 0.0,
            working_set_blocks=hit // bs,
            cache_blocks=pool_blocks - pinned,
            pinned_blocks=pinned,
            evictable_blocks=0 if n >= 1.0 else min(hit // bs, pool_blocks - pinned),
        )
    k, f = traffic.num_prefixes, traffic.shared_fraction
    hit_blocks = prefix_hit_tokens(traffic.shared_prefix_tokens, input_tokens, bs) // bs
    prefix_blocks = min(traffic.shared_prefix_tokens, input_tokens) // bs
    in_use = k * (1.0 - (1.0 - f / k) ** n) if n > 0 else 0.0
    pinned_f = n * per_request - n * f * prefix_blocks + in_use * prefix_blocks
    pinned = min(pool_blocks, math.ceil(pinned_f - 1e-9))
    cache = pool_blocks - pinned
    unique = (-(-(input_tokens + output_tokens) // bs)) - f * prefix_blocks
    # A prefix some running request holds is pinned, so hit; the others are in the LRU order.
    p_lru = che_lru_hit_probability(k, prefix_blocks, f, unique, cache)
    p_host = 0.0
    if host_blocks > 0:
        stored = (input_tokens + output_tokens) // bs - f * prefix_blocks
        p_host = che_lru_hit_probability(k, prefix_blocks, f, stored, host_blocks)
    idle_share = 1.0 - in_use / k
    host_share = idle_share * max(p_host - p_lru, 0.0)
    p_hit = in_use / k + idle_share * p_lru + host_share
    idle_prefixes = max(k - in_use, 0.0)
    evictable = min(cache, math.floor(idle_prefixes * prefix_blocks * p_lru + 1e-9))
    return PrefixCacheEstimate(
        hit_tokens_per_request=f * hit_blocks * bs * p_hit,
        hit_probability=p_hit,
        working_set_blocks=k * prefix_blocks,
        cache_blocks=cache,
        pinned_blocks=pinned,
        evictable_blocks=evictable,
        host_hit_tokens_per_request=f * hit_blocks * bs * host_share,
        host_hit_probability=p_host,
    )
