"""Tier A screen: the exact TTFT distribution, the replicas formula and the max-rate search,
checked against hand-computed values and against :func:`open_loop` at the rate it returns."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from servesize.core.sizing import replicas_needed, screen_curve, target_curves
from servesize.core.slo import LatencyTarget, ServiceLevelObjective
from servesize.core.steptime import build_step_model, open_loop
from servesize.core.steptime.openloop import OpenLoopCurve, open_loop_curve
from tests.core.sizing.fixtures import H100, LLAMA_8B


def _curve(**overrides: float) -> OpenLoopCurve:
    """A one-point curve with hand-set parameters."""
    values = {
        "rate_per_s": 1.0,
        "resident_sequences": 1.0,
        "tpot_s": 0.01,
        "mean_step_s": 0.01,
        "mix_step_s": 0.02,
        "decode_step_s": 0.01,
        "mix_share": 0.0,
        "fixed_s": 0.0,
        "busy": 0.0,
        "mix_time_share": 0.0,
        "prefill_wait_mean_s": 0.0,
        "prefill_utilization": 0.0,
    } | overrides
    arrays: dict[str, Any] = {k: np.array([v]) for k, v in values.items()}
    return OpenLoopCurve(saturation_rate_per_s=10.0, output_tokens=100.0, **arrays)


def test_replicas_formula_by_hand() -> None:
    # 100 / (12 × 0.85) = 9.80 → 10; 100 / (10 × 1.0) = 10 exactly → 10, not 11.
    assert replicas_needed(100.0, 12.0, 0.85) == 10
    assert replicas_needed(100.0, 10.0, 1.0) == 10
    assert replicas_needed(0.5, 10.0, 0.85) == 1
    with pytest.raises(ValueError, match="headroom"):
        replicas_needed(1.0, 1.0, 1.5)


def test_ttft_quantile_of_pure_exponential_wait() -> None:
    # Idle engine, every arrival waits Exp(mean 0.2 s) (ρ = 1): q95 = 0.2·ln 20 = 0.5991 s.
    curve = _curve(prefill_wait_mean_s=0.2, prefill_utilization=1.0, fixed_s=0.1)
    assert curve.ttft_quantile(0.95)[0] == pytest.approx(0.1 + 0.2 * math.log(20), rel=1e-9)


def test_ttft_quantile_of_uniform_residual() -> None:
    # Always busy with decode steps of 10 ms, no prefill queue: R ~ U(0, 10 ms), q50 = 5 ms.
    curve = _curve(busy=1.0)
    assert curve.ttft_quantile(0.5)[0] == pytest.approx(0.005, rel=1e-9)
    # With an atom: busy half the time, P(R <= t) = 0.5 + 0.5·t/0.01 → q75 = 5 ms.
    assert _curve(busy=0.5).ttft_quantile(0.75)[0] == pytest.approx(0.005, rel=1e-9)


def test_uniform_plus_exponential_cdf_by_hand() -> None:
    # U(0, a) + Exp(m) with a = m = 1 at t = 1: ∫0^1 (1 − e^{−(1−x)}) dx = e^{−1} = 0.3679.
    curve = _curve(busy=1.0, decode_step_s=1.0, prefill_wait_mean_s=1.0, prefill_utilization=1.0)
    assert curve.ttft_cdf(1.0)[0] == pytest.approx(math.exp(-1), rel=1e-9)


def test_curve_matches_open_loop_at_the_screened_rate() -> None:
    model = build_step_model(LLAMA_8B, H100, calibrated=False)
    curve = open_loop_curve(model, input_tokens=1024, output_tokens=256)
    objective = ServiceLevelObjective(
        targets=(LatencyTarget(metric="tpot", statistic="p95", limit_s=0.015),)
    )
    result = screen_curve(curve, target_curves(objective, 256.0))
    assert result.binding == "tpot_s.p95"
    estimate = open_loop(
        model, arrival_rate_per_s=result.max_rate_per_s, input_tokens=1024, output_tokens=256
    )
    # Interpolation between grid points: TPOT at λ* within 2 % of the limit.
    assert estimate.tpot_s == pytest.approx(0.015, rel=0.02)
    # The exact quantile agrees with open_loop's 20,000-sample one up to sampling error.
    p95 = curve.interpolate(curve.ttft_quantile(0.95), result.max_rate_per_s)
    assert p95 == pytest.approx(estimate.ttft_p95_s, rel=0.03)


def test_looser_slo_gives_higher_capacity() -> None:
    model = build_step_model(LLAMA_8B, H100, calibrated=False)
    curve = open_loop_curve(model, input_tokens=1024, output_tokens=256)
    rates = [
        screen_curve(
            curve,
            target_curves(
                ServiceLevelObjective(
                    targets=(LatencyTarget(metric="tpot", statistic="p95", limit_s=limit),)
                ),
                256.0,
            ),
        ).max_rate_per_s
        for limit in (0.012, 0.015, 0.02)
    ]
    assert rates[0] < rates[1] < rates[2]


def test_missed_at_zero_load_says_by_how_much() -> None:
    model = build_step_model(LLAMA_8B, H100, calibrated=False)
    curve = open_loop_curve(model, input_tokens=1024, output_tokens=256)
    objective = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="p95", limit_s=1e-3),)
    )
    result = screen_curve(curve, target_curves(objective, 256.0))
    assert result.max_rate_per_s == 0.0
    (miss,) = result.misses
    assert miss.name == "ttft_s.p95"
    assert miss.predicted > 1e-3
    assert miss.relative_miss == pytest.approx(miss.predicted / 1e-3 - 1)
