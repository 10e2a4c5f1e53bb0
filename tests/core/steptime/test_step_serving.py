"""Steady-state serving: zero load, the closed loop's bookkeeping, and its limits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.core.architecture import parse_architecture
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.steptime import StepWork, build_step_model, engine_profile
from servesize.core.steptime.serving import (
    closed_loop,
    max_throughput,
    prefill_time_s,
    resident_capacity,
    zero_load_ttft_s,
)

GPU = HardwareSpec(
    id="gpu",
    vendor="test",
    name="Test GPU",
    memory_bytes=80 * 2**30,
    memory_bandwidth_bytes_per_s=3_000_000_000_000,
    peak_tflop_per_s={"bf16": 1000.0},
    interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=400_000_000_000),
)
ARCH = parse_architecture(
    {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 8,
        "head_dim": 128,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 8192,
        "vocab_size": 32000,
        "torch_dtype": "bfloat16",
    },
    name="dense",
)
MODEL = build_step_model(ARCH, GPU, engine="vllm")


def test_zero_load_ttft_is_overhead_plus_one_prefill_step() -> None:
    expected = MODEL.step_time(StepWork.prefill(1000)).total_s[0]
    assert prefill_time_s(MODEL, [1000])[0] == pytest.approx(expected)
    assert zero_load_ttft_s(MODEL, [1000])[0] == pytest.approx(
        expected + MODEL.engine.request_overhead_s
    )


def test_a_prompt_longer_than_the_budget_is_chunked() -> None:
    budget = MODEL.engine.max_num_batched_tokens
    first = MODEL.step_time(StepWork.prefill(budget)).total_s[0]
    second = MODEL.step_time(StepWork.prefill(1000, cached_tokens=budget)).total_s[0]
    assert prefill_time_s(MODEL, [budget + 1000])[0] == pytest.approx(first + second)


def test_one_client_sees_its_own_steps_only() -> None:
    est = closed_loop(MODEL, concurrency=1, input_tokens=512, output_tokens=64)
    decode = MODEL.step_time(StepWork.decode(1, 512 + 32)).total_s[0]
    assert est.tpot_s[0] == pytest.approx(decode, rel=0.05)
    assert est.ttft_s[0] >= est.ttft_zero_load_s[0] * 0.99
    assert est.admission_wait_s[0] == 0.0


def test_littles_law_closes_the_loop() -> None:
    c = np.array([1.0, 8.0, 64.0, 256.0])
    est = closed_loop(MODEL, concurrency=c, input_tokens=1024, output_tokens=256)
    # Each client cycles through TTFT and n − 1 inter-token gaps: X·R = C.
    cycle = est.ttft_s + 255 * est.tpot_s
    rate = est.request_rate_per_s
    np.testing.assert_allclose(rate * cycle, c, rtol=0.1)
    np.testing.assert_allclose(est.throughput_output_tokens_per_s, 256 * rate)


def test_more_clients_raise_tpot_and_throughput_until_the_cap() -> None:
    c = np.array([1.0, 2.0, 8.0, 32.0, 128.0])
    est = closed_loop(MODEL, concurrency=c, input_tokens=1024, output_tokens=256)
    assert np.all(np.diff(est.tpot_s) > 0)
    assert np.all(np.diff(est.throughput_output_tokens_per_s) > 0)
    assert np.all(np.diff(est.ttft_s) >= 0)


def test_a_full_kv_cache_makes_clients_wait_for_admission() -> None:
    est = closed_loop(
        MODEL, concurrency=[16, 64], input_tokens=1000, output_tokens=200, kv_capacity_tokens=16_000
    )
    # 16,000 tokens hold 14 sequences of 1000 + 200/2 tokens.
    assert est.resident_sequences.tolist() == pytest.approx([14.0, 14.0], rel=1e-3)
    assert est.admission_wait_s[1] > est.admission_wait_s[0] > 0
    assert est.throughput_output_tokens_per_s[1] == pytest.approx(
        est.throughput_output_tokens_per_s[0], rel=1e-3
    )


def test_full_reservation_holds_prompt_and_output() -> None:
    trt = build_step_model(ARCH, GPU, engine="trtllm")
    cap = resident_capacity(trt, input_tokens=1000, output_tokens=200, kv_capacity_tokens=12_000)
    assert cap.tolist() == [10.0]


def test_max_throughput_beats_any_lower_concurrency() -> None:
    top = max_throughput(MODEL, input_tokens=1000, output_tokens=200, kv_capacity_tokens=200_000)
    some = closed_loop(MODEL, concurrency=[8, 64], input_tokens=1000, output_tokens=200)
    assert np.all(top.throughput_output_tokens_per_s[0] >= some.throughput_output_tokens_per_s)


def test_bounds_say_prefill_computes_and_decode_reads() -> None:
    plain = MODEL.with_engine(engine_profile("vllm", calibrated=False))
    est = closed_loop(plain, concurrency=4, input_tokens=4096, output_tokens=128)
    assert est.prefill_bound[0] == "compute"
    assert est.decode_bound[0] == "memory"
    assert est.prefill_arithmetic_intensity[0] > est.decode_arithmetic_intensity[0]


def test_pipeline_parallel_decode_runs_micro_batches() -> None:
    pp = build_step_model(ARCH, GPU, engine="vllm", pipeline_parallel_size=2)
    est = closed_loop(pp, concurrency=16, input_tokens=256, output_tokens=128)
    single = closed_loop(MODEL, concurrency=16, input_tokens=256, output_tokens=128)
    assert est.tpot_s[0] < single.tpot_s[0] * 1.1
    assert "interconnect" in pp.sources


def test_inputs_must_be_positive() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        closed_loop(MODEL, concurrency=0, input_tokens=10, output_tokens=10)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(min_value=1, max_value=256),
    st.integers(min_value=16, max_value=16_384),
    st.integers(min_value=2, max_value=2048),
)
def test_the_fixed_point_is_self_consistent(c: int, p: int, n: int) -> None:
    est = closed_loop(MODEL, concurrency=c, input_tokens=p, output_tokens=n)
    assert 1.0 <= est.resident_sequences[0] <= c + 1e-9
    assert est.ttft_s[0] >= est.ttft_zero_load_s[0] * 0.999
    assert est.tpot_s[0] > 0
    assert np.isfinite(est.throughput_output_tokens_per_s[0])


def test_clumped_arrivals_wait_longer() -> None:
    # Clumping is a term of the mean-field branch, used when the engine cannot hold every
    # client (here a KV cache of 8 sequences against 32 clients); the lock-step loop of
    # clients it holds plays the clumping itself.
    calm = MODEL.with_engine(dataclasses.replace(MODEL.engine, arrival_clumping=0.0))
    busy = MODEL.with_engine(dataclasses.replace(MODEL.engine, arrival_clumping=0.5))
    kv = 8 * (2048 + 128)
    a = closed_loop(
        calm, concurrency=32, input_tokens=2048, output_tokens=256, kv_capacity_tokens=kv
    )
    b = closed_loop(
        busy, concurrency=32, input_tokens=2048, output_tokens=256, kv_capacity_tokens=kv
    )
    assert b.ttft_s[0] > a.ttft_s[0]
    held = closed_loop(busy, concurrency=32, input_tokens=2048, output_tokens=256)
    assert (
        held.ttft_s[0]
        == closed_loop(calm, concurrency=32, input_tokens=2048, output_tokens=256).ttft_s[0]
    )
