"""The accuracy report: serving errors per variant, engine and model, and kernel errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from servesize.calibration.cases import resolve_cases
from servesize.calibration.evaluation import (
    ErrorPair,
    ServingPredictions,
    compile_models,
    evaluate_serving,
    serving_errors,
)
from servesize.calibration.kernel_accuracy import KernelErrors, kernel_accuracy
from servesize.calibration.serving_rows import ServingMeasurement
from servesize.core.architecture import Architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import EngineProfile, MeasuredProfile
from servesize.core.steptime.engines import SIMULATOR_ENGINE_PROFILES

__all__ = ["CALIBRATION_MODELS", "VARIANTS", "AccuracyReport", "accuracy_report"]

CALIBRATION_MODELS: tuple[str, ...] = (
    "Qwen/Qwen3-235B-A22B",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B",
    "openai/gpt-oss-120b",
)
"""Catalogue models whose rows the engine constants were fitted on (the CI guard's set)."""

VARIANTS: dict[str, tuple[bool, bool]] = {
    "roofline": (False, False),
    "measured": (True, False),
    "datasheet+constants": (False, True),
    "calibrated": (True, True),
}
"""Prediction variants: ``(uses measured kernel tables, uses fitted engine constants)``.
``roofline`` is the datasheet model before calibration, ``measured`` adds the kernel tables,
``calibrated`` adds the fitted per-engine constants (after calibration);
``datasheet+constants`` keeps the fitted constants but drops the tables, to show what the
measured profile adds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AccuracyReport:
    """Everything ``bench/accuracy.py`` prints and the CI guard checks."""

    serving: dict[str, dict[str, ErrorPair]]
    """``{variant: {"engine <name>" | "model <engine> <id>" | "all": (ttft, tpot)}}`` over the
    rows the steady-state model applies to."""
    capacity_limited: dict[str, ErrorPair]
    """Calibrated errors on the rows whose KV cache cannot hold all ``C`` requests."""
    kernels: KernelErrors
    excluded: tuple[tuple[ServingMeasurement, str], ...]
    predicted_rows: int


def _grouped(predictions: ServingPredictions) -> dict[str, ErrorPair]:
    out = {
        f"engine {k}": v
        for k, v in serving_errors(predictions, key=lambda c: c.row.engine).items()
        if k != "all"
    }
    out.update(
        {
            f"model {k}": v
            for k, v in serving_errors(
                predictions, key=lambda c: f"{c.row.engine} {c.model_id}"
            ).items()
        }
    )
    out["all"] = out.pop("model all")
    return out


def accuracy_report(
    rows: Sequence[ServingMeasurement],
    architectures: Mapping[str, Architecture],
    hardware: HardwareSpec,
    measured: MeasuredProfile,
    *,
    models: Iterable[str] | None = None,
    profiles: Mapping[str, EngineProfile] | None = None,
) -> AccuracyReport:
    """Serving errors per variant, engine and model, and kernel-table errors.

    ``models`` restricts the serving rows to those catalogue ids (default: every catalogue
    model the rows name); ``profiles`` replaces the calibrated engine constants (for refits).
    """
    keep = set(models) if models is not None else set(architectures)
    usable = {k: v for k, v in architectures.items() if k in keep}
    cases, excluded = resolve_cases(rows, usable, hardware)
    serving: dict[str, dict[str, ErrorPair]] = {}
    limited: dict[str, ErrorPair] = {}
    for variant, (tables, calibrated) in VARIANTS.items():
        compiled = compile_models(
            cases, usable, hardware, measured=measured if tables else None, calibrated=calibrated
        )
        # One set of constants for both tiers: the simulator's, unless a refit is passed.
        override = (profiles or SIMULATOR_ENGINE_PROFILES) if calibrated else None
        predictions = evaluate_serving(cases, compiled, override)
        serving[variant] = _grouped(predictions.subset(~predictions.capacity_limited))
        if calibrated:
            limited = serving_errors(
                predictions.subset(predictions.capacity_limited), key=lambda c: c.row.engine
            )
    return AccuracyReport(
        serving=serving,
        capacity_limited=limited,
        kernels=kernel_accuracy(measured, hardware),
        excluded=tuple(excluded),
        predicted_rows=len(cases),
    )
