"""Schemas of the SLO endpoints (``POST /v1/slo/evaluate``, ``POST /v1/slo/capacity``) and the
SLO itself, shared with ``/v1/sizing``."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from servesize.core.simulation import SchedulingPolicy
from servesize.core.slo import (
    METRICS,
    AttainmentTarget,
    LatencyTarget,
    ServiceLevelObjective,
)
from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.memory import DeploymentIn, HardwareRef
from servesize.schemas.models import ModelRef
from servesize.schemas.simulate import LatencyOut, TrafficIn
from servesize.schemas.uncertainty import PredictionIntervalOut

MAX_LATENCY_S = 86_400.0


class _In(RequestModel):
    """Request parts whose attribute docstrings are their OpenAPI descriptions."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class _Out(ResponseModel):
    """Response parts whose attribute docstrings are their OpenAPI descriptions."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class StatisticTargetsIn(_In):
    """Upper limits in seconds on the mean and/or percentiles of one latency metric, e.g.
    ``{"p95": 1.0}``. Failed requests count as infinitely slow."""

    mean: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S, examples=[0.5])
    """Most mean, in seconds."""
    p50: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S, examples=[0.5])
    """Most median, in seconds."""
    p90: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S, examples=[0.8])
    """Most 90th percentile, in seconds."""
    p95: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S, examples=[1.0])
    """Most 95th percentile, in seconds."""
    p99: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S, examples=[2.0])
    """Most 99th percentile, in seconds."""

    @model_validator(mode="after")
    def _something(self) -> StatisticTargetsIn:
        if all(getattr(self, name) is None for name in ("mean", "p50", "p90", "p95", "p99")):
            raise ValueError("give at least one of mean, p50, p90, p95, p99 (or leave it out)")
        return self


class AttainmentIn(_In):
    """DistServe goodput form: at least ``goal`` of the requests meet every given limit jointly
    (TPOT only for requests with two or more output tokens)."""

    goal: float = Field(gt=0, le=1, examples=[0.9])
    """Least fraction of measured requests that must meet every limit (failed ones do not)."""
    ttft_s: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S, examples=[1.0])
    """Most time to first token of a good request, in seconds."""
    tpot_s: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S, examples=[0.05])
    """Most time per output token of a good request, in seconds."""
    e2e_s: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S, examples=[30.0])
    """Most end-to-end latency of a good request, in seconds."""

    @model_validator(mode="after")
    def _a_limit(self) -> AttainmentIn:
        if self.ttft_s is None and self.tpot_s is None and self.e2e_s is None:
            raise ValueError("an attainment target needs at least one of ttft_s, tpot_s, e2e_s")
        return self


class SloIn(_In):
    """A service-level objective: every given target must hold.

    Latency targets are upper limits on the mean or a percentile of client-observed TTFT, ITL
    (pooled gaps between streamed tokens), TPOT (``(E2E − TTFT)/(N − 1)``) and E2E; timed-out,
    rejected and failed requests stay in every denominator as infinitely slow. Goodput counts
    requests meeting the tightest TTFT, TPOT and E2E limit given. At least one latency target,
    ``min_throughput_requests_per_s`` or ``attainment`` is required.
    """

    ttft_s: StatisticTargetsIn | None = Field(default=None, examples=[{"p95": 1.0}])
    """Limits on client-observed time to first token (queueing, preprocessing, prefill and
    first-output overhead included)."""
    itl_s: StatisticTargetsIn | None = Field(default=None, examples=[{"p99": 0.2}])
    """Limits on inter-token latency, pooled over every gap between streamed tokens."""
    tpot_s: StatisticTargetsIn | None = Field(default=None, examples=[{"p95": 0.05}])
    """Limits on time per output token, ``(E2E − TTFT)/(N − 1)`` per request."""
    e2e_s: StatisticTargetsIn | None = Field(default=None, examples=[{"p99": 30.0}])
    """Limits on client-observed end-to-end latency."""
    max_failure_rate: float = Field(default=0.0, ge=0, lt=1, examples=[0.0, 0.01])
    """Most ``(timed out + rejected) / measured`` allowed."""
    min_throughput_requests_per_s: float | None = Field(
        default=None, gt=0, le=1_000_000, examples=[4.0]
    )
    """Least completed requests per second (across all replicas)."""
    attainment: AttainmentIn | None = Field(
        default=None, examples=[{"goal": 0.9, "ttft_s": 1.0, "tpot_s": 0.05}]
    )
    """DistServe's form: a least fraction of requests meeting TTFT, TPOT (and E2E) jointly."""

    @model_validator(mode="after")
    def _some_target(self) -> SloIn:
        if (
            all(getattr(self, f"{m}_s") is None for m in METRICS)
            and self.min_throughput_requests_per_s is None
            and self.attainment is None
        ):
            raise ValueError(
                "the SLO has no target: give ttft_s, itl_s, tpot_s or e2e_s limits, "
                "min_throughput_requests_per_s or attainment"
            )
        return self

    def to_core(self) -> ServiceLevelObjective:
        """The core objective (targets in the order ttft, itl, tpot, e2e; mean, p50 … p99)."""
        targets: list[LatencyTarget] = []
        for metric in METRICS:
            stats = getattr(self, f"{metric}_s")
            if stats is None:
                continue
            for statistic in ("mean", "p50", "p90", "p95", "p99"):
                limit = getattr(stats, statistic)
                if limit is not None:
                    targets.append(
                        LatencyTarget(metric=metric, statistic=statistic, limit_s=float(limit))
                    )
        a = self.attainment
        return ServiceLevelObjective(
            targets=tuple(targets),
            max_failure_rate=self.max_failure_rate,
            min_throughput_requests_per_s=self.min_throughput_requests_per_s,
            attainment=(
                AttainmentTarget(goal=a.goal, ttft_s=a.ttft_s, tpot_s=a.tpot_s, e2e_s=a.e2e_s)
                if a is not None
                else None
            ),
        )

    @staticmethod
    def pointer(check_name: str) -> str:
        """JSON pointer (below ``slo``) of the field a check comes from: ``ttft_s.p95`` →
        ``/ttft_s/p95``."""
        return {
            "failure_rate": "/max_failure_rate",
            "throughput_requests_per_s": "/min_throughput_requests_per_s",
            "attainment": "/attainment/goal",
        }.get(check_name, "/" + check_name.replace(".", "/"))


