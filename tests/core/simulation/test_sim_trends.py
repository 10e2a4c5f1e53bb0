"""Invariances and trends of the simulator (docs/modeling.md §5.2 A and D: time scaling,
latency vs load).

Time scaling is exact: doubling every step time and every gap between sends doubles every
timestamp, because multiplying by two commutes with floating-point rounding, so the scheduler
makes the same decisions in the same order.
"""

from __future__ import annotations

import itertools

import numpy as np

from servesize.core.simulation import LinearStepTime, SchedulerConfig, simulate
from servesize.core.traffic import LogNormalLength, UniformLength, open_loop_workload

ENGINE = SchedulerConfig(
    max_num_batched_tokens=512, max_num_seqs=32, block_size_tokens=16, num_kv_blocks=400
)
STEP = LinearStepTime(base_s=0.004, per_token_s=2e-5, per_context_token_s=1e-7)


def _double(step: LinearStepTime) -> LinearStepTime:
    return LinearStepTime(
        base_s=2 * step.base_s,
        per_token_s=2 * step.per_token_s,
        per_context_token_s=2 * step.per_context_token_s,
    )


def _workload(rate_per_s: float, seed: int = 5, num_requests: int = 1500):  # type: ignore[no-untyped-def]
    return open_loop_workload(
        num_requests=num_requests,
        rate_per_s=rate_per_s,
        input_tokens=UniformLength(16, 600),
        output_tokens=LogNormalLength(
            mean_unclipped_tokens=60.0, cv=0.8, min_tokens=1, max_tokens=400
        ),
        rng=np.random.default_rng(seed),
        warmup_requests=150,
    )


def test_doubling_step_times_and_gaps_doubles_every_timestamp() -> None:
    # Under KV pressure (400 blocks of 16 tokens) so preemption and admission limits are
    # exercised; 20/s is heavy for this engine.
    base = simulate(_workload(20.0), ENGINE, STEP)
    slow = simulate(_workload(10.0), ENGINE, _double(STEP))
    np.testing.assert_array_equal(slow.arrival_s, 2 * base.arrival_s)
    np.testing.assert_array_equal(slow.status, base.status)
    np.testing.assert_array_equal(slow.num_preemptions, base.num_preemptions)
    assert int(base.num_preemptions.sum()) > 0
    for name in ("first_token_s", "finish_s", "first_scheduled_s"):
        np.testing.assert_array_equal(getattr(slow, name), 2 * getattr(base, name))
    a, b = base.summary(), slow.summary()
    assert b.ttft_s.p95 == 2 * a.ttft_s.p95
    assert b.throughput_requests_per_s == a.throughput_requests_per_s / 2


def test_latency_and_queueing_rise_with_load() -> None:
    # Common random numbers: one seed, so each rate replays the same requests with gaps
    # scaled by 1/rate. The engine saturates at about 38/s on this workload.
    means, p95s, tpots, waits = [], [], [], []
    for rate_per_s in (5.0, 15.0, 25.0, 30.0):
        summary = simulate(_workload(rate_per_s), ENGINE, STEP).summary()
        assert summary.stable, summary.stability_reason
        means.append(summary.ttft_s.mean)
        p95s.append(summary.ttft_s.p95)
        tpots.append(summary.tpot_s.mean)
        waits.append(summary.queueing_delay_completed_s.mean)
    for series in (means, p95s, tpots, waits):
        assert all(a < b for a, b in itertools.pairwise(series)), series
