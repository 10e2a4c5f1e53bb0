"""Recalibration of an engine's constants on one hardware profile from measured serving levels.

Two constants are fitted, because a handful of endpoint-benchmark levels cannot separate more
and because each moves one measured metric first (docs/modeling.md §5.9):

* ``request_overhead_s``: the per-request time outside the step loop (HTTP, tokenisation,
  first-token streaming). It adds to every TTFT and to no TPOT.
* ``step_time_scale``: one factor on a step's engine-side time — ``step_overhead_s``,
  ``eager_overhead_per_layer_s``, ``compute_slowdown`` and ``memory_slowdown`` together — so a
  deployment whose GPU, clocks or engine build runs every step slower or faster than the tables
  is one number. It sets TPOT (≈ one decode step) and the prefill part of TTFT.

The fit is bounded least squares (:func:`scipy.optimize.least_squares`, ``trf``) on the log
errors ``ln(predicted / measured)`` of every measured mean TTFT and TPOT, so a 10 % miss weighs
the same at 5 ms as at 500 ms. It needs at least as many levels as constants; with fewer the
problem is under-determined and :class:`RecalibrationError` is raised.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from servesize.core.steptime.engines import EngineProfile

__all__ = [
    "RECALIBRATION_BOUNDS",
    "LevelPrediction",
    "MeasuredLevel",
    "MetricErrors",
    "Recalibration",
    "RecalibrationError",
    "apply_recalibration",
    "fit_recalibration",
]

RECALIBRATION_BOUNDS: dict[str, tuple[float, float]] = {
    "request_overhead_s": (0.0, 2.0),
    "step_time_scale": (0.25, 4.0),
}
"""Physical bounds: no negative overhead and at most 2 s per request; a step between 4× faster
and 4× slower than the tables predict (beyond that the profile or the model is wrong, not a
constant)."""

METRICS = ("ttft_s", "tpot_s")

Predictor = Callable[[Mapping[str, float]], Sequence[tuple[float, float]]]
"""Constants → predicted (mean TTFT, mean TPOT) of every level, in the levels' order."""


class RecalibrationError(ValueError):
    """The measurements cannot determine the constants (too few levels or metrics)."""


@dataclass(frozen=True, slots=True)
class MeasuredLevel:
    """One measured load level: mean TTFT and mean TPOT (either may be missing)."""

    label: str
    ttft_s: float | None
    tpot_s: float | None


@dataclass(frozen=True, slots=True)
class LevelPrediction:
    label: str
    measured_ttft_s: float | None
    measured_tpot_s: float | None
    before_ttft_s: float
    before_tpot_s: float
    after_ttft_s: float
    after_tpot_s: float


@dataclass(frozen=True, slots=True)
class MetricErrors:
    """Errors of one metric over the levels: median of ``|pred/meas − 1|`` and its mean (MAPE),
    both as fractions."""

    metric: str
    levels: int
    median_abs_error: float
    mape: float


@dataclass(frozen=True, slots=True)
class Recalibration:
    constants_before: dict[str, float]
    constants_after: dict[str, float]
    errors_before: tuple[MetricErrors, ...]
    errors_after: tuple[MetricErrors, ...]
    levels: tuple[LevelPrediction, ...]
    cost_before: float
    """½ Σ (log error)² at the start."""
    cost_after: float
    evaluations: int


def apply_recalibration(profile: EngineProfile, constants: Mapping[str, float]) -> EngineProfile:
    """``profile`` with ``request_overhead_s`` set and ``step_time_scale`` applied to its step
    constants (module docstring); unknown names are refused.

    >>> from servesize.core.steptime.engines import engine_profile
    >>> p = apply_recalibration(engine_profile("vllm"), {"step_time_scale": 2.0})
    >>> round(p.step_overhead_s * 1e3, 2), round(p.memory_slowdown, 3)
    (4.34, 1.834)
    """
    unknown = set(constants) - set(RECALIBRATION_BOUNDS)
    if unknown:
        known = list(RECALIBRATION_BOUNDS)
        raise ValueError(f"unknown constants {sorted(unknown)}; known: {known}")
    s = float(constants.get("step_time_scale", 1.0))
    overhead = float(constants.get("request_overhead_s", profile.request_overhead_s))
    return replace(
        profile,
        request_overhead_s=overhead,
        step_overhead_s=profile.step_overhead_s * s,
        eager_overhead_per_layer_s=profile.eager_overhead_per_layer_s * s,
        compute_slowdown=profile.compute_slowdown * s,
        memory_slowdown=profile.memory_slowdown * s,
    )


