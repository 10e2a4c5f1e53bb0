"""Prefix caching in the simulator: hand traces of block hits and evictions, identical prompts,
LRU under a cyclic access larger than the cache, and bit-for-bit equality with caching off.

Conventions as in ``test_sim_hand_traces.py``: constant 1 s steps, one request per step when
requests do not overlap, ``bs`` the block size. A request holds ``ceil(tokens / bs)`` blocks; of
a shared prefix of ``S`` tokens only whole blocks are cached, ``floor(S / bs)``, and a hit leaves
at least the last prompt token to compute: ``floor(min(S, P - 1) / bs)`` blocks.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from servesize.core.simulation import (
    ConstantStepTime,
    LinearStepTime,
    PrefixCaching,
    SchedulerConfig,
    SimulationResult,
    simulate,
)
from servesize.core.traffic import (
    FixedLength,
    PrefixAssignment,
    PrefixTraffic,
    Workload,
    open_loop_workload,
    trace_workload,
    with_prefixes,
)


def _trace(
    arrival_s: list[float],
    prompt: list[int],
    output: list[int],
    group: list[int],
    shared: list[int],
    *,
    caching: PrefixCaching,
    block_size: int,
    blocks: int,
    policy: str = "vllm_v1",
    capacity: str = "incremental",
    skip: bool = True,
) -> SimulationResult:
    base = trace_workload(
        arrival_s=np.array(arrival_s, dtype=float),
        prompt_tokens=np.array(prompt),
        output_tokens=np.array(output),
        timeout_s=math.inf,
    )
    workload = replace(
        base,
        prefix=PrefixAssignment(
            group=np.array(group, dtype=np.int64), shared_tokens=np.array(shared, dtype=np.int64)
        ),
    )
    config = SchedulerConfig(
        max_num_batched_tokens=4096,
        max_num_seqs=16,
        block_size_tokens=block_size,
        num_kv_blocks=blocks,
        policy=policy,  # type: ignore[arg-type]
        capacity_policy=capacity,  # type: ignore[arg-type]
        prefix_caching=caching,
    )
    return simulate(workload, config, ConstantStepTime(1.0), skip_decode_runs=skip)


# A: prefix 0 (8 tokens = 2 blocks of 4), B: the same, C: prefix 1 (12 tokens = 3 blocks),
# D: prefix 2 (4 tokens = 1 block), E: prefix 0 again, F: prefix 1 again. One output token
# each, two seconds apart, so no two overlap. The pool has 6 blocks.
_ARRIVALS = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
_PROMPTS = [9, 9, 13, 5, 9, 13]
_GROUPS = [0, 0, 1, 2, 0, 1]
_SHARED = [8, 8, 12, 4, 8, 12]


def test_hand_trace_vllm_free_queue() -> None:
    """vLLM's free queue, least recently freed first, cached or not.

    Queue written head → tail; ``a`` an uncached block, ``0.1`` block 1 of prefix 0.

    A computes 9 tokens (3 blocks), caches 0.0, 0.1; frees last block first: ``a a a | a 0.1
    0.0`` (the three never used blocks lead). B hits 2 blocks (8 tokens; cap ``floor(8/4)``),
    computes 1. C misses, takes 4 blocks from the head (a, a, a, B's a), frees ``0.1 0.0 a 1.2
    1.1 1.0``. D (2 blocks) pops 0.1 and 0.0: prefix 0 is gone; queue ``a 1.2 1.1 1.0 a 2.0``.
    E misses (9 tokens), takes 3 blocks: a, 1.2, 1.1; F then hits 1.0 only: 13 − 4 = 9.
    """
    r = _trace(
        _ARRIVALS,
        _PROMPTS,
        [1] * 6,
        _GROUPS,
        _SHARED,
        caching="free_queue_lru",
        block_size=4,
        blocks=6,
    )
    assert r.step_prefill_tokens.tolist() == [9, 1, 13, 5, 9, 9]
    assert r.prefix_hit_tokens is not None
    assert r.prefix_hit_tokens.tolist() == [0, 8, 0, 0, 0, 4]
    # Blocks in use during each step: A 3; B 3 (2 hit + 1); C 4; D 2; E 3; F 1 hit + 3 new.
    assert r.step_kv_blocks_used.tolist() == [3, 3, 4, 2, 3, 4]


def test_hand_trace_radix_lru() -> None:
    """SGLang evicts cached leaves only when no uncached block is left.

    Same trace; uncached blocks sit apart and are used first. Before D: one uncached block
    (C's last) and cached ``0.1 0.0 1.2 1.1 1.0`` (LRU first). D takes the uncached block and
    evicts 0.1; E hits 0.0 (4 tokens, computes 5), caches 0.1 again, takes the uncached block D
    freed and evicts 1.2 (0.0 is held by E, so skipped); F hits 1.0, 1.1: 13 − 8 = 5.
    """
    r = _trace(
        _ARRIVALS, _PROMPTS, [1] * 6, _GROUPS, _SHARED, caching="radix_lru", block_size=4, blocks=6
    )
    assert r.step_prefill_tokens.tolist() == [9, 1, 13, 5, 5, 5]
    assert r.prefix_hit_tokens is not None
    assert r.prefix_hit_tokens.tolist() == [0, 8, 0, 0, 4, 8]


def test_hand_trace_off_is_no_cache() -> None:
    r = _trace(
        _ARRIVALS, _PROMPTS, [1] * 6, _GROUPS, _SHARED, caching="off", block_size=4, blocks=6
    )
    assert r.step_prefill_tokens.tolist() == _PROMPTS
    assert r.prefix_hit_tokens is None


@pytest.mark.parametrize(
    ("policy", "capacity", "caching"),
    [
        ("vllm_v1", "incremental", "free_queue_lru"),
        ("prefill_first", "new_token_ratio", "radix_lru"),
        ("no_chunking", "guaranteed_no_evict", "free_queue_lru"),
        ("sarathi", "incremental", "free_queue_lru"),
    ],
)
@pytest.mark.parametrize(("isl", "hit"), [(100, 96), (96, 80), (17, 16), (16, 0)])
def test_identical_prompts_prefill_only_the_suffix(
    policy: str, capacity: str, caching: PrefixCaching, isl: int, hit: int
) -> None:
    """Every request the same ISL-token prompt: after the first, a request computes
    ``ISL − floor((ISL − 1) / 16) · 16`` tokens (vLLM recomputes at least the last token):
    100 → 4, 96 → 16, 17 → 1, 16 → 16 (its one full block holds the last token)."""
    n = 12
    r = _trace(
        [3.0 * k for k in range(n)],
        [isl] * n,
        [2] * n,
        [0] * n,
        [isl] * n,
        caching=caching,
        block_size=16,
        blocks=64,
        policy=policy,
        capacity=capacity,
    )
    prefill = r.step_prefill_tokens[r.step_prefill_tokens > 0]
    assert prefill.tolist() == [isl] + [isl - hit] * (n - 1)
    assert r.prefix_hit_tokens is not None
    assert r.prefix_hit_tokens.tolist() == [0] + [hit] * (n - 1)


def test_concurrent_identical_requests_share_blocks() -> None:
    """Two identical 64-token prompts (4 blocks of 16) arriving one step apart, 3 outputs:
    the second hits the 3 blocks the first cached when it was scheduled (cap ``floor(63/16)``)
    and adds 1 own block, so 5 blocks are in use, not 8."""
    r = _trace(
        [0.0, 1.0],
        [64, 64],
        [3, 3],
        [0, 0],
        [64, 64],
        caching="free_queue_lru",
        block_size=16,
        blocks=20,
    )
    # Steps: [0,1] A prefill 64; [1,2] A decode + B prefill 16; [2,3] A, B decode; [3,4] B.
    assert r.step_prefill_tokens.tolist() == [64, 16, 0, 0]
    # A: 4 blocks, 5 at 65 tokens; B: 3 shared + 1 own, 2 own at 65; A leaves: B alone, 5.
    assert r.step_kv_blocks_used.tolist() == [4, 6, 7, 5]


@pytest.mark.parametrize("caching", ["free_queue_lru", "radix_lru"])
def test_cyclic_access_larger_than_the_cache_never_hits(caching: PrefixCaching) -> None:
    """Five prefixes of 64 tokens (4 blocks of 16) used in turn, each prompt 64 + 16 tokens,
    one at a time. With 12 blocks the working set (20) does not fit: between two uses of a
    prefix the four others allocate 4 × 5 = 20 blocks, so LRU has evicted it — no hit ever
    (cyclic access to more than the cache). With 40 blocks every prefix stays and every
    request after the first round hits 64 tokens."""
    k, n = 5, 30
    prompt = [80] * n
    group = [j % k for j in range(n)]
    shared = [64] * n
    small = _trace(
        [3.0 * j for j in range(n)],
        prompt,
        [1] * n,
        group,
        shared,
        caching=caching,
        block_size=16,
        blocks=12,
    )
    assert small.prefix_hit_tokens is not None
    assert int(small.prefix_hit_tokens.sum()) == 0
    big = _trace(
        [3.0 * j for j in range(n)],
        prompt,
        [1] * n,
        group,
        shared,
        caching=caching,
        block_size=16,
        blocks=40,
    )
    assert big.prefix_hit_tokens is not None
    assert big.prefix_hit_tokens.tolist() == [0] * k + [64] * (n - k)


def _open_loop(prefix: PrefixTraffic | None, seed: int = 3) -> Workload:
    rng = np.random.default_rng(seed)
    w = open_loop_workload(
        num_requests=400,
        rate_per_s=9.0,
        input_tokens=FixedLength(300),
        output_tokens=FixedLength(40),
        rng=rng,
    )
    return with_prefixes(w, prefix)


def _sim(workload: Workload, caching: PrefixCaching, skip: bool = True) -> SimulationResult:
    config = SchedulerConfig(
        max_num_batched_tokens=512,
        max_num_seqs=32,
        block_size_tokens=16,
        num_kv_blocks=300,
        prefix_caching=caching,
    )
    step = LinearStepTime(base_s=0.01, per_token_s=1e-4, per_context_token_s=1e-6)
    return simulate(workload, config, step, skip_decode_runs=skip)


_ARRAYS = (
    "first_scheduled_s",
    "first_token_s",
    "finish_s",
    "exit_s",
    "num_preemptions",
    "step_start_s",
    "step_duration_s",
    "step_prefill_tokens",
    "step_kv_blocks_used",
)


def test_no_shared_prefix_is_bit_for_bit_caching_off() -> None:
    """A workload without shared prefixes runs the same with the cache on or off."""
    plain = _sim(_open_loop(None), "off")
    on = _sim(_open_loop(None), "free_queue_lru")
    for name in _ARRAYS:
        np.testing.assert_array_equal(getattr(on, name), getattr(plain, name), err_msg=name)
    shared_on_off = _sim(_open_loop(PrefixTraffic(shared_prefix_tokens=256)), "off")
    for name in _ARRAYS:
        np.testing.assert_array_equal(
            getattr(shared_on_off, name), getattr(plain, name), err_msg=name
        )


def test_prefix_cache_keeps_decode_runs_exact() -> None:
    """Skipping over decode runs changes nothing with a prefix cache under KV pressure."""
    w = _open_loop(PrefixTraffic(shared_prefix_tokens=256, shared_fraction=0.5, num_prefixes=3))
    a = _sim(w, "free_queue_lru", skip=True)
    b = _sim(w, "free_queue_lru", skip=False)
    for name in ("first_token_s", "finish_s", "num_preemptions"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.prefix_hit_tokens is not None
    assert b.prefix_hit_tokens is not None
    np.testing.assert_array_equal(a.prefix_hit_tokens, b.prefix_hit_tokens)


def test_shared_prefix_lowers_prefill_work_and_ttft() -> None:
    """Half the requests share a 256-token prompt head: a warm request of those computes
    300 − 256 = 44 tokens, so the mean prefill per request falls towards
    300 − 0.5 · 256 = 172 and the mean TTFT falls."""
    w = _open_loop(PrefixTraffic(shared_prefix_tokens=256, shared_fraction=0.5))
    off = _sim(w, "off")
    on = _sim(w, "free_queue_lru")
    assert on.prefix_hit_rate is not None
    measured_hit = on.prefix_hit_rate
    assert measured_hit == pytest.approx(0.5 * 256 / 300, abs=0.01)
    assert int(on.step_prefill_tokens.sum()) < int(off.step_prefill_tokens.sum())
    assert np.nanmean(on.ttft_s) < np.nanmean(off.ttft_s)


@pytest.mark.parametrize(
    ("policy", "capacity", "caching"),
    [
        ("vllm_v1", "incremental", "free_queue_lru"),
        ("prefill_first", "new_token_ratio", "radix_lru"),
        ("no_chunking", "max_utilization", "free_queue_lru"),
    ],
)
def test_preemption_under_kv_pressure_keeps_hits_bounded(
    policy: str, capacity: str, caching: PrefixCaching
) -> None:
    """A pool of 60 blocks of 16 under a burst of 300-token prompts sharing 256 tokens over three
    prefixes: requests are preempted, their blocks go back through the cache, and still every
    request finishes, each admission hits at most floor(256/16) · 16 = 256 tokens, and skipping
    decode runs changes nothing."""
    rng = np.random.default_rng(11)
    w = with_prefixes(
        open_loop_workload(
            num_requests=150,
            rate_per_s=40.0,
            input_tokens=FixedLength(300),
            output_tokens=FixedLength(120),
            rng=rng,
        ),
        PrefixTraffic(shared_prefix_tokens=256, shared_fraction=0.9, num_prefixes=3),
    )
    results = []
    for skip in (True, False):
        config = SchedulerConfig(
            max_num_batched_tokens=1024,
            max_num_seqs=16,
            block_size_tokens=16,
            num_kv_blocks=60,
            policy=policy,  # type: ignore[arg-type]
            capacity_policy=capacity,  # type: ignore[arg-type]
            prefix_caching=caching,
        )
        step = LinearStepTime(base_s=0.01, per_token_s=1e-4, per_context_token_s=1e-6)
        results.append(simulate(w, config, step, skip_decode_runs=skip))
    r = results[0]
    assert r.prefix_hit_tokens is not None
    assert int(r.num_preemptions.sum()) > 0
    assert np.all(r.ok)
    assert np.all(r.prefix_hit_tokens <= 256 * (1 + r.num_preemptions))
    assert int(r.prefix_hit_tokens.sum()) > 0
    assert int(r.step_kv_blocks_used.max()) <= 60
    for name in _ARRAYS:
        np.testing.assert_array_equal(getattr(r, name), getattr(results[1], name), err_msg=name)
