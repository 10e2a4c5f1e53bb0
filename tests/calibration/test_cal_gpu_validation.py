"""The published non-H100 rows (validation only) and the tables a GPU without uploads gets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from servesize.calibration import load_measured_profile, reference_gpu, tables_for_gpu
from servesize.calibration.gpu_validation import (
    GPU_PROFILES,
    load_gpu_offline_rows,
    predict_gpu_offline,
    summarise,
)
from servesize.catalog import ModelCatalog
from servesize.core.hardware import datasheet_spec
from servesize.db.seed import datasheet_entries

ROWS = load_gpu_offline_rows()
HARDWARE = {s.id: s for s in (datasheet_spec(e) for e in datasheet_entries())}


def test_rows_transcribed_from_the_page() -> None:
    # perf-overview.md @ 00f37686aa85: Llama 3.1 8B, H200 TP1 FP8, 128/128 → 27,911 tokens/s;
    # Llama 3.3 70B, B200 TP1 FP4, 20000/2000 → 665.
    def find(model: str, gpu: str, isl: int, osl: int) -> float:
        (row,) = [
            r
            for r in ROWS
            if r.model == model
            and r.gpu.startswith(gpu)
            and (r.input_tokens, r.output_tokens) == (isl, osl)
            and r.pipeline_parallel_size == 1
            and r.tensor_parallel_size in (1,)
        ]
        return row.output_throughput_tokens_per_s

    assert find("Llama 3.1 8B", "H200", 128, 128) == 27911
    assert find("Llama 3.3 70B", "B200", 20000, 2000) == 665
    assert {r.gpu for r in ROWS} <= set(GPU_PROFILES)
    assert all(profile in HARDWARE for profile in GPU_PROFILES.values())
    assert Counter(r.precision for r in ROWS if r.gpu.startswith("H200")) == {"FP8": 60}


def test_tables_for_gpu() -> None:
    h100 = reference_gpu()
    own = tables_for_gpu(h100)
    assert own is not None
    assert own.name == load_measured_profile().name
    scaled = tables_for_gpu(HARDWARE["b200"])
    assert scaled is not None
    assert scaled.name.endswith("scaled to B200")
    assert tables_for_gpu(HARDWARE["b200"], scaled=False) is None


@pytest.fixture(scope="module")
def h200_dense() -> dict[str, tuple[int, float, float, float]]:
    catalog = ModelCatalog(Path(__file__).resolve().parents[2] / "servesize" / "data" / "models")
    dense = (
        "meta-llama/Llama-3.1-8B",
        "meta-llama/Llama-3.3-70B-Instruct",
        "meta-llama/Llama-3.1-405B",
    )
    archs = {m: catalog.architecture(m) for m in dense}
    rows = [r for r in ROWS if r.gpu.startswith("H200")]
    return {
        source: summarise(predict_gpu_offline(rows, archs, HARDWARE, source=source))
        for source in ("datasheet", "scaled")
    }


def test_h200_fp8_dense_offline_accuracy(
    h200_dense: dict[str, tuple[int, float, float, float]],
) -> None:
    """Reached (2026-12-02): 30 rows (Llama 3.1 8B TP1, 3.3 70B TP1, 3.1 405B TP8), datasheet
    roofline MAPE 10.9 % (signed +2.7 %), scaled H100 tables 10.0 % (signed −4.7 %)."""
    count, scaled_mape, _, _ = h200_dense["scaled"]
    _, datasheet_mape, _, _ = h200_dense["datasheet"]
    assert count == 30
    assert scaled_mape <= 11.5
    assert scaled_mape < datasheet_mape


def test_b300_gemm_kernel() -> None:
    """cuBLAS BF16 4096³ on a B300 SXM: 1,842 TFLOPS = 74.6 µs (kernels_gpus.csv). By hand:
    the datasheet roofline is 2·4096³ / (2250e12 · 0.78) + 4 µs = 82.3 µs; the H100 table (vLLM,
    166.03 µs at m = 4096) scales to 4 µs · 1980/2032 + 162.03 µs · 989/2250 · w, with 32 × 32 =
    1024 tiles in 8 waves of 132 SMs (q = 1056/1024) and 7 waves of 148 (q = 1036/1024):
    w = 1036/1056, so 3.898 + 69.87 = 73.8 µs."""
    from servesize.calibration.gpu_validation import predict_gemm_kernels

    (k,) = predict_gemm_kernels(HARDWARE)
    assert k.measured_s == pytest.approx(2 * 4096**3 / 1842e12)
    assert k.predicted_s["datasheet"] == pytest.approx(2 * 4096**3 / (2250e12 * 0.78) + 4e-6)
    expected = 4e-6 * 1980 / 2032 + (166.025784e-6 - 4e-6) * 989 / 2250 * 1036 / 1056
    assert k.predicted_s["scaled"] == pytest.approx(expected, rel=1e-6)
    assert abs(k.predicted_s["scaled"] - k.measured_s) < abs(
        k.predicted_s["datasheet"] - k.measured_s
    )
