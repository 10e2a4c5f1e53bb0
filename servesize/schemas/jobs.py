"""Background jobs: a planning request submitted now, its answer read later."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.simulate import SimulateRequest
from servesize.schemas.sizing import SizingRequest
from servesize.schemas.slo import SloCapacityRequest
from servesize.schemas.sweep import SweepRequest

JobKind = Literal["sizing", "capacity", "simulate", "sweep"]
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JOB_STATES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "cancelled")

SYNC_PATHS: dict[str, str] = {
    "sizing": "/v1/sizing",
    "capacity": "/v1/slo/capacity",
    "simulate": "/v1/simulate",
}
"""The synchronous endpoint whose body and answer each kind shares."""


class SizingJobIn(RequestModel):
    kind: Literal["sizing"]
    request: SizingRequest = Field(description="A ``POST /v1/sizing`` body.")
    manifests: bool = Field(
        default=False,
        description="Also return each ranked plan's manifests (as ``POST /v1/sizing"
        "?manifests=true``).",
    )


class CapacityJobIn(RequestModel):
    kind: Literal["capacity"]
    request: SloCapacityRequest = Field(description="A ``POST /v1/slo/capacity`` body.")


class SimulateJobIn(RequestModel):
    kind: Literal["simulate"]
    request: SimulateRequest = Field(description="A ``POST /v1/simulate`` body.")


class SweepJobIn(RequestModel):
    kind: Literal["sweep"]
    request: SweepRequest = Field(
        description="Axes of models, GPUs, engines, forecasts and SLOs; one sizing each."
    )


JobIn = Annotated[
    SizingJobIn | CapacityJobIn | SimulateJobIn | SweepJobIn, Field(discriminator="kind")
]


class ProgressOut(ResponseModel):
    done: int
    total: int | None
    eta_s: float | None = None
    """Seconds left at the pace so far (elapsed × (total − done) / done) while running."""


class JobOut(ResponseModel):
    """A job's state; ``result`` is exactly the synchronous endpoint's response once
    ``succeeded``, ``error`` an RFC 9457 problem once ``failed``."""

    id: str = Field(examples=["job_3f9a0c1d2e4b5a69"])
    kind: JobKind
    state: JobState
    progress: ProgressOut | None = Field(
        description="Units of work done / total where the kind reports them; else null."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: dict[str, Any] | None = Field(
        description="The body the synchronous endpoint (``/v1/sizing``, ``/v1/slo/capacity``, "
        "``/v1/simulate``) would have answered with; a sweep's is its table, every "
        "combination's sizing and the cheapest fleets."
    )
    error: dict[str, Any] | None


class JobSummary(ResponseModel):
    """A job in a listing (no request or result)."""

    id: str
    kind: JobKind
    state: JobState
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
