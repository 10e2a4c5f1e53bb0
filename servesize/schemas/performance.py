"""Step-time and steady-state performance schemas."""

from __future__ import annotations

from pydantic import Field, model_validator

from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.energy import EnergyOut
from servesize.schemas.memory import AppliedDefaultOut, DeploymentIn, HardwareRef
from servesize.schemas.models import ModelRef
from servesize.schemas.prefix import PrefixCacheOut, PrefixIn
from servesize.schemas.sessions import SessionMeansOut, SessionsIn
from servesize.schemas.speculative import SpeculativeOut
from servesize.schemas.uncertainty import PredictionIntervalOut


class WorkloadPoint(RequestModel):
    """A closed loop of ``concurrency`` clients sending fixed-length requests back to back."""

    concurrency: int = Field(default=1, ge=1, le=100_000)
    input_tokens: int = Field(default=1024, ge=1, le=2**24)
    output_tokens: int = Field(default=256, ge=1, le=2**24)
    prefix: PrefixIn | None = None
    """Shared prompt heads a prefix cache reuses (unset: every prompt unique)."""
    sessions: SessionsIn | None = None
    """Multi-turn sessions: the point takes their mean prompt (history included) and output
    lengths, and the history as the prefix cache's hit rate (``sessions`` in the answer)."""

    @model_validator(mode="after")
    def _sessions_alone(self) -> WorkloadPoint:
        if self.sessions is not None:
            clash = {"input_tokens", "output_tokens", "prefix"} & self.model_fields_set
            if clash:
                raise ValueError(f"with sessions leave out {', '.join(sorted(clash))}")
        return self


class PerformanceRequest(RequestModel):
    model: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    hardware: HardwareRef = Field(examples=["h100-sxm"])
    deployment: DeploymentIn = Field(default_factory=DeploymentIn)
    workload: WorkloadPoint = Field(default_factory=WorkloadPoint)
    use_measurements: bool = True
    """Use measured kernel tables when the profile has them (else datasheet roofline)."""
    calibrated: bool = True
    """Apply the per-engine constants fitted on measured serving data."""


class PhaseBound(ResponseModel):
    prefill: str
    decode: str


class ArithmeticIntensity(ResponseModel):
    """FLOPs per HBM byte; compare with ``ridge_point_flops_per_byte``."""

    prefill: float
    decode: float


class PerformanceResponse(ResponseModel):
    """Steady state of the closed loop, averaged over requests, as a benchmark at that
    concurrency reports it (TPOT = (E2E − TTFT)/(N − 1))."""

    model: str
    hardware: str
    engine: str
    concurrency: int
    input_tokens: int
    output_tokens: int
    prefill_time_s: float
    """One prompt alone on an idle engine (engine time; with ``workload.prefix``, its uncached
    part, the cache warm)."""
    decode_step_time_s: float
    """A decode-only step with every resident sequence decoding."""
    ttft_zero_load_s: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    throughput_output_tokens_per_s: float
    throughput_requests_per_s: float
    resident_sequences: float
    admission_wait_s: float
    bound: PhaseBound
    arithmetic_intensity: ArithmeticIntensity
    ridge_point_flops_per_byte: float
    kv_capacity_tokens: int
    weights_bytes_per_gpu: int
    sources: dict[str, str]
    """Which numbers were measured and which defaulted."""
    defaults_applied: list[AppliedDefaultOut]
    warnings: list[str]
    ttft_s_interval: PredictionIntervalOut | None = None
    """Prediction interval of ``ttft_s`` (out-of-sample residuals); null without residuals."""
    tpot_s_interval: PredictionIntervalOut | None = None
    e2e_s_interval: PredictionIntervalOut | None = None
    throughput_output_tokens_per_s_interval: PredictionIntervalOut | None = None
    throughput_requests_per_s_interval: PredictionIntervalOut | None = None
    prefix_cache: PrefixCacheOut | None = None
    """Prefix-cache hits and the KV blocks they hold (null without ``workload.prefix`` or with
    ``enable_prefix_caching`` off)."""
    energy: EnergyOut | None = None
    """Board power and energy per request and per million output tokens at this load (null
    when the profile has neither a TDP nor measured power)."""
    sessions: SessionMeansOut | None = None
    """The per-request means ``workload.sessions`` stood for (null without sessions)."""
    speculative: SpeculativeOut | None = None
    """Speculative decoding's figures (null without ``deployment.speculative``): TPOT,
    throughput and E2E above already include it."""
