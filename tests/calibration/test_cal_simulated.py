"""Serving rows replayed through the simulator: TPOT agrees with the measured benchmark."""

from __future__ import annotations

import numpy as np

from bench.accuracy import architectures
from service.calibration import (
    CALIBRATION_MODELS,
    compile_models,
    load_measured_profile,
    load_serving_measurements,
    reference_gpu,
    resolve_cases,
    steady_state_cases,
)
from service.calibration.simulated import simulate_cases


def test_simulated_tpot_tracks_the_measured_rows() -> None:
    archs = {k: v for k, v in architectures().items() if k in CALIBRATION_MODELS}
    gpu = reference_gpu("H100 SXM")
    cases, _ = resolve_cases(load_serving_measurements(), archs, gpu)
    compiled = compile_models(cases, archs, gpu, measured=load_measured_profile())
    small = [
        c
        for c in steady_state_cases(cases, compiled)
        if c.row.engine == "vllm" and (c.row.concurrency or 1) <= 8 and c.row.output_tokens <= 1024
    ][:4]
    assert small
    ttft, tpot = simulate_cases(small, compiled, min_requests=40)
    measured_tpot = np.array([c.row.tpot_s for c in small])
    assert np.all(ttft > 0)
    # Small closed loops: decode steps dominate, and the simulator's TPOT stays within 25 %
    # of the benchmark's (its TTFT is not yet reliable; see bench/accuracy.py --simulate).
    assert np.all(np.abs(tpot - measured_tpot) / measured_tpot < 0.25)
