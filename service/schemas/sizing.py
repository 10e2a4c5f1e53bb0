"""Request and response schemas of auto-sizing (``POST /v1/sizing``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from service.schemas.base import RequestModel, ResponseModel
from service.schemas.models import ModelRef
from service.schemas.simulate import LengthIn
from service.schemas.slo import SloIn

Engine = Literal["vllm", "sglang", "trtllm"]
MAX_GRID = 16


class SizingTrafficIn(RequestModel):
    """The forecast: open-loop arrivals at ``rate_per_s`` (the fleet's target)."""

    rate_per_s: float = Field(gt=0, le=1_000_000, examples=[50.0])
    process: Literal["poisson", "gamma", "constant"] = Field(default="poisson")
    cv: float = Field(default=1.0, gt=0, le=100)
    """Coefficient of variation of the gaps (``gamma`` only)."""
    input_tokens: LengthIn = Field(default=1024, examples=[1024])
    output_tokens: LengthIn = Field(default=256, examples=[256])
    timeout_s: float | None = Field(default=None, gt=0, le=86_400)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class CandidatesIn(RequestModel):
    """What the search may choose from; unset knob grids use small defaults."""

    hardware: list[str] | None = Field(default=None, max_length=64, examples=[["h100-sxm"]])
    """Hardware profile ids; default: every profile in the database."""
    engines: list[Engine] = Field(default=["vllm"], min_length=1, max_length=3)
    tensor_parallel: list[int] = Field(default=[1, 2, 4, 8], min_length=1, max_length=MAX_GRID)
    pipeline_parallel: list[int] = Field(default=[1], min_length=1, max_length=MAX_GRID)
    expert_parallel: list[bool] = Field(default=[False], min_length=1, max_length=2)
    data_parallel: list[int] = Field(default=[1], min_length=1, max_length=MAX_GRID)
    max_num_seqs: list[int] | None = Field(default=None, min_length=1, max_length=MAX_GRID)
    max_num_batched_tokens: list[int] | None = Field(default=None, min_length=1, max_length=8)
    gpu_memory_utilization: list[float] | None = Field(default=None, min_length=1, max_length=8)
    kv_cache_dtype: list[str] | None = Field(default=None, min_length=1, max_length=4)
    max_model_len: list[int] | None = Field(default=None, min_length=1, max_length=4)
    """Default: the smallest power of two that holds the longest request."""
    disaggregation: bool = False
    """Also consider prefill/decode disaggregation."""
    max_gpus: int | None = Field(default=None, ge=1, le=100_000)


class SizingRequest(RequestModel):
    model: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    traffic: SizingTrafficIn
    slo: SloIn
    candidates: CandidatesIn = Field(default_factory=CandidatesIn)
    prices: dict[str, float] = Field(default_factory=dict, examples=[{"h100-sxm": 2.5}])
    """Price per GPU-hour by hardware id; overrides the profile's price."""
    headroom: float = Field(default=0.85, gt=0, le=1)
    """Plans run each replica at most at this fraction of its Tier A capacity."""
    verify_top: int = Field(default=3, ge=0, le=10)
    """Plans verified by simulating every replica at the target load."""
    calibrated: bool = True


class PredictedOut(ResponseModel):
    """Whole-plan metrics at the target load (seconds; requests per second)."""

    source: Literal["tier_a", "simulation"]
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p95_s: float | None
    e2e_p95_s: float | None
    throughput_requests_per_s: float | None
    goodput_requests_per_s: float | None
    feasible: bool
    binding: str
    reason: str


class EngineArgsOut(ResponseModel):
    vllm: list[str]
    sglang: list[str]


class KnobsOut(ResponseModel):
    max_num_seqs: int | None
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    max_model_len: int


class PlanOut(ResponseModel):
    rank: int
    kind: Literal["aggregated", "disaggregated"]
    hardware: str
    engine: str
    gpus_per_replica: int
    replicas: int
    prefill_replicas: int | None
    decode_replicas: int | None
    total_gpus: int
    parallelism: dict[str, int | bool]
    knobs: KnobsOut
    engine_args: EngineArgsOut
    decode_engine_args: EngineArgsOut | None
    """Disaggregated plans: the decode pool's command (``engine_args`` is the prefill pool's)."""
    max_rate_per_replica_per_s: float
    decode_max_rate_per_replica_per_s: float | None
    utilization: float
    headroom: float
    binding: str
    kv_transfer_s: float | None
    kv_capacity_tokens: int
    price_per_gpu_hour: float | None
    cost_per_hour: float | None
    cost_per_million_output_tokens: float | None
    tier_a: PredictedOut | None
    simulation: PredictedOut | None
    verified: bool
    decided_by: Literal["tier_a", "simulation"]


class RejectedOut(ResponseModel):
    candidate: str
    reason: str
    detail: str
    miss: float | None = None


class SizingResponse(ResponseModel):
    model: str
    target_rate_per_s: float
    headroom: float
    plans: list[PlanOut]
    plans_found: int
    rejected: list[RejectedOut]
    candidates_evaluated: int
    simulations: int
    elapsed_s: float
    cached: bool
    warnings: list[str]
