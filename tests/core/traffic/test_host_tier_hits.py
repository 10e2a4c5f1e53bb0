"""Two-tier Che approximation (``steady_state_hits`` with ``host_blocks``), by hand.

Ten prefixes of 64 tokens (4 blocks of 16) shared by every request; nothing running, so no
prefix is pinned and the GPU's LRU part is the pool itself.
"""

from __future__ import annotations

import pytest

from servesize.core.traffic import PrefixTraffic, steady_state_hits

TRAFFIC = PrefixTraffic(shared_prefix_tokens=64, shared_fraction=1.0, num_prefixes=10)


def _hits(*, output: int, pool: int, host: int) -> tuple[float, float, float]:
    c = steady_state_hits(
        TRAFFIC,
        input_tokens=65,
        output_tokens=output,
        block_size_tokens=16,
        pool_blocks=pool,
        running_requests=0.0,
        host_blocks=host,
    )
    return c.hit_tokens_per_request, c.host_hit_tokens_per_request, c.host_hit_probability


def test_host_holding_half_the_working_set_serves_half_the_hits() -> None:
    """Prompt 65 + output 10 = 75 tokens: ``⌊75/16⌋ − 4 = 0`` full blocks of its own go to the
    host, so Che's equation there is ``40(1 − e^{−T/10}) = 20``: ``p_host = 20/40 = 0.5``. No
    GPU blocks are spare, so every hit comes from the host: ``4 · 16 · 0.5 = 32`` tokens."""
    total, host, p_host = _hits(output=10, pool=0, host=20)
    assert p_host == pytest.approx(0.5, rel=1e-9)
    assert host == pytest.approx(32.0, rel=1e-9)
    assert total == pytest.approx(32.0, rel=1e-9)


def test_a_host_larger_than_the_stream_serves_every_miss_of_the_gpu() -> None:
    """Output 40: 105 tokens, ``⌊105/16⌋ − 4 = 2`` own blocks per request; a host of 10^6
    blocks gives ``T ≈ 5·10^5`` requests, ``p_host = 1``: all 64 prefix tokens are hits, and the
    host serves what the 10-block GPU pool (``p_LRU`` < 1) misses."""
    total, host, p_host = _hits(output=40, pool=10, host=10**6)
    gpu_only, _, _ = _hits(output=40, pool=10, host=0)
    assert p_host == pytest.approx(1.0, abs=1e-12)
    assert total == pytest.approx(64.0, rel=1e-9)
    assert host == pytest.approx(64.0 - gpu_only, rel=1e-9)
    assert 0.0 < gpu_only < 64.0


def test_a_host_smaller_than_the_gpu_adds_nothing() -> None:
    """The host is inclusive: a host tier no larger than the GPU's LRU part holds nothing the
    GPU does not (``max(p_host − p_LRU, 0) = 0``): p_host = 0.5 (above) while the GPU's 30
    blocks with one own block per request (``40(1 − e^{−T/10}) + T = 30``) keep more."""
    total, host, p_host = _hits(output=10, pool=30, host=20)
    gpu_only, _, _ = _hits(output=10, pool=30, host=0)
    assert p_host == pytest.approx(0.5, rel=1e-9)
    assert host == 0.0
    assert total == gpu_only
    assert gpu_only > 4 * 16 * p_host