def _errors(
    measured: Sequence[MeasuredLevel], predicted: Sequence[tuple[float, float]]
) -> tuple[MetricErrors, ...]:
    out = []
    for i, metric in enumerate(METRICS):
        rel = [
            abs(pred[i] / m - 1.0)
            for lv, pred in zip(measured, predicted, strict=True)
            if (m := getattr(lv, metric)) is not None
        ]
        if rel:
            out.append(
                MetricErrors(
                    metric=metric,
                    levels=len(rel),
                    median_abs_error=float(np.median(rel)),
                    mape=float(np.mean(rel)),
                )
            )
    return tuple(out)


def fit_recalibration(
    measured: Sequence[MeasuredLevel],
    predict: Predictor,
    start: Mapping[str, float],
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
) -> Recalibration:
    """Fit the constants named in ``start`` (their starting values) so that ``predict`` matches
    ``measured`` (module docstring). ``bounds`` default to :data:`RECALIBRATION_BOUNDS`.

    Raises :class:`RecalibrationError` with fewer levels, or fewer measured values, than
    constants, and for a non-positive measured value.
    """
    names = list(start)
    limits = dict(RECALIBRATION_BOUNDS if bounds is None else bounds)
    if not names or any(n not in limits for n in names):
        raise RecalibrationError(f"constants {names} need bounds; known: {sorted(limits)}")
    values = [getattr(lv, m) for lv in measured for m in METRICS if getattr(lv, m) is not None]
    if len(measured) < len(names) or len(values) < len(names):
        raise RecalibrationError(
            f"{len(measured)} measured levels ({len(values)} values) cannot determine "
            f"{len(names)} constants ({', '.join(names)}): give at least {len(names)} levels"
        )
    if any(not (math.isfinite(v) and v > 0) for v in values):
        raise RecalibrationError("every measured TTFT and TPOT must be a positive number")
    lo = np.array([limits[n][0] for n in names], dtype=np.float64)
    hi = np.array([limits[n][1] for n in names], dtype=np.float64)
    x0 = np.clip(np.array([float(start[n]) for n in names]), lo, hi)

    def as_constants(x: np.ndarray) -> dict[str, float]:
        return {n: float(v) for n, v in zip(names, x, strict=True)}

    def residuals(x: np.ndarray) -> np.ndarray:
        predicted = predict(as_constants(x))
        out = []
        for lv, pred in zip(measured, predicted, strict=True):
            for i, metric in enumerate(METRICS):
                m = getattr(lv, metric)
                if m is not None:
                    out.append(math.log(max(pred[i], 1e-12) / m))
        return np.array(out, dtype=np.float64)

    r0 = residuals(x0)
    result = least_squares(
        residuals, x0, bounds=(lo, hi), method="trf", x_scale=np.maximum(hi - lo, 1e-9) / 10
    )
    before = list(predict(as_constants(x0)))
    after = list(predict(as_constants(result.x)))
    return Recalibration(
        constants_before=as_constants(x0),
        constants_after=as_constants(result.x),
        errors_before=_errors(measured, before),
        errors_after=_errors(measured, after),
        levels=tuple(
            LevelPrediction(
                label=lv.label,
                measured_ttft_s=lv.ttft_s,
                measured_tpot_s=lv.tpot_s,
                before_ttft_s=float(b[0]),
                before_tpot_s=float(b[1]),
                after_ttft_s=float(a[0]),
                after_tpot_s=float(a[1]),
            )
            for lv, b, a in zip(measured, before, after, strict=True)
        ),
        cost_before=float(0.5 * np.sum(r0**2)),
        cost_after=float(result.cost),
        evaluations=int(result.nfev),
    )
