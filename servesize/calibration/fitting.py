"""Fit the handful of per-engine constants on measured serving rows.

Six constants per engine (never per model): CPU time per step, launch time per layer of an
eager step, per-request overhead, the compute and memory slowdowns of kernels inside a full
forward pass relative to the isolated tables, and the arrival clumping of closed-loop clients
(:class:`servesize.core.steptime.EngineProfile`). Nelder-Mead on their logarithms inside
physical bounds, minimising ``MAPE(TTFT) + MAPE(TPOT)`` over the engine's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
from scipy.optimize import minimize

from servesize.calibration.cases import Group, ServingCase
from servesize.calibration.evaluation import evaluate_serving
from servesize.core.steptime import EngineProfile, StepTimeModel, engine_profile
from servesize.core.steptime.engines import FITTED_FIELDS

__all__ = ["FITTED_BOUNDS", "fit_engine_constants"]

_FITTED = FITTED_FIELDS
FITTED_BOUNDS: dict[str, tuple[float, float]] = {
    "step_overhead_s": (1e-5, 0.05),
    "eager_overhead_per_layer_s": (1e-6, 2e-3),
    "request_overhead_s": (1e-4, 1.0),
    "compute_slowdown": (0.7, 2.0),
    "memory_slowdown": (0.7, 2.0),
    "arrival_clumping": (1e-3, 1.0),
}
"""Physical range of each fitted constant."""


def _with(profile: EngineProfile, names: Sequence[str], values: np.ndarray) -> EngineProfile:
    """``profile`` with the named constants set to ``values``, marked calibrated."""
    fields: dict[str, float] = {name: float(v) for name, v in zip(names, values, strict=True)}
    return replace(profile, calibrated=True, **fields)  # type: ignore[arg-type]


def _fit(
    own: Sequence[ServingCase],
    base: EngineProfile,
    names: Sequence[str],
    predict: Callable[[EngineProfile], tuple[np.ndarray, np.ndarray]],
    *,
    simplex_step: float,
    max_evaluations: int,
    xatol: float,
    fatol: float,
) -> tuple[EngineProfile, float]:
    """Nelder-Mead on the logarithms of ``names`` inside :data:`FITTED_BOUNDS` (a penalty
    outside), minimising ``MAPE(TTFT) + MAPE(TPOT)`` of ``predict(profile)`` over ``own``."""
    ttft = np.array([c.row.ttft_s for c in own])
    tpot = np.array([c.row.tpot_s for c in own])
    low = np.log([FITTED_BOUNDS[name][0] for name in names])
    high = np.log([FITTED_BOUNDS[name][1] for name in names])
    x0 = np.clip(
        np.log([max(getattr(base, name), FITTED_BOUNDS[name][0]) for name in names]), low, high
    )
    simplex = np.vstack([x0] + [x0 + simplex_step * np.eye(len(x0))[i] for i in range(len(x0))])

    def profile_at(logs: np.ndarray) -> EngineProfile:
        return _with(base, names, np.exp(np.clip(logs, low, high)))

    def objective(logs: np.ndarray) -> float:
        penalty = float(np.sum(np.maximum(low - logs, 0) + np.maximum(logs - high, 0)))
        pred_ttft, pred_tpot = predict(profile_at(logs))
        error = np.mean(np.abs(pred_ttft - ttft) / ttft) + np.mean(np.abs(pred_tpot - tpot) / tpot)
        return float(error + 10.0 * penalty)

    result = minimize(
        objective,
        x0,
        method="Nelder-Mead",
        options={
            "maxfev": max_evaluations,
            "xatol": xatol,
            "fatol": fatol,
            "initial_simplex": simplex,
        },
    )
    return profile_at(result.x), float(result.fun)


def _own(cases: Sequence[ServingCase], engine: str) -> list[ServingCase]:
    own = [c for c in cases if c.row.engine == engine]
    if not own:
        raise ValueError(f"no cases for engine {engine!r}")
    return own


def fit_engine_constants(
    cases: Sequence[ServingCase],
    models: Mapping[Group, tuple[StepTimeModel, float]],
    *,
    engine: str,
    start: EngineProfile | None = None,
    max_evaluations: int = 400,
) -> tuple[EngineProfile, float]:
    """Fit the constants of ``FITTED_BOUNDS`` for ``engine`` on its cases (module docstring).

    Returns the fitted profile and the objective (a fraction, not percent).
    """
    own = _own(cases, engine)

    def predict(profile: EngineProfile) -> tuple[np.ndarray, np.ndarray]:
        pred = evaluate_serving(own, models, {engine: profile})
        return pred.ttft_s, pred.tpot_s

    return _fit(
        own,
        start or engine_profile(engine),
        _FITTED,
        predict,
        simplex_step=0.5,
        max_evaluations=max_evaluations,
        xatol=1e-3,
        fatol=1e-5,
    )


SIMULATOR_FITTED: tuple[str, ...] = (
    "step_overhead_s",
    "eager_overhead_per_layer_s",
    "request_overhead_s",
    "compute_slowdown",
    "memory_slowdown",
)
"""Constants refitted for the simulator; the clumping constant has no role there (the clients
are simulated)."""


def fit_simulator_constants(
    cases: Sequence[ServingCase],
    models: Mapping[Group, tuple[StepTimeModel, float]],
    *,
    engine: str,
    start: EngineProfile | None = None,
    max_evaluations: int = 60,
) -> tuple[EngineProfile, float]:
    """Fit :data:`SIMULATOR_FITTED` for ``engine`` through the simulator replaying each case's
    benchmark (:func:`servesize.calibration.simulated.simulate_cases`).

    Nelder-Mead on the logarithms inside :data:`FITTED_BOUNDS`, minimising
    ``MAPE(TTFT) + MAPE(TPOT)`` over the engine's cases, starting from ``start`` (default: the
    mean-field constants). Returns the profile and the objective (a fraction).
    """
    from servesize.calibration.simulated import simulate_cases

    own = _own(cases, engine)
    return _fit(
        own,
        start or engine_profile(engine),
        SIMULATOR_FITTED,
        lambda profile: simulate_cases(own, models, {engine: profile}),
        simplex_step=0.3,
        max_evaluations=max_evaluations,
        xatol=1e-2,
        fatol=1e-4,
    )
