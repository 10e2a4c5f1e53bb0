"""Saved plans (``GET /v1/plans/{id}``), their deployment artifacts and plan-vs-measured."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.measurements import EndpointBenchmark, EndpointLevel
from servesize.schemas.sizing import SizingResponse
from servesize.schemas.uncertainty import PredictionIntervalOut


class ProfileInputOut(ResponseModel):
    id: str
    version: int
    measurements: list[int]
    """Ids of the measurements read for the profile (newest first)."""


class PlanInputsOut(ResponseModel):
    """Everything the stored answer is a function of."""

    model_id: str
    model_config_sha256: str
    """SHA-256 of the resolved ``config.json`` as canonical JSON (sorted keys)."""
    hardware: list[ProfileInputOut]
    prices: dict[str, dict[str, Any]]
    """Per profile: ``usd_per_gpu_hour``, ``origin`` (request, profile, sheet), source, date."""
    service_version: str
    request: dict[str, Any]
    """The request body as validated, defaults filled in."""


class SavedPlanOut(ResponseModel):
    id: str
    created_at: datetime
    owner_key_id: str | None
    """Public id of the API key that stored the plan."""
    inputs: PlanInputsOut
    answer: SizingResponse


class VerifyRequest(RequestModel):
    """Which plan to check and against which measured benchmark: a stored one (by measurement id
    and index) or one sent inline; exactly one of ``measurement_id`` and ``benchmark``."""

    rank: int = Field(default=1, ge=1, le=1000, examples=[1])
    measurement_id: int | None = Field(default=None, ge=1, examples=[12])
    """A measurement uploaded to the plan's hardware profile."""
    benchmark_index: int = Field(default=0, ge=0, le=63, examples=[0])
    """Which of the measurement's ``endpoint_benchmarks``."""
    benchmark: EndpointBenchmark | None = None
    """An endpoint benchmark sent inline (the output of ``servesize-agent ingest``)."""
    level_index: int | None = Field(default=None, ge=0, le=255, examples=[0])
    """The load level to compare; default: the open-loop level nearest the plan's rate."""


class MetricOut(ResponseModel):
    name: str
    predicted: float | None
    measured: float | None
    ratio: float | None
    """``measured / predicted``."""
    interval: PredictionIntervalOut | None
    within_interval: bool | None


class TargetCheckOut(ResponseModel):
    name: str
    limit: float
    measured: float | None
    held: bool | None


class SloHeldOut(ResponseModel):
    held: bool | None
    """False if any target missed; null if none missed but one cannot be checked from summary
    statistics (attainment)."""
    checks: list[TargetCheckOut]


class VerifyResponse(ResponseModel):
    plan_id: str
    rank: int
    benchmark_source: Literal["stored", "inline"]
    measurement_id: int | None
    benchmark_index: int | None
    level_index: int
    level: EndpointLevel
    predicted_by: Literal["tier_a", "simulation"]
    metrics: list[MetricOut]
    slo: SloHeldOut
    notes: list[str]
    verification_id: int | None = None
    """The stored copy of this answer (``GET /v1/plans/{id}/verifications``)."""
    verified_at: datetime | None = None


class VerificationsOut(ResponseModel):
    plan_id: str
    items: list[VerifyResponse]
    """Every stored verify answer of the plan, oldest first."""


class MetricAccuracyOut(ResponseModel):
    metric: str
    """``ttft_s.p50``, ``ttft_s.p95``, ``tpot_s.p50``, ``tpot_s.p95``."""
    count: int
    """Verifications with both a prediction and a measurement of the metric."""
    median_ratio: float | None
    """Median of measured / predicted (1 is exact, above 1 the plan was optimistic)."""
    mape_percent: float | None
    """Mean of |measured − predicted| / measured, in percent."""


class AccuracyGroupOut(ResponseModel):
    engine: str
    hardware: str
    verifications: int
    metrics: list[MetricAccuracyOut]


class AccuracyOut(ResponseModel):
    """Predicted against measured over every stored verification, per engine and hardware."""

    items: list[AccuracyGroupOut]
    notes: list[str]


class StoredBenchmarkOut(ResponseModel):
    measurement_id: int
    benchmark_index: int
    hardware: str
    measured_at: datetime
    model: str
    model_matches: bool
    """Whether the benchmark's model is the plan's."""
    engine: str | None
    engine_version: str | None
    source: str
    levels: int


class StoredBenchmarksOut(ResponseModel):
    plan_id: str
    items: list[StoredBenchmarkOut]
