"""The physical fields of the datasheet table (SMs, L2, clock) and the GPUs added for planning,
against hand-worked figures and the vendors' own arithmetic."""

from __future__ import annotations

import pytest

from servesize.core.hardware import datasheet_spec, profile_id_for
from servesize.db.seed import datasheet_entries

ENTRIES = {e["name"]: e for e in datasheet_entries()}
SPECS = {profile_id_for(name): datasheet_spec(e) for name, e in ENTRIES.items()}


def test_physical_fields_convert_with_explicit_units() -> None:
    h100 = SPECS["h100-sxm"]
    assert h100.sm_count == 132
    assert h100.l2_cache_bytes == 52_428_800  # 50 MB as printed, binary: 50 × 2^20
    assert h100.boost_clock_hz == 1.98e9


def test_every_entry_states_the_physical_fields() -> None:
    for name, entry in ENTRIES.items():
        assert {"sm_count", "l2_cache_mb", "boost_clock_mhz", "physical_sources"} <= entry.keys(), (
            name
        )
        assert entry["physical_sources"], name


@pytest.mark.parametrize(
    "profile",
    ["rtx-pro-6000-blackwell-server-edition", "b300-sxm", "gb300", "mi355x", "l20", "rtx-5090",
     "rtx-3090", "h20", "rtx-4090"],
)  # fmt: skip
def test_planned_gpus_are_listed_with_sources(profile: str) -> None:
    spec = SPECS[profile]
    entry = ENTRIES[spec.name]
    assert entry["sources"]
    assert spec.memory_bytes > 0
    assert spec.memory_bandwidth_bytes_per_s > 0
    assert spec.peak_flop_per_s("bf16")


@pytest.mark.parametrize("profile", ["b200", "gb200", "b300-sxm", "gb300", "rtx-5090",
                                     "rtx-pro-6000-blackwell-server-edition"])  # fmt: skip
def test_blackwell_parts_have_a_dense_fp4_peak_above_fp8(profile: str) -> None:
    spec = SPECS[profile]
    fp4, fp8 = spec.peak_flop_per_s("fp4"), spec.peak_flop_per_s("fp8")
    assert fp4 is not None
    assert fp8 is not None
    assert fp4 >= 2 * fp8


def test_mi355x_fp8_peak_is_cus_times_rate_times_clock() -> None:
    # ISSCC 2026: 8,192 FP8 FLOP per CU per clock; 256 CUs at 2.4 GHz = 5.033 PFLOP/s dense.
    spec = SPECS["mi355x"]
    assert spec.sm_count == 256
    assert spec.boost_clock_hz is not None
    assert spec.peak_flop_per_s("fp8") == pytest.approx(256 * 8192 * spec.boost_clock_hz, rel=1e-3)


def test_gddr7_bandwidth_is_bus_width_times_data_rate() -> None:
    # 512-bit GDDR7 at 28 Gbps: 512 × 28e9 / 8 = 1.792 TB/s (RTX 5090 and RTX PRO 6000).
    for profile in ("rtx-5090", "rtx-pro-6000-blackwell-server-edition"):
        assert SPECS[profile].memory_bandwidth_bytes_per_s == 512 * 28 * 10**9 // 8


def test_fp32_peak_is_sms_times_cores_times_clock() -> None:
    # Ada / Ampere / Blackwell consumer SMs: 128 FP32 lanes, 2 FLOP per FMA.
    for profile in ("rtx-4090", "l40s", "rtx-5090", "rtx-3090", "l20"):
        spec = SPECS[profile]
        assert spec.sm_count is not None
        assert spec.boost_clock_hz is not None
        expected_tflops = spec.sm_count * 128 * 2 * spec.boost_clock_hz / 1e12
        assert spec.peak_tflop_per_s["fp32"] == pytest.approx(expected_tflops, rel=0.03), profile


def test_no_nvlink_switch_on_pcie_cards() -> None:
    # The RTX 3090's NVLink is a two-card bridge, not a node fabric: its TP traffic crosses PCIe.
    for profile in ("rtx-3090", "rtx-5090", "l20", "rtx-pro-6000-blackwell-server-edition"):
        link = SPECS[profile].interconnect
        assert link is not None
        assert link.kind == "pcie"


def test_b300_sxm_matches_the_nvml_name() -> None:
    # NVML reports "NVIDIA B300 SXM6 AC" (B300 cache-hierarchy reference, see physical_sources).
    from servesize.core.hardware import device_matches, identity_tokens

    assert device_matches("NVIDIA B300 SXM6 AC", identity_tokens("B300 SXM"))
    assert not device_matches("NVIDIA B300 SXM6 AC", identity_tokens("B200"))
