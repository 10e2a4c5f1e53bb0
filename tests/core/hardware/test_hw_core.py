"""Datasheet conversion, device identity and plausibility, against hand-worked figures."""

from __future__ import annotations

import pytest

from servesize.core.hardware import (
    BandwidthSample,
    CollectiveSample,
    GemmSample,
    HardwareSpec,
    Interconnect,
    datasheet_spec,
    device_matches,
    gemm_efficiency_curves,
    identity_tokens,
    implausible_values,
    profile_id_for,
)

H100_ENTRY = {
    "name": "H100 SXM",
    "vendor": "NVIDIA",
    "memory_gb": 80,
    "memory_type": "HBM3",
    "memory_bandwidth_tb_s": 3.35,
    "dense_tflops": {"fp32": 67.0, "bf16": 989, "fp8": 1979, "int8_tops": 1979, "fp4": None},
    "interconnect": {"nvlink_gb_s_bidirectional": 900},
    "tdp_w": 700,
}


def test_datasheet_units() -> None:
    spec = datasheet_spec(H100_ENTRY)
    assert spec.id == "h100-sxm"
    assert spec.memory_bytes == 85_899_345_920  # 80 × 2^30
    assert spec.memory_bandwidth_bytes_per_s == 3_350_000_000_000  # 3.35 × 10^12
    assert spec.peak_tflop_per_s["int8"] == 1979
    assert spec.peak_tflop_per_s["fp4"] is None
    assert spec.peak_flop_per_s("bf16") == pytest.approx(989e12)
    assert spec.interconnect == Interconnect(
        kind="nvlink", bandwidth_bytes_per_s=450_000_000_000, gpus_per_node=8
    )


def test_tdp_range_takes_the_upper_end() -> None:
    assert datasheet_spec(H100_ENTRY | {"tdp_w": "350-400"}).tdp_w == 400.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("H100 SXM", "h100-sxm"),
        ("A100 SXM 80GB", "a100-sxm-80gb"),
        ("GB200 (per Blackwell GPU)", "gb200"),
        ("RTX 4090", "rtx-4090"),
    ],
)
def test_profile_ids(name: str, expected: str) -> None:
    assert profile_id_for(name) == expected


@pytest.mark.parametrize(
    ("profile", "device", "matches"),
    [
        ("H100 SXM", "NVIDIA H100 80GB HBM3", True),
        ("H100 SXM", "NVIDIA H100 PCIe", False),
        ("H100 PCIe", "NVIDIA H100 PCIe", True),
        ("H100 NVL", "NVIDIA H100 NVL", True),
        ("A100 SXM 80GB", "NVIDIA A100-SXM4-80GB", True),
        ("L4", "NVIDIA L40S", False),
        ("L40S", "NVIDIA L40S", True),
        ("T4", "Tesla T4", True),
        ("MI300X", "AMD Instinct MI300X", True),
        ("RTX 4090", "NVIDIA GeForce RTX 4090", True),
        ("H200 SXM", "NVIDIA H100 80GB HBM3", False),
    ],
)
def test_device_identity(profile: str, device: str, matches: bool) -> None:
    assert device_matches(device, identity_tokens(profile)) is matches


def _spec() -> HardwareSpec:
    return datasheet_spec(H100_ENTRY)


def test_values_at_the_ceiling_pass_and_above_fail() -> None:
    # 1.15 × 989 = 1137.35 TFLOP/s; 1.15 × 3.35e12 = 3.8525e12 B/s; 1.15 × 4.5e11 = 5.175e11.
    ok = implausible_values(
        _spec(),
        gemm=[GemmSample(dtype="bf16", achieved_tflop_per_s=1137.0)],
        bandwidth=[BandwidthSample(achieved_bytes_per_s=3.85e12)],
        collectives=[CollectiveSample(num_gpus=8, bus_bandwidth_bytes_per_s=5.17e11)],
    )
    assert ok == []
    bad = implausible_values(
        _spec(),
        gemm=[GemmSample(dtype="bf16", achieved_tflop_per_s=1138.0)],
        bandwidth=[BandwidthSample(achieved_bytes_per_s=3.86e12)],
        collectives=[CollectiveSample(num_gpus=16, bus_bandwidth_bytes_per_s=5.18e11)],
    )
    assert [i.field for i in bad] == [
        "/gemm/0/achieved_tflop_per_s",
        "/memory_bandwidth/0/achieved_bytes_per_s",
        "/collectives/0/bus_bandwidth_bytes_per_s",
        "/collectives/0/num_gpus",
    ]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.0, -1.0])
def test_non_finite_or_non_positive_values_are_issues(value: float) -> None:
    issues = implausible_values(
        _spec(), gemm=[GemmSample(dtype="bf16", achieved_tflop_per_s=value)]
    )
    assert [i.field for i in issues] == ["/gemm/0/achieved_tflop_per_s"]


def test_unsupported_dtype_is_an_issue() -> None:
    issues = implausible_values(_spec(), gemm=[GemmSample(dtype="fp4", achieved_tflop_per_s=1.0)])
    assert [i.field for i in issues] == ["/gemm/0/dtype"]


def test_efficiency_curve_takes_median_per_m() -> None:
    rows = [("bf16", 8, 10.0), ("bf16", 8, 30.0), ("bf16", 8, 20.0), ("fp8", 8, 100.0)]
    curves = gemm_efficiency_curves(rows, {"bf16": 100.0, "fp8": None})
    assert list(curves) == ["bf16"]  # no fp8 peak: no efficiency
    (point,) = curves["bf16"]
    assert (point.m, point.samples) == (8, 3)
    assert point.median_efficiency == pytest.approx(0.2)
    assert point.best_efficiency == pytest.approx(0.3)
