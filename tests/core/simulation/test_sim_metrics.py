"""Percentile helpers, the summary's definitions, stability verdicts and step-time models."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.core.simulation import (
    SLO,
    ConstantStepTime,
    LatencyStats,
    LinearStepTime,
    SchedulerConfig,
    percentile,
    simulate,
    weighted_percentile,
)
from servesize.core.traffic import FixedLength, GeometricLength, open_loop_workload, trace_workload


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.0, 10.0), st.integers(0, 5)), min_size=1, max_size=30),
    st.floats(0.0, 100.0),
)
def test_weighted_percentile_equals_percentile_of_the_repeated_samples(
    pairs: list[tuple[float, int]], q: float
) -> None:
    values = np.array([v for v, _ in pairs])
    weights = np.array([w for _, w in pairs])
    if weights.sum() == 0:
        assert math.isnan(weighted_percentile(values, weights, q))
        return
    expected = float(np.percentile(np.repeat(values, weights), q))
    assert weighted_percentile(values, weights, q) == expected


def test_percentile_treats_failures_as_infinitely_slow() -> None:
    # 99 successes at 1 s and one failure (inf). Linear interpolation at rank h = 99 q:
    # p98 -> h = 97.02 between two 1 s samples = 1; p99 -> h = 98.01, between 1 s and inf = inf.
    one_failure = np.append(np.ones(99), np.inf)
    assert percentile(one_failure, 50) == 1.0
    assert percentile(one_failure, 98) == 1.0
    assert percentile(one_failure, 99) == math.inf
    # One failure in 1000 leaves p99 finite (h = 989.01).
    assert percentile(np.append(np.ones(999), np.inf), 99) == 1.0
    stats = LatencyStats.of(one_failure)
    assert (stats.count, stats.mean, stats.p50, stats.p99) == (100, math.inf, 1.0, math.inf)


def test_empty_samples_give_nan() -> None:
    stats = LatencyStats.of(np.zeros(0))
    assert stats.count == 0
    assert math.isnan(stats.p99)


def test_summary_counts_throughput_and_goodput_over_the_window() -> None:
    # Four requests P=2, O=2 sent at 0, 1, 2, 3 (step 1 s, one at a time): each runs two steps
    # [a, a+1] [a+1, a+2] after the previous one, so request i finishes at 2i + 2 and waits i.
    # Window = requests 1..2 (warm-up 1, cool-down 1), sent over [1, 2]: 1 s long.
    # Completions inside [1, 2]: request 0 at 2 -> throughput 1/s. Tokens emitted by steps
    # ending in [1, 2]: 1 + 1 -> 2 tokens/s. TTFT: request 1 = 2 s, request 2 = 3 s.
    w = trace_workload(
        arrival_s=np.array([0.0, 1.0, 2.0, 3.0]),
        prompt_tokens=np.full(4, 2),
        output_tokens=np.full(4, 2),
    )
    w = type(w)(
        arrival_s=w.arrival_s,
        prompt_tokens=w.prompt_tokens,
        output_tokens=w.output_tokens,
        timeout_s=w.timeout_s,
        nominal_rate_per_s=w.nominal_rate_per_s,
        warmup_requests=1,
        cooldown_requests=1,
    )
    config = SchedulerConfig(
        max_num_batched_tokens=16, max_num_seqs=1, block_size_tokens=2, num_kv_blocks=16
    )
    r = simulate(w, config, ConstantStepTime(1.0))
    assert r.finish_s.tolist() == [2.0, 4.0, 6.0, 8.0]
    s = r.summary(SLO(ttft_s=2.5))
    assert (s.window_start_s, s.window_end_s) == (1.0, 2.0)
    assert s.measured == 2
    assert s.offered_rate_per_s == 1.0
    assert s.throughput_requests_per_s == 1.0
    assert s.throughput_output_tokens_per_s == 2.0
    assert (s.ttft_s.p50, s.ttft_s.mean) == (2.5, 2.5)
    assert s.slo_attainment == 0.5
    assert s.goodput_requests_per_s == 0.5  # throughput 1/s × attainment 1/2
    assert s.queueing_delay_s.mean == 1.5  # waits 1 and 2


def test_overload_is_flagged_unstable() -> None:
    # One slot, 10 ms per token, 20 tokens per request: capacity 5 req/s; offered 8 req/s.
    w = open_loop_workload(
        num_requests=2_000,
        rate_per_s=8.0,
        input_tokens=FixedLength(4),
        output_tokens=GeometricLength(20.0),
        rng=np.random.default_rng(0),
        warmup_requests=200,
    )
    config = SchedulerConfig(
        max_num_batched_tokens=64, max_num_seqs=1, block_size_tokens=16, num_kv_blocks=1_000
    )
    s = simulate(w, config, ConstantStepTime(0.01)).summary()
    assert not s.stable
    assert "throughput" in s.stability_reason
    assert s.throughput_requests_per_s == pytest.approx(5.0, rel=0.1)  # about 1000 completions
    light = simulate(w.with_rate(2.0), config, ConstantStepTime(0.01)).summary()
    assert light.stable


def test_time_series_sums_replicas_on_a_grid() -> None:
    w = trace_workload(
        arrival_s=np.array([0.0, 0.0]), prompt_tokens=np.array([2, 2]),
        output_tokens=np.array([4, 4]),
    )  # fmt: skip
    config = SchedulerConfig(
        max_num_batched_tokens=16, max_num_seqs=4, block_size_tokens=2, num_kv_blocks=16
    )
    r = simulate(w, config, ConstantStepTime(1.0), replicas=2)  # round robin: one each
    ts = r.time_series(points=5)  # t = 0, 1, 2, 3, 4 (both run [0, 4])
    assert ts.time_s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert ts.num_running.tolist() == [2, 2, 2, 2, 0]


def test_step_time_models_are_elementwise() -> None:
    model = LinearStepTime(
        base_s=0.01,
        per_token_s=1e-4,
        per_context_token_s=1e-6,
        per_attention_work_s=1e-8,
        per_seq_s=1e-3,
    )
    pt = np.array([100, 0, 7])
    attn = np.array([5000.0, 0.0, 24.5])
    dec = np.array([3, 8, 1])
    ctx = np.array([300, 4000, 9])
    seqs = np.array([4, 8, 2])
    together = model(pt, attn, dec, ctx, seqs)
    for i in range(3):
        alone = model(
            pt[i : i + 1], attn[i : i + 1], dec[i : i + 1], ctx[i : i + 1], seqs[i : i + 1]
        )
        assert alone[0] == together[i]
    # 0.01 + 1e-4 * 103 + 1e-6 * 300 + 1e-8 * 5000 + 1e-3 * 4
    assert together[0] == pytest.approx(0.01 + 0.0103 + 0.0003 + 0.00005 + 0.004)
    assert ConstantStepTime(0.5)(pt, attn, dec, ctx, seqs).tolist() == [0.5] * 3


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: ConstantStepTime(0.0), "step_s"),
        (lambda: LinearStepTime(base_s=0.0), "base_s"),
        (lambda: LinearStepTime(base_s=1.0, per_token_s=-1.0), "per_token_s"),
        (lambda: SLO(ttft_s=0.0), "ttft_s"),
        (
            lambda: SchedulerConfig(
                max_num_batched_tokens=8,
                max_num_seqs=1,
                block_size_tokens=1,
                num_kv_blocks=4,
                watermark_blocks=4,
            ),
            "watermark_blocks",
        ),
        (
            lambda: SchedulerConfig(
                max_num_batched_tokens=0, max_num_seqs=1, block_size_tokens=1, num_kv_blocks=4
            ),
            "max_num_batched_tokens",
        ),
    ],
)
def test_invalid_parameters_are_rejected(factory: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        factory()  # type: ignore[operator]


def test_routing_arguments_are_checked() -> None:
    w = trace_workload(
        arrival_s=np.zeros(1), prompt_tokens=np.ones(1, dtype=np.int64),
        output_tokens=np.ones(1, dtype=np.int64),
    )  # fmt: skip
    config = SchedulerConfig(
        max_num_batched_tokens=8, max_num_seqs=1, block_size_tokens=1, num_kv_blocks=4
    )
    with pytest.raises(ValueError, match="routing_rng"):
        simulate(w, config, ConstantStepTime(1.0), replicas=2, routing="random")
    with pytest.raises(ValueError, match="replicas"):
        simulate(w, config, ConstantStepTime(1.0), replicas=0)
    with pytest.raises(ValueError, match="unknown routing"):
        simulate(w, config, ConstantStepTime(1.0), routing="fastest")  # type: ignore[arg-type]


def test_a_non_positive_step_time_is_an_error() -> None:
    def broken(*features: np.ndarray) -> np.ndarray:
        return np.zeros(features[0].shape)

    w = trace_workload(
        arrival_s=np.zeros(1), prompt_tokens=np.ones(1, dtype=np.int64),
        output_tokens=np.ones(1, dtype=np.int64),
    )  # fmt: skip
    config = SchedulerConfig(
        max_num_batched_tokens=8, max_num_seqs=1, block_size_tokens=1, num_kv_blocks=4
    )
    with pytest.raises(ValueError, match="step time"):
        simulate(w, config, broken)
