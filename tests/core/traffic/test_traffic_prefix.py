"""Shared-prefix traffic: the assignment of prefixes, the hit of a warm cache, and the
steady-state estimate (Che's approximation of LRU) checked against figures worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servesize.core.traffic import (
    PrefixTraffic,
    assign_prefixes,
    che_lru_hit_probability,
    prefix_hit_tokens,
    steady_state_hits,
)


def test_even_spread_and_round_robin() -> None:
    """f = 1/2 over 8 requests: floor(k/2) = 0,0,1,1,2,2,3,3,4 rises after k = 1, 3, 5, 7, which
    share; the j-th sharer takes prefix j mod 2."""
    a = assign_prefixes(
        PrefixTraffic(shared_prefix_tokens=100, shared_fraction=0.5, num_prefixes=2),
        np.array([300] * 7 + [60]),
    )
    assert a.group.tolist() == [-1, 0, -1, 1, -1, 0, -1, 1]
    # The last prompt (60 tokens) is shorter than the prefix: the prefix covers it.
    assert a.shared_tokens.tolist() == [0, 100, 0, 100, 0, 100, 0, 60]


def test_every_request_shares_at_fraction_one() -> None:
    a = assign_prefixes(PrefixTraffic(shared_prefix_tokens=64, num_prefixes=3), np.full(6, 80))
    assert a.group.tolist() == [0, 1, 2, 0, 1, 2]
    assert a.shared_tokens.tolist() == [64] * 6


def test_measured_hit_rate_shares_the_head_of_every_prompt() -> None:
    a = assign_prefixes(PrefixTraffic(cache_hit_rate=0.25), np.array([100, 7, 3]))
    # floor(0.25 · 100) = 25, floor(1.75) = 1, floor(0.75) = 0 (nothing shared).
    assert a.shared_tokens.tolist() == [25, 1, 0]
    assert a.group.tolist() == [0, 0, -1]


@pytest.mark.parametrize(
    ("shared", "prompt", "block", "hit"),
    [
        (100, 100, 16, 96),
        (96, 96, 16, 80),
        (2048, 3000, 16, 2048),
        (2047, 3000, 16, 2032),
        (15, 100, 16, 0),
        (500, 1000, 16, 496),
    ],
)
def test_warm_hit_is_whole_blocks_below_the_last_token(
    shared: int, prompt: int, block: int, hit: int
) -> None:
    """``floor(min(S, P − 1) / b) · b``: 99 → 96, 95 → 80, 2048 → 2048, 2047 → 127 blocks."""
    assert prefix_hit_tokens(shared, prompt, block) == hit


def test_che_without_one_timers_is_the_resident_share() -> None:
    """No never-reused blocks (u = 0), K equally popular prefixes of S_b blocks: K S_b (1 −
    e^{−T/K}) = C gives p = C / (K S_b) — 50 of 100 blocks fit, half the prefixes hit."""
    assert che_lru_hit_probability(10, 10, 1.0, 0.0, 50) == pytest.approx(0.5, rel=1e-9)
    assert che_lru_hit_probability(10, 10, 1.0, 0.0, 100) == 1.0


def test_che_with_one_timers_solves_the_characteristic_time() -> None:
    """K = 1, S_b = 10, u = 10 / ln 2, C = 15: T = ln 2 solves 10 (1 − e^{−T}) + u T = 5 + 10,
    so p = 1 − e^{−ln 2} = 1/2."""
    p = che_lru_hit_probability(1, 10, 1.0, 10.0 / math.log(2.0), 15)
    assert p == pytest.approx(0.5, rel=1e-9)


def test_working_set_that_fits_hits_every_whole_block() -> None:
    """One 2048-token system prompt on every request, ISL 3000, OSL 200, 16-token blocks, a
    10,000-block pool, 10 running: a running request always holds the prefix (D = 1), so
    p = 1 and the hit is floor(2048/16)·16 = 2048 tokens. Blocks per running request
    ceil(3100/16) = 194; pinned 10·194 − 10·128 + 128 = 788 (the prefix held once)."""
    e = steady_state_hits(
        PrefixTraffic(shared_prefix_tokens=2048),
        input_tokens=3000,
        output_tokens=200,
        block_size_tokens=16,
        pool_blocks=10_000,
        running_requests=10,
    )
    assert e.hit_probability == 1.0
    assert e.hit_tokens_per_request == 2048.0
    assert e.working_set_blocks == 128
    assert e.pinned_blocks == 788
    assert e.cache_blocks == 10_000 - 788
    assert e.evictable_blocks == 0


def test_working_set_larger_than_the_pool_degrades_by_che() -> None:
    """Ten 1600-token prefixes (100 blocks each, working set 1000), ISL 1616, OSL 16: a request
    holds ceil(1632/16) = 102 blocks, 2 never reused. Nothing running, 500 blocks of cache:
    p solves 1000 p + 2 T = 500 with T = −10 ln(1 − p); by hand 0.48 < p < 0.49."""
    e = steady_state_hits(
        PrefixTraffic(shared_prefix_tokens=1600, num_prefixes=10),
        input_tokens=1616,
        output_tokens=16,
        block_size_tokens=16,
        pool_blocks=500,
        running_requests=0,
    )
    p = e.hit_probability
    assert 0.48 < p < 0.49
    t = -10.0 * math.log(1.0 - p)
    assert 1000.0 * p + 2.0 * t == pytest.approx(500.0, rel=1e-9)
    assert e.hit_tokens_per_request == pytest.approx(1600.0 * p)
    assert e.working_set_blocks == 1000
    assert e.pinned_blocks == 0
    # Every prefix idle: their resident share, 1000 · p blocks, is evictable.
    assert e.evictable_blocks == math.floor(1000 * p)


def test_measured_hit_rate_is_taken_in_whole_blocks() -> None:
    e = steady_state_hits(
        PrefixTraffic(cache_hit_rate=0.5),
        input_tokens=1000,
        output_tokens=100,
        block_size_tokens=16,
        pool_blocks=10_000,
        running_requests=4,
    )
    assert e.hit_tokens_per_request == 496.0  # floor(500 / 16) · 16


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"shared_prefix_tokens": 0}, "shared_prefix_tokens"),
        ({"shared_prefix_tokens": 10, "shared_fraction": 0.0}, "shared_fraction"),
        ({"shared_prefix_tokens": 10, "num_prefixes": 0}, "num_prefixes"),
        ({"cache_hit_rate": 1.5}, "cache_hit_rate"),
        ({"cache_hit_rate": 0.5, "shared_prefix_tokens": 10}, "not both"),
    ],
)
def test_bad_prefix_traffic_is_refused(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PrefixTraffic(**kwargs)  # type: ignore[arg-type]
