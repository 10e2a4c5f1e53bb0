"""Accuracy summary of stored verifications: median measured/predicted and MAPE, worked by
hand."""

from __future__ import annotations

import pytest

from servesize.core.deploy import accuracy_summary


def test_median_ratio_and_mape_per_engine_and_hardware() -> None:
    rows: list[tuple[str, str, dict[str, tuple[float | None, float | None]]]] = [
        ("vllm", "h100-sxm", {"ttft_s.p50": (0.10, 0.12), "tpot_s.p95": (0.02, 0.02)}),
        ("vllm", "h100-sxm", {"ttft_s.p50": (0.10, 0.08), "tpot_s.p95": (0.02, None)}),
        ("vllm", "h100-sxm", {"ttft_s.p50": (0.10, 0.10)}),
        ("sglang", "a100-sxm-80gb", {"ttft_s.p50": (0.5, 1.0), "ttft_s.p95": (0.0, 1.0)}),
    ]
    sglang, vllm = accuracy_summary(rows)
    assert (vllm.engine, vllm.hardware, vllm.verifications) == ("vllm", "h100-sxm", 3)
    by = {m.metric: m for m in vllm.metrics}
    # Ratios 1.2, 0.8, 1.0: median 1.0. APE |0.12-0.1|/0.12 = 1/6, |0.08-0.1|/0.08 = 1/4, 0.
    assert by["ttft_s.p50"].count == 3
    assert by["ttft_s.p50"].median_ratio == pytest.approx(1.0)
    assert by["ttft_s.p50"].mape_percent == pytest.approx(100 * (1 / 6 + 1 / 4) / 3)
    # One usable pair (the other has no measurement): exact.
    assert by["tpot_s.p95"].count == 1
    assert by["tpot_s.p95"].mape_percent == pytest.approx(0.0)
    assert (by["ttft_s.p95"].count, by["ttft_s.p95"].median_ratio) == (0, None)
    s = {m.metric: m for m in sglang.metrics}
    # Predicted 0.5 s, measured 1.0 s: ratio 2, APE 50 %; a zero prediction is not usable.
    assert s["ttft_s.p50"].median_ratio == pytest.approx(2.0)
    assert s["ttft_s.p50"].mape_percent == pytest.approx(50.0)
    assert s["ttft_s.p95"].count == 0
