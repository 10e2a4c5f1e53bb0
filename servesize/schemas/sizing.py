"""Request and response schemas of auto-sizing (``POST /v1/sizing``)."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from servesize.core.memory import KV_CACHE_DTYPES
from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.energy import EnergyOut
from servesize.schemas.launch import LaunchCommandOut as LaunchCommandOut
from servesize.schemas.launch import LaunchFileOut as LaunchFileOut
from servesize.schemas.launch import LaunchOut as LaunchOut
from servesize.schemas.manifests import ManifestsOut
from servesize.schemas.memory import KVOffloadIn
from servesize.schemas.models import ModelRef
from servesize.schemas.prefix import PrefixIn
from servesize.schemas.sessions import SessionsIn
from servesize.schemas.simulate import LengthIn
from servesize.schemas.slo import SloIn
from servesize.schemas.speculative import SpeculativeIn
from servesize.schemas.uncertainty import PredictionIntervalOut

Engine = Literal["vllm", "sglang", "trtllm"]
MAX_GRID = 16
MIN_BATCHED_TOKENS = 256
"""Smallest step token budget searched: below it a step holds only a sliver of a prompt, so
prefills take many steps (Sarathi-Serve's smallest budgets are 256-512 tokens)."""


def _kv_cache_dtype(value: str) -> str:
    if value.strip().lower() not in KV_CACHE_DTYPES:
        raise ValueError(f"{value!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
    return value


ParallelSize = Annotated[int, Field(ge=1, le=1024)]
KvCacheDtype = Annotated[str, Field(max_length=32), AfterValidator(_kv_cache_dtype)]


class _In(RequestModel):
    """Request parts whose attribute docstrings are their OpenAPI descriptions."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class SizingTrafficIn(_In):
    """The forecast: open-loop arrivals at ``rate_per_s`` (the fleet's target), or multi-turn
    ``sessions``; either may share prompt heads a prefix cache computes once."""

    rate_per_s: float | None = Field(default=None, gt=0, le=1_000_000, examples=[50.0])
    """Mean requests per second the whole fleet must serve (give it or ``sessions``)."""
    process: Literal["poisson", "gamma", "constant"] = Field(
        default="poisson", examples=["poisson", "gamma"]
    )
    """How send times are drawn: exponential, gamma (burstiness ``cv``) or equal gaps."""
    cv: float = Field(default=1.0, gt=0, le=100, examples=[2.0])
    """Coefficient of variation of the gaps (``gamma`` only)."""
    input_tokens: LengthIn = Field(default=1024, examples=[1024])
    """Prompt tokens per request: a number or a distribution."""
    output_tokens: LengthIn = Field(default=256, examples=[256])
    """Output tokens per request: a number or a distribution."""
    timeout_s: float | None = Field(default=None, gt=0, le=86_400, examples=[60.0])
    """Client timeout; a request still unfinished by then counts as failed. Null: none."""
    seed: int = Field(default=0, ge=0, le=2**63 - 1, examples=[0])
    """Seed of the verification simulations (same seed, same answer)."""
    prefix: PrefixIn | None = Field(
        default=None, examples=[{"shared_prefix_tokens": 2048, "shared_fraction": 0.9}]
    )
    """Shared prompt heads (a system prompt, or a measured ``cache_hit_rate``): plans whose
    engine caches prefixes prefill only the uncached suffix, in the screen and the
    simulations. Null: nothing shared."""
    sessions: SessionsIn | None = Field(
        default=None, examples=[{"sessions_per_s": 2.0, "turns": 4, "think_time_s": 5.0}]
    )
    """Multi-turn sessions instead of ``rate_per_s`` and the lengths: screened on their
    per-request means (``docs/modeling.md`` §3.16) with the history as cached prefix,
    verified by simulating the sessions (``num_sessions`` is ignored: the run draws as many
    as it needs)."""

    @model_validator(mode="after")
    def _one_shape(self) -> SizingTrafficIn:
        if (self.rate_per_s is None) == (self.sessions is None):
            raise ValueError("give exactly one of rate_per_s and sessions")
        if self.sessions is not None:
            # Compared with the defaults, not the fields set: a dumped body validates again.
            clash = ("input_tokens", "output_tokens", "process", "cv", "prefix")
            fields = type(self).model_fields
            given = [f for f in clash if getattr(self, f) != fields[f].default]
            if given:
                raise ValueError(
                    f"{', '.join(given)} describe open-loop requests; sessions carry their "
                    "own lengths, arrivals and history"
                )
        return self

    @property
    def request_rate_per_s(self) -> float:
        """``rate_per_s``, or the sessions' turns per second ``λ_sess · E[T]``."""
        if self.rate_per_s is not None:
            return self.rate_per_s
        assert self.sessions is not None
        turns = self.sessions.turns
        if isinstance(turns, int):
            mean = float(turns)
        elif turns.kind == "uniform":
            mean = (turns.low_turns + turns.high_turns) / 2
        else:
            mean = turns.mean_turns
        return self.sessions.sessions_per_s * mean


class CandidatesIn(_In):
    """What the search may choose from; unset knob grids use small defaults."""

    hardware: list[str] | None = Field(default=None, max_length=64, examples=[["h100-sxm"]])
    """Hardware profile ids (repeats count once); default: every profile in the database."""
    engines: list[Engine] = Field(default=["vllm"], min_length=1, max_length=3, examples=[["vllm"]])
    """Serving engines to consider."""
    tensor_parallel: list[ParallelSize] = Field(
        default=[1, 2, 4, 8], min_length=1, max_length=MAX_GRID, examples=[[1, 2]]
    )
    """Allowed tensor-parallel sizes (``--tensor-parallel-size``)."""
    pipeline_parallel: list[ParallelSize] = Field(
        default=[1], min_length=1, max_length=MAX_GRID, examples=[[1]]
    )
    """Allowed pipeline-parallel sizes."""
    expert_parallel: list[bool] = Field(
        default=[False], min_length=1, max_length=2, examples=[[False, True]]
    )
    """Whether MoE experts are sharded (``--enable-expert-parallel``): off, on or both."""
    data_parallel: list[ParallelSize] = Field(
        default=[1], min_length=1, max_length=MAX_GRID, examples=[[1]]
    )
    """Allowed data-parallel sizes inside one engine."""
    max_num_seqs: list[Annotated[int, Field(ge=1, le=2**20)]] | None = Field(
        default=None, min_length=1, max_length=MAX_GRID, examples=[[128, 256]]
    )
    """Running-batch limits to try. Default: the engine's own default."""
    max_num_batched_tokens: list[Annotated[int, Field(ge=MIN_BATCHED_TOKENS, le=2**24)]] | None = (
        Field(default=None, min_length=1, max_length=8, examples=[[8192]])
    )
    """Step token budgets to try, each at least 256 and at least every ``max_num_seqs`` given
    (vLLM refuses a smaller budget at start-up). Default: 2048 (latency-friendly) and 8192
    (throughput)."""
    gpu_memory_utilization: list[Annotated[float, Field(gt=0, le=1)]] | None = Field(
        default=None, min_length=1, max_length=8, examples=[[0.9]]
    )
    """Memory fractions in (0, 1] to try. Default: the engine's own default."""
    kv_cache_dtype: list[KvCacheDtype] | None = Field(
        default=None, min_length=1, max_length=4, examples=[["auto"]]
    )
    """KV-cache dtypes to try. Default: the model dtype (``auto``) and ``fp8``."""
    max_model_len: list[Annotated[int, Field(ge=1, le=2**24)]] | None = Field(
        default=None, min_length=1, max_length=4, examples=[[4096]]
    )
    """Context lengths to try, each at most the model's ``max_position_embeddings``; a length
    below the longest request (prompt + output) rejects its candidates as
    ``context-too-short``. Default: the smallest power of two that holds the longest
    request."""
    speculative: list[SpeculativeIn | None] | None = Field(
        default=None,
        min_length=1,
        max_length=4,
        examples=[
            [None, {"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0.8}]
        ],
    )
    """Speculative decoding configurations to try, ``null`` in the list for plain decoding;
    each multiplies the aggregated candidates, and a draft is chosen only where its plan is
    cheaper (it stops paying above its break-even batch). Default: plain decoding only."""
    kv_offload: list[KVOffloadIn | None] | None = Field(
        default=None, min_length=1, max_length=4, examples=[[None, {"size_gib": 64}]]
    )
    """Host KV tiers to try (vLLM ``size_gib``, SGLang ``hicache_ratio``/``hicache_size_gb``),
    ``null`` for none; a tier pays only for traffic with shared prefixes or sessions whose
    blocks the GPU evicts. Default: none."""
    disaggregation: bool = Field(default=False, examples=[True])
    """Also consider prefill/decode disaggregation (pairs without speculation or offload)."""
    max_gpus: int | None = Field(default=None, ge=1, le=100_000, examples=[16])
    """Most GPUs a plan may use in total (all replicas, both pools). Null: no limit."""


class SizingRequest(_In):
    """Target traffic + SLO + candidates → ranked, costed plans."""

    model: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    """A catalogue or custom model id, or an inline ``{"hf_config": {...}}``."""
    traffic: SizingTrafficIn = Field(
        examples=[{"rate_per_s": 20.0, "input_tokens": 1024, "output_tokens": 256}]
    )
    """The forecast the fleet must serve."""
    slo: SloIn = Field(examples=[{"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}}])
    """The objective every plan must meet at the target load."""
    candidates: CandidatesIn = Field(
        default_factory=CandidatesIn, examples=[{"hardware": ["h100-sxm", "a100-sxm-80gb"]}]
    )
    """What the search may choose from."""
    prices: dict[str, float] = Field(default_factory=dict, examples=[{"h100-sxm": 2.5}])
    """Price per GPU-hour by hardware id; overrides the profile's price. A shared price sheet
    is fine: prices of known hardware outside the search are ignored."""
    headroom: float = Field(default=0.85, gt=0, le=1, examples=[0.85])
    """Plans run each replica at most at this fraction of its Tier A capacity."""
    verify_top: int = Field(default=3, ge=0, le=10, examples=[3])
    """Plans verified by simulating every replica at the target load."""
    calibrated: bool = Field(default=True, examples=[True])
    """Apply the per-engine constants fitted on measured serving data."""
    rank_by: Literal["cost", "energy"] = Field(default="cost", examples=["energy"])
    """``cost``: plans ranked by cost per hour; ``energy``: by energy per million output tokens
    at the target load (``energy.energy_per_million_output_tokens_kwh``), then cost."""


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
    """The first command of the plan's engine (the server, or node 0 of a multi-node replica);
    the other engines are null. Every command is in ``launch``."""

    vllm: list[str] | None = None
    sglang: list[str] | None = None
    trtllm: list[str] | None = None


class KnobsOut(ResponseModel):
    max_num_seqs: int | None
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    max_model_len: int


class PlanSpeculativeOut(ResponseModel):
    """The speculative decoding a plan runs."""

    method: str
    num_speculative_tokens: int
    acceptance_per_position: list[float]
    expected_tokens_per_step: float
    """``E = 1 + Σ_i Π_{j≤i} α_j``: ``(1 − α^{k+1})/(1 − α)`` for one ``α``."""


class PlanKVOffloadOut(ResponseModel):
    """The host KV tier a plan runs (as ``candidates.kv_offload`` gave it)."""

    size_gib: float | None = None
    backend: str | None = None
    hicache_ratio: float | None = None
    hicache_size_gb: int | None = None


class PriceSourceOut(ResponseModel):
    """Where a plan's price per GPU-hour came from."""

    origin: Literal["request", "profile", "sheet"]
    """The request's ``prices``, the hardware profile's price, or the shipped reference sheet
    (``servesize/data/prices.json``: the cheapest on-demand list price found for the GPU)."""
    provider: str | None = None
    source_url: str | None = None
    """The sheet's pricing page, or the profile's ``price.source`` (free text)."""
    as_of: date | None = None


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
    speculative: PlanSpeculativeOut | None = None
    """Speculative decoding, when the search chose it for this plan (null: plain decoding)."""
    kv_offload: PlanKVOffloadOut | None = None
    """The host KV tier, when the search chose one (null: none)."""
    engine_args: EngineArgsOut
    decode_engine_args: EngineArgsOut | None
    """Disaggregated plans: the decode pool's command (``engine_args`` is the prefill pool's)."""
    launch: LaunchOut | None = None
    """Every command of the plan's engine, with the knobs the plan assumed."""
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
    price_source: PriceSourceOut | None = None
    """Origin of ``price_per_gpu_hour``; null when the plan is unpriced."""
    energy: EnergyOut | None = None
    """The plan's board power over all its GPUs at the target load (idle time of spare
    capacity included) and its energy per request and per million output tokens; null when
    the hardware has neither a TDP nor measured power."""
    tier_a: PredictedOut | None
    simulation: PredictedOut | None
    verified: bool
    decided_by: Literal["tier_a", "simulation"]
    verification: Literal["fleet", "one-replica-thinned", "sub-fleet-thinned"] | None
    """How the plan was simulated: the whole fleet, one replica at its share of a randomly
    routed fleet's arrivals (exact for random routing, conservative for least-loaded), or a
    small prefill/decode sub-fleet at each pool's share. Null: not simulated."""
    notes: list[str]
    """Why a plan is decided by Tier A although verification was asked for (an inconclusive
    run, the simulation budget) and the misses that added replicas."""
    max_rate_per_replica_per_s_interval: PredictionIntervalOut | None = None
    """Prediction interval of ``max_rate_per_replica_per_s`` (the E2E residuals, inverted)."""
    warnings: list[str] = Field(default_factory=list)
    """Where the plan lies outside the validated domain of the prediction intervals."""


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
    explanation: str = Field(
        examples=[
            "Best: h100-sxm vllm TP1 ... × 3 replicas (3 GPUs, $7.50/h), verified by simulation; "
            "binding constraint tpot_s.p95, 71% of its capacity at the target rate."
        ]
    )
    """What won and by how much over the runner-up, the rejections counted by reason; with no
    plan, what every candidate ran into and the nearest miss."""
    rejected: list[RejectedOut]
    candidates_evaluated: int
    simulations: int
    simulated_requests: int
    elapsed_s: float
    cached: bool
    warnings: list[str]
    prices_as_of: date | None = None
    """The oldest date among the prices the plans use (the sheet's and profiles'); null when
    every price came with the request or no plan is priced."""
    plan_id: str | None = None
    """Set when the answer was stored (``POST /v1/sizing?save=true``): ``GET /v1/plans/{id}``."""
    manifests: list[ManifestsOut] | None = None
    """With ``manifests=true``: each ranked plan's deployment artifacts, as
    ``GET /v1/plans/{id}/manifests`` returns them (a plan that cannot be deployed is left out,
    its reason in ``warnings``)."""