# ----------------------------------------------------------------------------- requests

Tier = Literal["auto", "analytic", "simulation"]


class SloEvaluateRequest(_In):
    """Does this deployment meet the SLO under this traffic?"""

    model: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    """A catalogue or custom model id, or an inline ``{"hf_config": {...}}``."""
    hardware: HardwareRef = Field(examples=["h100-sxm"])
    """A hardware profile id, or an inline GPU."""
    deployment: DeploymentIn = Field(
        default_factory=DeploymentIn, examples=[{"tensor_parallel_size": 1}]
    )
    """Engine and parallelism of each replica (unset fields take the engine's defaults)."""
    traffic: TrafficIn = Field(default_factory=TrafficIn)
    """The forecast: open loop at ``arrival.rate_per_s`` across all replicas, or a closed loop
    of ``concurrency`` clients."""
    slo: SloIn = Field(examples=[{"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}}])
    """The objective; every target given must hold."""
    replicas: int = Field(default=1, ge=1, le=256, examples=[1])
    """Identical deployments behind one router sharing the traffic."""
    routing: Literal["round_robin", "random", "least_loaded"] = Field(
        default="round_robin", examples=["round_robin"]
    )
    """How the router spreads requests over the replicas."""
    policy: SchedulingPolicy | None = Field(default=None, examples=["vllm_v1"])
    """Scheduler: vLLM v1 (running first, chunked prefill), Sarathi-style stall-free batching,
    without chunked prefill, or SGLang's default (prefill-only steps first, decodes wait).
    Unset: the deployment engine's own — ``vllm_v1`` for vLLM, ``prefill_first`` for SGLang,
    ``no_chunking`` for TensorRT-LLM (chunked prefill off by default)."""
    tier: Tier = Field(default="auto", examples=["auto"])
    """``auto``: the Tier A screen is reported and the simulation decides; ``analytic``: Tier A
    only (milliseconds; open loop only); ``simulation``: the simulator only."""
    use_measurements: bool = Field(default=True, examples=[True])
    """Use measured kernel tables when the profile has them (else datasheet roofline)."""
    calibrated: bool = Field(default=True, examples=[True])
    """Apply the per-engine constants fitted on measured serving data."""


class CapacitySearchIn(_In):
    """How hard the capacity search works. Every probe is one simulation of
    ``traffic.num_requests`` requests (screening runs a quarter of them first)."""

    tolerance: float = Field(default=0.02, ge=0.005, le=0.25, examples=[0.02])
    """Bisection stops when the bracket is within this fraction of its top (closed loop: 1)."""
    max_probes: int = Field(default=12, ge=1, le=40, examples=[12])
    """Most full-length simulations for bracketing and bisection."""
    curve_points: int = Field(default=3, ge=0, le=8, examples=[3])
    """Extra loads below the answer for the latency-vs-load curve."""
    screen: bool = Field(default=True, examples=[True])
    """Run each load short first and skip the full run when the SLO is certainly missed."""


class SloCapacityRequest(_In):
    """The largest load one replica sustains within the SLO. For an open loop the traffic's
    ``arrival.rate_per_s`` is ignored (it is what is searched); for a closed loop its
    ``concurrency`` is."""

    model: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    """A catalogue or custom model id, or an inline ``{"hf_config": {...}}``."""
    hardware: HardwareRef = Field(examples=["h100-sxm"])
    """A hardware profile id, or an inline GPU."""
    deployment: DeploymentIn = Field(
        default_factory=DeploymentIn, examples=[{"tensor_parallel_size": 1}]
    )
    """Engine and parallelism of the replica (unset fields take the engine's defaults)."""
    traffic: TrafficIn = Field(default_factory=TrafficIn)
    """Lengths, mode, requests per probe and seed; the searched rate or concurrency is
    ignored."""
    slo: SloIn = Field(examples=[{"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}}])
    """The objective; every target given must hold."""
    policy: SchedulingPolicy | None = Field(default=None, examples=["vllm_v1"])
    """Scheduler: vLLM v1 (running first, chunked prefill), Sarathi-style stall-free batching,
    without chunked prefill, or SGLang's default (prefill-only steps first, decodes wait).
    Unset: the deployment engine's own — ``vllm_v1`` for vLLM, ``prefill_first`` for SGLang,
    ``no_chunking`` for TensorRT-LLM (chunked prefill off by default)."""
    search: CapacitySearchIn = Field(
        default_factory=CapacitySearchIn, examples=[{"max_probes": 8, "curve_points": 3}]
    )
    """How hard the search works (probes, tolerance, curve points, screening)."""
    use_measurements: bool = Field(default=True, examples=[True])
    """Use measured kernel tables when the profile has them (else datasheet roofline)."""
    calibrated: bool = Field(default=True, examples=[True])
    """Apply the per-engine constants fitted on measured serving data."""


# ----------------------------------------------------------------------------- responses


class CheckOut(_Out):
    """One target against its prediction. ``margin = limit − predicted`` for an upper limit
    (``direction: max``), ``predicted − limit`` for a lower one; ``relative_margin`` divides by
    the limit. JSON has no infinity: an infinite predicted value (failures in a percentile) is
    ``null`` with ``predicted_infinite: true``."""

    name: str = Field(examples=["ttft_s.p95"])
    predicted: float | None = Field(examples=[0.82])
    predicted_infinite: bool = False
    limit: float = Field(examples=[1.0])
    direction: Literal["max", "min"] = Field(examples=["max"])
    margin: float | None = Field(examples=[0.18])
    relative_margin: float | None = Field(examples=[0.18])
    holds: bool = Field(examples=[True])


class AnalyticScreenOut(_Out):
    """The Tier A verdict (mean-field open-loop model, milliseconds)."""

    feasible: bool
    checks: list[CheckOut]
    binding_constraint: str
    reason: str
    goodput_requests_per_s: float | None
    throughput_requests_per_s: float | None
    saturation_rate_per_s: float
    """Per replica."""
    utilization: float
    """Offered rate per replica over the saturation rate."""
    unscreened: list[str]
    """Targets Tier A does not model (ITL percentiles, TTFT p90)."""


class SloEvaluateResponse(_Out):
    """The verdict. ``headroom`` is the relative margin of the binding constraint (how far its
    prediction may move before the SLO breaks; negative when missed, null when unbounded)."""

    model: str
    hardware: str
    engine: str
    feasible: bool
    decided_by: Literal["analytic", "simulation"]
    checks: list[CheckOut]
    binding_constraint: str
    reason: str
    headroom: float | None = Field(examples=[0.18])
    goodput_requests_per_s: float | None = Field(examples=[4.7])
    """Requests per second that completed and met every per-request limit."""
    throughput_requests_per_s: float | None = Field(examples=[4.95])
    throughput_output_tokens_per_s: float | None = Field(examples=[1260.0])
    error_rate: float = Field(examples=[0.0])
    """(timed out + rejected) / measured."""
    attainment: float | None = Field(examples=[0.97])
    stable: bool
    analytic_screen: AnalyticScreenOut | None
    ttft_s: LatencyOut | None = None
    itl_s: LatencyOut | None = None
    tpot_s: LatencyOut | None = None
    e2e_s: LatencyOut | None = None
    warnings: list[str]


class CurvePointOut(_Out):
    """One simulated load (``rate_per_s`` for an open loop, ``concurrency`` for a closed one).
    Latencies are null when infinite or when the run was unstable."""

    rate_per_s: float | None
    concurrency: int | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    tpot_p50_s: float | None
    tpot_p95_s: float | None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    goodput_requests_per_s: float | None
    throughput_requests_per_s: float | None
    feasible: bool
    stable: bool
    binding_constraint: str
    ttft_p50_s_interval: PredictionIntervalOut | None = None
    """Prediction interval of ``ttft_p50_s``; each percentile takes the band of mean TTFT
    (docs/modeling.md §5.7: the residuals are of means, percentiles were not held out)."""
    ttft_p95_s_interval: PredictionIntervalOut | None = None
    ttft_p99_s_interval: PredictionIntervalOut | None = None
    tpot_p50_s_interval: PredictionIntervalOut | None = None
    """Prediction interval of ``tpot_p50_s`` (the band of mean TPOT, as for TTFT)."""
    tpot_p95_s_interval: PredictionIntervalOut | None = None
    tpot_p99_s_interval: PredictionIntervalOut | None = None
    throughput_requests_per_s_interval: PredictionIntervalOut | None = None
    """Closed loop only: throughput ``C / E2E`` takes the E2E band inverted. Null for an open
    loop, whose stable throughput is the offered rate (its uncertainty is where it stops
    being stable: ``max_rate_per_s_interval``)."""


class SloCapacityResponse(_Out):
    """The largest load meeting the SLO, per replica, and the latency-vs-load curve.

    ``knee_*`` is the lowest load at which p95 TTFT reaches twice its zero-load value
    (interpolated between curve points; null if the curve never gets there)."""

    model: str
    hardware: str
    engine: str
    mode: Literal["open_loop", "closed_loop"]
    max_rate_per_s: float | None = Field(examples=[7.9])
    max_concurrency: int | None = Field(examples=[None])
    binding_constraint: str | None = Field(examples=["ttft_s.p95"])
    converged: bool
    bracket_low: float
    bracket_high: float | None
    """The search's final bracket: ``low`` met the SLO, ``high`` missed (null: none missed)."""
    curve: list[CurvePointOut]
    knee_rate_per_s: float | None
    knee_concurrency: float | None
    tier_a_saturation_rate_per_s: float | None
    tier_a_max_rate_per_s: float | None
    """Tier A's own answer (its screened targets only), the search's first guess."""
    zero_load_ttft_p95_s: float
    probes: int
    """Simulations run, short screening runs included."""
    short_probes: int
    confirmation_seeds: int = Field(examples=[2])
    """Runs with other seeds at the answer (0 when nothing was found)."""
    confirmed_by_seeds: int = Field(examples=[2])
    """How many of them meet the SLO too; fewer than ``confirmation_seeds`` means the answer
    leans on the luck of one sample path (a warning says so)."""
    simulated_requests: int
    """Requests simulated over all probes, confirmation runs included."""
    warnings: list[str]
    max_rate_per_s_interval: PredictionIntervalOut | None = None
    """Prediction interval of ``max_rate_per_s`` (the E2E residuals, inverted)."""
