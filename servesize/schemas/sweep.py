"""A sweep (``POST /v1/jobs`` with ``kind: sweep``): one sizing per combination of models, GPUs,
engines, traffic forecasts and SLOs, a table of the answers and the cheapest fleet."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.models import ModelRef
from servesize.schemas.sizing import CandidatesIn, Engine, SizingResponse, SizingTrafficIn
from servesize.schemas.slo import SloIn

MAX_COMBINATIONS = 256
"""Sizings one sweep may run (each screens at most 512 candidates)."""


class _In(RequestModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


class SweepCombinationIn(_In):
    """One combination of a list sweep: an index into each axis."""

    model: int = Field(default=0, ge=0, examples=[0])
    """Index into ``models``."""
    hardware: int = Field(default=0, ge=0, examples=[1])
    """Index into ``hardware``."""
    engine: int = Field(default=0, ge=0, examples=[0])
    """Index into ``engines``."""
    traffic: int = Field(default=0, ge=0, examples=[2])
    """Index into ``traffic``."""
    slo: int = Field(default=0, ge=0, examples=[0])
    """Index into ``slos``."""


class SweepRequest(_In):
    """Axes of the sweep; each combination is the ``POST /v1/sizing`` body with that model,
    that one GPU, that one engine, that forecast and that SLO, and the shared rest."""

    models: list[ModelRef] = Field(min_length=1, max_length=16)
    """Catalogue or custom model ids, or inline ``{"hf_config": {...}}``."""
    hardware: list[str] = Field(min_length=1, max_length=32, examples=[["h100-sxm", "l40s"]])
    """Hardware profile ids: each combination sizes on one of them."""
    engines: list[Engine] = Field(default=["vllm"], min_length=1, max_length=3)
    """Serving engines: each combination sizes for one of them."""
    traffic: list[SizingTrafficIn] = Field(min_length=1, max_length=16)
    """Forecasts (e.g. this quarter's and next quarter's rates); seeds travel with them."""
    slos: list[SloIn] = Field(min_length=1, max_length=8)
    """Objectives."""
    candidates: CandidatesIn = Field(default_factory=CandidatesIn)
    """The knob grids every combination searches; ``hardware`` and ``engines`` must be left
    out (the axes above set them)."""
    prices: dict[str, float] = Field(default_factory=dict)
    """Price per GPU-hour by hardware id (as in ``/v1/sizing``)."""
    headroom: float = Field(default=0.85, gt=0, le=1)
    verify_top: int = Field(default=3, ge=0, le=10)
    """Plans verified by simulation in each combination."""
    calibrated: bool = True
    combinations: list[SweepCombinationIn] | None = Field(
        default=None, min_length=1, max_length=MAX_COMBINATIONS
    )
    """A list sweep: only these combinations. Null: the full grid (models × hardware ×
    engines × traffic × slos), at most 256."""


SweepStatus = Literal["planned", "no-plan", "failed"]


class SweepRowOut(ResponseModel):
    """One combination: its best plan (the sizing's rank 1), or why there is none."""

    index: int
    model: str
    hardware: str
    engine: str
    traffic: int
    """Index into the request's ``traffic``."""
    rate_per_s: float
    slo: int
    """Index into the request's ``slos``."""
    status: SweepStatus
    """``planned``: a plan meets the SLO; ``no-plan``: the search found none (``reason``);
    ``failed``: the sizing refused the combination (``reason``, the problem's detail)."""
    plans_found: int | None
    tensor_parallel: int | None
    gpus_per_replica: int | None
    replicas: int | None
    total_gpus: int | None
    cost_per_hour: float | None
    cost_per_million_output_tokens: float | None
    headroom: float | None
    """Spare capacity of the best plan at the target rate (the sizing plan's ``headroom``)."""
    utilization: float | None
    binding: str | None
    """The constraint that binds the best plan."""
    verified: bool | None
    reason: str | None


class SweepResultOut(ResponseModel):
    """One combination's full answer: the ``/v1/sizing`` response, or its problem."""

    index: int
    request: dict[str, Any]
    """The ``POST /v1/sizing`` body of this combination."""
    sizing: SizingResponse | None
    problem: dict[str, Any] | None


class FleetPickOut(ResponseModel):
    model: str
    row: int
    """Index of the cheapest row for this model."""
    hardware: str
    engine: str
    total_gpus: int
    cost_per_hour: float | None


class SweepFleetOut(ResponseModel):
    """The cheapest fleet for one forecast and SLO: for each model its cheapest row over the
    GPUs and engines swept (lowest cost per hour, unpriced last, then fewest GPUs)."""

    traffic: int
    slo: int
    picks: list[FleetPickOut]
    unserved: list[str]
    """Models with no plan under this forecast and SLO."""
    total_gpus: int
    cost_per_hour: float | None
    """Sum of the picks' costs; null when a pick is unpriced."""
    complete: bool
    """Every model swept has a pick."""


class SweepSummaryOut(ResponseModel):
    combinations: int
    planned: int
    no_plan: int
    failed: int
    fleets: list[SweepFleetOut]


class SweepResponse(ResponseModel):
    """The table (one row per combination), every sizing's answer and the cheapest fleets."""

    rows: list[SweepRowOut]
    results: list[SweepResultOut]
    summary: SweepSummaryOut
