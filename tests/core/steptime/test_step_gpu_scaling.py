"""Measured tables carried to another GPU by physical ratios, against hand-worked figures.

Every expectation below is worked out by hand from the formula of docs/modeling.md §2.11:
``t = t_fix·f_ref/f_tgt + t_work·max(T_c·r_P·w, T_m·r_W)/max(T_c, T_m)``, ``t_fix = min(t, floor)``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.steptime import (
    AttentionTable,
    CollectiveTable,
    GemmTable,
    MeasuredProfile,
    gpu_ratios,
    scale_kernel_time_s,
    scale_measured_profile,
    wave_quantisation,
)

REF = HardwareSpec(
    id="ref",
    vendor="NVIDIA",
    name="Ref",
    memory_bytes=80 * 2**30,
    memory_bandwidth_bytes_per_s=3_350_000_000_000,
    peak_tflop_per_s={"bf16": 989.0, "fp8": 1979.0},
    interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=450_000_000_000),
    sm_count=132,
    boost_clock_hz=1.98e9,
)
FLOOR_S = 4e-6  # DEFAULT_KERNEL_FLOOR_S


def _gemm(m: float, n: float, k: float, latency_s: float, dtype: str = "bf16") -> GemmTable:
    return GemmTable(
        dtype=dtype,
        engine="vllm",
        source="hand",
        m=np.array([m, 2 * m]),
        n=np.array([n]),
        k=np.array([k]),
        latency_s=np.array([[latency_s, 2 * latency_s]]),
    )


def _scaled_gemm(table: GemmTable, target: HardwareSpec) -> GemmTable:
    out = scale_measured_profile(MeasuredProfile(name="t", gemm=(table,)), REF, target)
    (gemm,) = out.gemm
    return gemm


def test_memory_bound_gemm_scales_with_bandwidth() -> None:
    # m = 1, n = k = 8192 bf16: 128 MiB of weights (T_m ≈ 47 µs) against 0.17 µs of FLOPs.
    # H200-like target, 4.8 / 3.35 = 1.4328× the bandwidth, same peaks and clock:
    # t = 4 µs + (50 − 4) µs · 3.35/4.8 = 4 + 32.104 = 36.104 µs.
    target = replace(REF, id="h200", memory_bandwidth_bytes_per_s=4_800_000_000_000)
    gemm = _scaled_gemm(_gemm(1, 8192, 8192, 50e-6), target)
    assert gemm.latency_s[0, 0] == pytest.approx(36.104167e-6, rel=1e-6)


def test_compute_bound_gemm_scales_with_the_dtype_peak() -> None:
    # m = 16384, n = k = 8192 bf16: 2.2 TFLOP (T_c ≈ 2.85 ms) against 0.67 GB (T_m ≈ 0.24 ms);
    # 128 × 64 = 8192 tiles fill 62.06 waves of 132 SMs on both GPUs (same SM count).
    # Twice the bf16 peak: t = 4 µs + (3000 − 4) µs / 2 = 1502 µs.
    target = replace(REF, id="2x", peak_tflop_per_s={"bf16": 1978.0, "fp8": 3958.0})
    gemm = _scaled_gemm(_gemm(16384, 8192, 8192, 3000e-6), target)
    assert gemm.latency_s[0, 0] == pytest.approx(1502e-6, rel=1e-9)


def test_wave_quantisation_by_sm_count() -> None:
    # 133 tiles on 132 SMs take two waves (264 slots), on 133 SMs one: q = 264/133 and 1.
    assert wave_quantisation(np.array([133.0]), 132)[0] == pytest.approx(264 / 133)
    assert wave_quantisation(np.array([133.0]), 133)[0] == 1.0
    # m = 7·128, n = 19·128 → 133 tiles; k = 8192: T_c = 2·896·2432·8192 / (989e12·0.78)
    # = 46.3 µs, T_m = (2432·8192·2 + 896·(2432 + 8192)·2) B / (3.35e12·0.85) = 20.7 µs.
    # The same peak and bandwidth on 133 SMs: the compute term shrinks by w = 133/264 to
    # 23.3 µs, still above T_m, so t = 4 µs + 96 µs · 133/264.
    target = replace(REF, id="133", sm_count=133)
    gemm = _scaled_gemm(_gemm(896, 2432, 8192, 100e-6), target)
    assert gemm.latency_s[0, 0] == pytest.approx(4e-6 + 96e-6 * 133 / 264, rel=1e-9)


def test_regime_switch_at_the_ridge() -> None:
    # T_c = 10, T_m = 8 on the reference (compute-bound); the target has the same peak and a
    # quarter of the bandwidth: max(10·1, 8·4) / 10 = 3.2 on the work part.
    t = scale_kernel_time_s(
        np.array([100.0]),
        np.array([10.0]),
        np.array([8.0]),
        compute_ratio=1.0,
        memory_ratio=4.0,
        floor_s=0.0,
        clock_ratio=1.0,
    )
    assert t[0] == pytest.approx(320.0)


def test_latency_floor_scales_with_the_clock() -> None:
    # 3 µs is below the 4 µs floor: all fixed cost, scaled by 1980/2640 = 0.75 → 2.25 µs.
    target = replace(REF, id="fast-clock", boost_clock_hz=2.64e9)
    gemm = _scaled_gemm(_gemm(1, 256, 256, 3e-6), target)
    assert gemm.latency_s[0, 0] == pytest.approx(2.25e-6, rel=1e-9)
    # Unknown clock: the floor is kept.
    gemm = _scaled_gemm(_gemm(1, 256, 256, 3e-6), replace(target, boost_clock_hz=None))
    assert gemm.latency_s[0, 0] == pytest.approx(3e-6, rel=1e-12)


def test_decode_attention_is_memory_bound() -> None:
    # 64 sequences of 4096 tokens, 8 KV heads × 128 × 2 B × (K, V) = 4 KiB per token:
    # 1.07 GB of KV (T_m ≈ 377 µs) against 4.3 GFLOP (T_c ≈ 5.6 µs).
    # Twice the bandwidth: t = 8 µs + (400 − 8) µs / 2 = 204 µs.
    table = AttentionTable(
        phase="decode",
        mechanism="gqa",
        engine="vllm",
        source="hand",
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        kv_dtype="bf16",
        batch=np.array([64.0]),
        length=np.array([4096.0]),
        latency_s=np.array([[400e-6]]),
    )
    target = replace(REF, id="2bw", memory_bandwidth_bytes_per_s=6_700_000_000_000)
    out = scale_measured_profile(MeasuredProfile(name="t", attention=(table,)), REF, target)
    assert out.attention[0].latency_s[0, 0] == pytest.approx(204e-6, rel=1e-9)


def test_collectives_keep_latency_and_scale_bandwidth() -> None:
    # α = 10 µs (smallest message) kept; the rest halves on a link of twice the bandwidth.
    table = CollectiveTable(
        op="all_reduce",
        implementation="custom",
        source="hand",
        num_gpus=2,
        message_bytes=np.array([1e3, 1e6, 1e7]),
        latency_s=np.array([10e-6, 30e-6, 110e-6]),
    )
    profile = MeasuredProfile(name="t", collectives=(table,))
    nvlink5 = replace(
        REF, id="nv5", interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=900 * 10**9)
    )
    out = scale_measured_profile(profile, REF, nvlink5)
    assert out.collectives[0].latency_s == pytest.approx([10e-6, 20e-6, 60e-6])
    pcie = replace(
        REF, id="pcie", interconnect=Interconnect(kind="pcie", bandwidth_bytes_per_s=None)
    )
    assert scale_measured_profile(profile, REF, pcie).collectives == ()


def test_tables_of_a_dtype_the_target_lacks_are_dropped() -> None:
    profile = MeasuredProfile(
        name="t", gemm=(_gemm(1, 4096, 4096, 20e-6), _gemm(1, 4096, 4096, 12e-6, "fp8"))
    )
    no_fp8 = replace(REF, id="a100", peak_tflop_per_s={"bf16": 312.0, "fp8": None})
    assert [t.dtype for t in scale_measured_profile(profile, REF, no_fp8).gemm] == ["bf16"]


def test_ratios_of_h100_to_h200() -> None:
    h200 = replace(REF, id="h200", memory_bandwidth_bytes_per_s=4_800_000_000_000)
    r = gpu_ratios(REF, h200)
    assert r.memory == pytest.approx(3.35 / 4.8)
    assert r.compute("bf16") == 1.0
    assert r.link == 1.0
    assert r.compute("fp4") is None


def test_the_reference_maps_to_itself() -> None:
    from servesize.calibration import load_measured_profile, reference_gpu

    h100 = reference_gpu()
    tables = load_measured_profile()
    same = scale_measured_profile(tables, h100, h100)
    pairs = zip(tables.gemm + tables.attention, same.gemm + same.attention, strict=True)
    for before, after in pairs:
        np.testing.assert_allclose(after.latency_s, before.latency_s, rtol=1e-12)
    assert len(same.collectives) == len(tables.collectives)
    assert len(same.moe) == len(tables.moe)


def test_fp4_tables_are_derived_from_fp8_ones() -> None:
    fp4_gpu = replace(REF, id="fp4", peak_tflop_per_s={"bf16": 989.0, "fp8": 1979.0, "fp4": 3958.0})
    # Memory-bound: m = 1, n = k = 8192. FP8 moves 8192² · 1 B + 1 · 16384 · 2 B = 67,141,632 B;
    # NVFP4 8192² · 9/16 B + 32,768 B = 37,781,504 B: the work part shrinks by 0.562713,
    # t = 4 µs + 46 µs · 0.562713 = 29.885 µs.
    table = _gemm(1, 8192, 8192, 50e-6, "fp8")
    out = scale_measured_profile(MeasuredProfile(name="t", gemm=(table,)), REF, fp4_gpu)
    assert [t.dtype for t in out.gemm] == ["fp8", "fp4"]
    assert out.gemm[1].latency_s[0, 0] == pytest.approx(29.8848e-6, rel=1e-5)
    # Compute-bound: m = 16384, n = k = 8192 (T_c = 2.02 ms at the FP8 peak, T_m = 0.21 ms):
    # twice the FP8 peak as FP4, t = 4 µs + 2996 µs / 2 = 1502 µs.
    table = _gemm(16384, 8192, 8192, 3000e-6, "fp8")
    out = scale_measured_profile(MeasuredProfile(name="t", gemm=(table,)), REF, fp4_gpu)
    assert out.gemm[1].latency_s[0, 0] == pytest.approx(1502e-6, rel=1e-9)
    # No FP4 peak on the target: nothing derived.
    only_fp8 = MeasuredProfile(name="t", gemm=(table,))
    assert [t.dtype for t in scale_measured_profile(only_fp8, REF, REF).gemm] == ["fp8"]
