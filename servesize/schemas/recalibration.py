"""``/v1/hardware/{id}/recalibration``: refitting an engine's constants from stored endpoint
benchmarks of one hardware profile (docs/deployment.md "Recalibration")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.memory import DeploymentIn, Engine

__all__ = [
    "CalibrationOut",
    "CalibrationsOut",
    "LevelFitOut",
    "MetricErrorsOut",
    "RecalibrationOut",
    "RecalibrationRequest",
]


class RecalibrationRequest(RequestModel):
    engine: Engine = Field(examples=["vllm"])
    """The engine whose constants are refitted; benchmarks that name another engine are
    skipped."""
    model: str = Field(min_length=1, max_length=255, examples=["meta-llama/Llama-3.1-8B"])
    """The model the benchmarks measured (catalogue or custom id)."""
    # The id column is INTEGER: PostgreSQL refuses a larger parameter.
    measurement_ids: list[Annotated[int, Field(ge=1, le=2**31 - 1)]] = Field(
        min_length=1, max_length=64
    )
    """Measurements of this profile whose endpoint benchmarks of ``model`` are fitted."""
    deployment: DeploymentIn | None = None
    """How the benchmarked server ran (TP, dtypes, ...); its ``engine`` is replaced by
    ``engine``. Null: the engine's defaults on one GPU."""
    apply: bool = False
    """False: preview only. True: store the fitted constants for this profile and engine
    (scope ``profiles:write``, ``If-Match``); later predictions use and name them."""


class MetricErrorsOut(ResponseModel):
    metric: str
    levels: int
    median_abs_error: float
    """Median of ``|predicted / measured − 1|``."""
    mape: float
    """Mean of ``|predicted / measured − 1|`` (a fraction)."""


class LevelFitOut(ResponseModel):
    measurement_id: int
    benchmark_index: int
    level_index: int
    load: str
    """``concurrency=C`` or ``rate=R/s``."""
    input_tokens: int
    output_tokens: int
    measured_ttft_s: float | None
    measured_tpot_s: float | None
    before_ttft_s: float
    before_tpot_s: float
    after_ttft_s: float
    after_tpot_s: float


class RecalibrationOut(ResponseModel):
    profile_id: str
    engine: str
    model: str
    applied: bool
    calibration_id: str | None
    """The stored calibration's id when ``apply`` was true."""
    created_at: datetime | None
    fitted_before: dict[str, float]
    """The fitted parameters at the shipped constants (``step_time_scale`` 1)."""
    fitted_after: dict[str, float]
    constants_before: dict[str, float]
    """The engine constants predictions use now (shipped) ..."""
    constants_after: dict[str, float]
    """... and with the fit."""
    errors_before: list[MetricErrorsOut]
    errors_after: list[MetricErrorsOut]
    levels: list[LevelFitOut]
    skipped: list[str]
    """Benchmarks and levels not fitted, with the reason."""
    notes: list[str]


class CalibrationOut(ResponseModel):
    id: str
    profile_id: str
    engine: str
    model: str
    created_at: datetime
    measurement_ids: list[int]
    fitted: dict[str, float]
    constants: dict[str, float]
    active: bool
    """True for the newest of its engine: the one predictions use."""


class CalibrationsOut(ResponseModel):
    items: list[CalibrationOut]
