"""Step-time speed: vectorised evaluation against a scalar loop, as a ratio within one run.

Evaluates the same random (batch, context, prefill) points with one vectorised
``StepTimeModel.step_time`` call and with one call per point, with and without measured
tables, and the same for the closed-loop serving estimate. Prints points per second and the
speed-up; no absolute timing is asserted anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from bench.accuracy import architectures
from servesize.calibration import load_measured_profile, reference_gpu
from servesize.core.steptime import StepTimeModel, StepWork, build_step_model
from servesize.core.steptime.serving import closed_loop

VECTOR_POINTS = 200_000
SCALAR_POINTS = 500


def _rate(points: int, run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return points / (time.perf_counter() - start)


def _work(rng: np.random.Generator, n: int) -> StepWork:
    prefill = rng.integers(0, 4096, n).astype(np.float64)
    return StepWork.mixed(
        prefill_tokens=prefill,
        prefill_sequences=np.where(prefill > 0, 1.0, 0.0),
        prefill_cached_tokens=rng.integers(0, 8192, n),
        decode_sequences=rng.integers(1, 256, n),
        decode_context_tokens=rng.integers(16, 16_384, n),
    )


def _step_rates(model: StepTimeModel, rng: np.random.Generator) -> tuple[float, float]:
    big = _work(rng, VECTOR_POINTS)
    small = _work(rng, SCALAR_POINTS)
    vector = _rate(VECTOR_POINTS, lambda: model.step_time(big))
    scalar = _rate(
        SCALAR_POINTS, lambda: [model.step_time(small[i : i + 1]) for i in range(SCALAR_POINTS)]
    )
    return vector, scalar


def _serving_rates(model: StepTimeModel, rng: np.random.Generator) -> tuple[float, float]:
    n_vec, n_loop = 2000, 50
    c = rng.integers(1, 128, n_vec)
    p = rng.integers(128, 8192, n_vec)
    o = rng.integers(16, 2048, n_vec)
    vector = _rate(
        n_vec, lambda: closed_loop(model, concurrency=c, input_tokens=p, output_tokens=o)
    )
    scalar = _rate(
        n_loop,
        lambda: [
            closed_loop(model, concurrency=c[i], input_tokens=p[i], output_tokens=o[i])
            for i in range(n_loop)
        ],
    )
    return vector, scalar


def main() -> None:
    rng = np.random.default_rng(0)
    arch = architectures()["meta-llama/Llama-3.1-8B"]
    gpu = reference_gpu("H100 SXM")
    measured = load_measured_profile()
    for label, tables in (("datasheet", None), ("measured tables", measured)):
        model = build_step_model(arch, gpu, engine="vllm", measured=tables)
        vector, scalar = _step_rates(model, rng)
        print(
            f"step_time   [{label:>15}]  vectorised {vector:12,.0f} points/s   "
            f"scalar loop {scalar:10,.0f} points/s   speed-up {vector / scalar:7.0f}x"
        )
        vector, scalar = _serving_rates(model, rng)
        print(
            f"closed_loop [{label:>15}]  vectorised {vector:12,.0f} points/s   "
            f"scalar loop {scalar:10,.0f} points/s   speed-up {vector / scalar:7.0f}x"
        )


if __name__ == "__main__":
    main()
