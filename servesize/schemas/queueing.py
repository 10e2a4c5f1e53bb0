"""Analytic queueing schemas (Tier A, generic): Little's law, M/M/c, M/G/1, G/G/c."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.memory import DeploymentIn, HardwareRef
from servesize.schemas.models import ModelRef

Percentile = Annotated[float, Field(gt=0, lt=1)]


class LittlesLawIn(RequestModel):
    """Give two of the three; the third is computed (``L = λ·W``)."""

    model: Literal["littles_law"]
    arrival_rate_per_s: float | None = Field(default=None, ge=0, examples=[10.0])
    residence_time_s: float | None = Field(default=None, ge=0, examples=[2.0])
    in_flight: float | None = Field(default=None, ge=0, examples=[20.0])

    @model_validator(mode="after")
    def _two_of_three(self) -> LittlesLawIn:
        given = [self.arrival_rate_per_s, self.residence_time_s, self.in_flight]
        if sum(v is not None for v in given) != 2:
            raise ValueError(
                "give exactly two of arrival_rate_per_s, residence_time_s and in_flight"
            )
        return self


class QueueIn(RequestModel):
    """A queue with ``servers`` identical servers fed by one arrival stream.

    ``mmc``: Poisson arrivals, exponential service (exact). ``mg1``: Poisson arrivals, general
    service with squared coefficient of variation ``service_scv`` (exact means). ``ggc``: general
    arrivals and service (Kingman / Allen–Cunneen approximations of the mean wait).
    """

    model: Literal["mmc", "mg1", "ggc"] = Field(examples=["mmc"])
    arrival_rate_per_s: float = Field(gt=0, le=1e9, examples=[8.0])
    service_time_s: float = Field(gt=0, le=1e6, examples=[1.0])
    servers: int = Field(default=1, ge=1, le=100_000, examples=[10])
    service_scv: float = Field(default=1.0, ge=0, le=1e4, examples=[0.0, 1.0])
    arrival_scv: float = Field(default=1.0, ge=0, le=1e4, examples=[1.0, 4.0])
    percentiles: list[Percentile] = Field(
        default=[0.5, 0.9, 0.95, 0.99], max_length=20, examples=[[0.5, 0.95]]
    )
    """Quantiles in (0, 1), each at most once; keyed in the response as ``p`` and the
    percentage (``0.999`` → ``p99.9``)."""

    @field_validator("percentiles")
    @classmethod
    def _distinct(cls, values: list[float]) -> list[float]:
        if len(set(values)) != len(values):
            raise ValueError("each percentile may appear only once")
        return values

    @model_validator(mode="after")
    def _single_server_mg1(self) -> QueueIn:
        if self.model == "mg1" and self.servers != 1:
            raise ValueError("mg1 has one server; use ggc for several")
        return self


class ContinuousBatchingIn(RequestModel):
    """Model mode: Poisson arrivals at ``arrival_rate_per_s`` of fixed-length requests to one
    engine replica, solved as the mean-field step-time fixed point (saturation rate, resident
    batch, TPOT, prefill wait, TTFT mean and percentiles). ``llm`` names the model."""

    model: Literal["continuous_batching"]
    llm: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    hardware: HardwareRef = Field(examples=["h100-sxm"])
    deployment: DeploymentIn = Field(
        default_factory=DeploymentIn, examples=[{"tensor_parallel_size": 1}]
    )
    arrival_rate_per_s: float = Field(gt=0, le=1e6, examples=[5.0])
    input_tokens: int = Field(default=1024, ge=1, le=2**24, examples=[1024])
    output_tokens: int = Field(default=256, ge=1, le=2**24, examples=[256])


QueueingRequest = Annotated[
    LittlesLawIn | QueueIn | ContinuousBatchingIn, Field(discriminator="model")
]


class ValidityOut(ResponseModel):
    model: str
    method: str
    exact: bool
    percentiles: str
    assumptions: list[str]
    caveats: list[str]


class QueueingResponse(ResponseModel):
    """Means in seconds; percentiles keyed ``p50``, ``p95``, ... where the model gives them."""

    model: str
    arrival_rate_per_s: float
    residence_time_s: float | None = None
    in_flight: float | None = None
    solved_for: str | None = None
    utilization: float | None = None
    stable: bool | None = None
    saturation_rate_per_s: float | None = None
    wait_probability: float | None = None
    mean_wait_s: float | None = None
    mean_response_s: float | None = None
    mean_queue_length: float | None = None
    mean_in_system: float | None = None
    wait_percentiles_s: dict[str, float] = Field(default_factory=dict)
    response_percentiles_s: dict[str, float] = Field(default_factory=dict)
    ttft_s: dict[str, float] = Field(default_factory=dict)
    """Model mode: TTFT ``mean``, ``p50``, ``p95``, ``p99`` (includes the request overhead)."""
    tpot_s: float | None = None
    e2e_mean_s: float | None = None
    throughput_output_tokens_per_s: float | None = None
    validity: ValidityOut
