"""Recalibration of request overhead and step-time scale from measured levels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from servesize.core.architecture import parse_architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import (
    MeasuredLevel,
    RecalibrationError,
    apply_recalibration,
    build_step_model,
    closed_loop,
    engine_profile,
    fit_recalibration,
)

# A toy engine whose answer is known by construction: TTFT = r + s·prefill_i, TPOT = s·step_i.
PREFILL_S = (0.010, 0.025, 0.060, 0.140)
STEP_S = (0.008, 0.011, 0.017, 0.030)


def toy(constants: Mapping[str, float]) -> Sequence[tuple[float, float]]:
    r = constants.get("request_overhead_s", 0.0)
    s = constants.get("step_time_scale", 1.0)
    return [(r + s * p, s * t) for p, t in zip(PREFILL_S, STEP_S, strict=True)]


def toy_levels(r: float, s: float) -> list[MeasuredLevel]:
    return [
        MeasuredLevel(label=f"c{i}", ttft_s=r + s * p, tpot_s=s * t)
        for i, (p, t) in enumerate(zip(PREFILL_S, STEP_S, strict=True))
    ]


def test_a_known_overhead_of_30_ms_and_scale_of_1_3_are_recovered_within_1_percent() -> None:
    # measured: 30 ms + 1.3 × prefill; 1.3 × step (worked by hand: level 0 TTFT 43 ms, TPOT 10.4 ms)
    levels = toy_levels(0.030, 1.3)
    assert levels[0].ttft_s == pytest.approx(0.043)
    assert levels[0].tpot_s == pytest.approx(0.0104)
    fit = fit_recalibration(levels, toy, {"request_overhead_s": 0.005, "step_time_scale": 1.0})
    assert fit.constants_after["request_overhead_s"] == pytest.approx(0.030, rel=0.01)
    assert fit.constants_after["step_time_scale"] == pytest.approx(1.3, rel=0.01)
    # before: TPOT is 1/1.3 of measured everywhere, |1/1.3 − 1| = 0.2308
    tpot_before = next(e for e in fit.errors_before if e.metric == "tpot_s")
    assert tpot_before.median_abs_error == pytest.approx(0.3 / 1.3, rel=1e-9)
    assert tpot_before.mape == pytest.approx(0.3 / 1.3, rel=1e-9)
    assert all(e.mape < 1e-4 for e in fit.errors_after)
    assert fit.cost_after < fit.cost_before


def test_the_bounds_hold_when_the_truth_lies_outside_them() -> None:
    fit = fit_recalibration(
        toy_levels(0.030, 6.0), toy, {"request_overhead_s": 0.0, "step_time_scale": 1.0}
    )
    assert fit.constants_after["step_time_scale"] == pytest.approx(4.0)


def test_fewer_levels_than_constants_is_refused() -> None:
    one = toy_levels(0.030, 1.3)[:1]
    with pytest.raises(RecalibrationError, match="1 measured levels"):
        fit_recalibration(
            one, lambda c: toy(c)[:1], {"request_overhead_s": 0.0, "step_time_scale": 1.0}
        )


def test_levels_without_any_metric_are_refused() -> None:
    empty = [MeasuredLevel(label="a", ttft_s=None, tpot_s=None)] * 2
    with pytest.raises(RecalibrationError, match="0 values"):
        fit_recalibration(
            empty, lambda c: toy(c)[:2], {"request_overhead_s": 0.0, "step_time_scale": 1.0}
        )


def test_the_scale_multiplies_every_step_constant_and_sets_the_overhead() -> None:
    base = engine_profile("trtllm")
    p = apply_recalibration(base, {"request_overhead_s": 0.030, "step_time_scale": 2.0})
    assert p.request_overhead_s == 0.030
    assert p.step_overhead_s == pytest.approx(2 * 1.57e-3)
    assert p.eager_overhead_per_layer_s == pytest.approx(2 * 54.6e-6)
    assert p.compute_slowdown == pytest.approx(2.2)
    assert p.memory_slowdown == pytest.approx(1.4)
    with pytest.raises(ValueError, match="unknown constants"):
        apply_recalibration(base, {"arrival_clumping": 0.1})


def test_a_real_step_model_recovers_constants_it_was_given() -> None:
    gpu = HardwareSpec(
        id="gpu",
        vendor="test",
        name="Test GPU",
        memory_bytes=80 * 2**30,
        memory_bandwidth_bytes_per_s=3_000_000_000_000,
        peak_tflop_per_s={"bf16": 1000.0},
    )
    arch = parse_architecture(
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
        name="toy",
    )
    model = build_step_model(arch, gpu, engine="vllm")
    concurrency = (1, 4, 16, 64)

    def predict(constants: Mapping[str, float]) -> list[tuple[float, float]]:
        m = model.with_engine(apply_recalibration(model.engine, constants))
        est = closed_loop(m, concurrency=list(concurrency), input_tokens=512, output_tokens=128)
        return [(float(a), float(b)) for a, b in zip(est.ttft_s, est.tpot_s, strict=True)]

    truth = predict({"request_overhead_s": 0.030, "step_time_scale": 1.5})
    levels = [
        MeasuredLevel(label=f"c={c}", ttft_s=t, tpot_s=p)
        for c, (t, p) in zip(concurrency, truth, strict=True)
    ]
    fit = fit_recalibration(
        levels,
        predict,
        {"request_overhead_s": model.engine.request_overhead_s, "step_time_scale": 1.0},
    )
    assert fit.constants_after["request_overhead_s"] == pytest.approx(0.030, rel=0.01)
    assert fit.constants_after["step_time_scale"] == pytest.approx(1.5, rel=0.01)
