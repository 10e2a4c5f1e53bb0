"""Request and response schemas of the serving simulator (``POST /v1/simulate``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from service.schemas.base import RequestModel, ResponseModel
from service.schemas.memory import AppliedDefaultOut, DeploymentIn, HardwareRef
from service.schemas.models import ModelRef

MAX_REQUESTS = 50_000
"""Most requests one simulation may ask for: the run happens inside the HTTP request."""
MAX_EXPECTED_TOKENS = 200_000_000
"""Most prompt + output tokens one simulation may expect to process (mean lengths × requests)."""
MAX_LENGTH_TOKENS = 2**24
TIME_SERIES_POINTS = 200

# ----------------------------------------------------------------------------- traffic


class FixedLengthIn(RequestModel):
    """Every request has exactly ``tokens`` tokens."""

    kind: Literal["fixed"]
    tokens: int = Field(ge=1, le=MAX_LENGTH_TOKENS, examples=[1024])


class UniformLengthIn(RequestModel):
    """Integers uniform on ``[low_tokens, high_tokens]``, both ends included."""

    kind: Literal["uniform"]
    low_tokens: int = Field(ge=1, le=MAX_LENGTH_TOKENS, examples=[512])
    high_tokens: int = Field(ge=1, le=MAX_LENGTH_TOKENS, examples=[1536])

    @model_validator(mode="after")
    def _ordered(self) -> UniformLengthIn:
        if self.high_tokens < self.low_tokens:
            raise ValueError(
                f"high_tokens ({self.high_tokens}) must be >= low_tokens ({self.low_tokens})"
            )
        return self


class _ClippedLengthIn(RequestModel):
    min_tokens: int = Field(default=1, ge=1, le=MAX_LENGTH_TOKENS)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_LENGTH_TOKENS, examples=[4096])
    """Upper clip; unset clips at the deployment's ``max_model_len`` (minus one token for the
    other side of the request)."""

    @model_validator(mode="after")
    def _bounds(self) -> _ClippedLengthIn:
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise ValueError(
                f"max_tokens ({self.max_tokens}) must be >= min_tokens ({self.min_tokens})"
            )
        return self


class NormalLengthIn(_ClippedLengthIn):
    """``round(N(mean_tokens, std_tokens²))`` clipped to ``[min_tokens, max_tokens]`` (the mean
    is before clipping)."""

    kind: Literal["normal"]
    mean_tokens: float = Field(gt=0, le=MAX_LENGTH_TOKENS, examples=[1024.0])
    std_tokens: float = Field(ge=0, le=MAX_LENGTH_TOKENS, examples=[256.0])


class LogNormalLengthIn(_ClippedLengthIn):
    """``round(X)``, ``X`` log-normal with mean ``mean_tokens`` and coefficient of variation
    ``cv``, clipped to ``[min_tokens, max_tokens]``."""

    kind: Literal["lognormal"]
    mean_tokens: float = Field(gt=0, le=MAX_LENGTH_TOKENS, examples=[1024.0])
    cv: float = Field(ge=0, le=100, examples=[0.5])


LengthDistributionIn = Annotated[
    FixedLengthIn | UniformLengthIn | NormalLengthIn | LogNormalLengthIn,
    Field(discriminator="kind"),
]
TokenCount = Annotated[int, Field(ge=1, le=MAX_LENGTH_TOKENS)]
_TOKEN_COUNT: TypeAdapter[int] = TypeAdapter(TokenCount)
_BY_KIND: dict[str, type[RequestModel]] = {
    "fixed": FixedLengthIn,
    "uniform": UniformLengthIn,
    "normal": NormalLengthIn,
    "lognormal": LogNormalLengthIn,
}


def _one_error(exc: ValidationError) -> PydanticCustomError:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    return PydanticCustomError("length_distribution", "{issues}", {"issues": "; ".join(parts)})


def _validate_length(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """Dispatch on ``kind`` so a mistake is reported at the length's own pointer (a plain
    union would report one error per alternative, under synthetic path segments)."""
    if isinstance(value, FixedLengthIn | UniformLengthIn | NormalLengthIn | LogNormalLengthIn):
        return value
    if isinstance(value, dict):
        kind = value.get("kind")
        model = _BY_KIND.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise PydanticCustomError(
                "length_kind",
                "kind must be one of fixed, uniform, normal, lognormal (got {kind})",
                {"kind": repr(kind)},
            )
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise _one_error(exc) from None
    try:
        return _TOKEN_COUNT.validate_python(value)
    except ValidationError as exc:
        raise _one_error(exc) from None


LengthIn = Annotated[TokenCount | LengthDistributionIn, WrapValidator(_validate_length)]
"""A token count, or a distribution ``{"kind": "fixed" | "uniform" | "normal" | "lognormal",
...}``."""


class ArrivalIn(RequestModel):
    """Open-loop send times: ``poisson`` (exponential gaps), ``gamma`` (gaps with coefficient of
    variation ``cv``; > 1 is burstier than Poisson) or ``constant`` (equal gaps)."""

    process: Literal["poisson", "gamma", "constant"] = Field(
        default="poisson", examples=["poisson", "gamma"]
    )
    rate_per_s: float = Field(default=1.0, gt=0, le=1_000_000, examples=[5.0])
    cv: float = Field(default=1.0, gt=0, le=100, examples=[2.0])
    """Used by ``gamma`` only."""


class TrafficIn(RequestModel):
    """Who sends what, when. ``open_loop``: requests arrive by ``arrival`` whatever the service
    does. ``closed_loop``: ``concurrency`` clients each send their next request
    ``think_time_s`` after the previous one ends — the offered load then falls as the service
    slows, which can hide overload."""

    mode: Literal["open_loop", "closed_loop"] = Field(default="open_loop", examples=["open_loop"])
    arrival: ArrivalIn = Field(default_factory=ArrivalIn)
    concurrency: int = Field(default=1, ge=1, le=100_000, examples=[32])
    """Clients of a closed loop (ignored for an open loop)."""
    think_time_s: float = Field(default=0.0, ge=0, le=86_400, examples=[0.0])
    """Closed loop: pause between a response and the client's next request."""
    input_tokens: LengthIn = Field(
        default=1024, examples=[1024, {"kind": "uniform", "low_tokens": 512, "high_tokens": 1536}]
    )
    output_tokens: LengthIn = Field(
        default=256, examples=[256, {"kind": "lognormal", "mean_tokens": 256.0, "cv": 0.8}]
    )
    num_requests: int = Field(default=1000, ge=1, le=MAX_REQUESTS, examples=[2000])
    """Requests in the run, warm-up included; at most 50,000 (the run happens inside the
    request)."""
    warmup_requests: int = Field(default=0, ge=0, le=MAX_REQUESTS, examples=[100])
    """The first requests load the system but are not measured."""
    seed: int = Field(default=0, ge=0, le=2**63 - 1, examples=[0])
    """Same seed, same request: the same response."""
    timeout_s: float | None = Field(default=None, gt=0, le=86_400 * 365, examples=[60.0])
    """Client timeout per request, from its send time (unset: none)."""

    @model_validator(mode="after")
    def _something_measured(self) -> TrafficIn:
        if self.warmup_requests >= self.num_requests:
            raise ValueError(
                f"warmup_requests ({self.warmup_requests}) must be below num_requests "
                f"({self.num_requests}) so that some requests are measured"
            )
        return self


class SloIn(RequestModel):
    """Per-request targets; a request is good when it completed and meets every one given."""

    ttft_s: float | None = Field(default=None, gt=0, le=86_400, examples=[0.5])
    tpot_s: float | None = Field(default=None, gt=0, le=86_400, examples=[0.05])
    e2e_s: float | None = Field(default=None, gt=0, le=86_400, examples=[30.0])


class SimulateRequest(RequestModel):
    model: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    hardware: HardwareRef = Field(examples=["h100-sxm"])
    deployment: DeploymentIn = Field(default_factory=DeploymentIn)
    traffic: TrafficIn = Field(default_factory=TrafficIn)
    replicas: int = Field(default=1, ge=1, le=256, examples=[1])
    """Identical deployments behind one router."""
    routing: Literal["round_robin", "random", "least_loaded"] = Field(
        default="round_robin", examples=["round_robin", "least_loaded"]
    )
    policy: Literal["vllm_v1", "sarathi", "no_chunking"] = Field(
        default="vllm_v1", examples=["vllm_v1"]
    )
    """Scheduler: vLLM v1 (running first, chunked prefill), Sarathi-style stall-free batching, or
    vLLM without chunked prefill."""
    slo: SloIn | None = None
    use_measurements: bool = True
    """Use measured kernel tables when the profile has them (else datasheet roofline)."""
    calibrated: bool = True
    """Apply the per-engine constants fitted on measured serving data."""


# ----------------------------------------------------------------------------- response

StatName = Literal["mean", "p50", "p90", "p95", "p99"]


class LatencyOut(ResponseModel):
    """Mean and percentiles in seconds over the measured requests (ITL: over streamed tokens).

    Failed requests (timed out, rejected) stay in the denominator as infinitely slow, so a
    statistic can be +∞: JSON has no infinity, so such a value is ``null`` and its name is
    listed in ``infinite``. A ``null`` not listed there means there were no samples (e.g. TPOT
    when every request has one output token).
    """

    count: int = Field(examples=[900])
    mean: float | None = Field(examples=[0.112])
    p50: float | None = Field(examples=[0.098])
    p90: float | None = Field(examples=[0.171])
    p95: float | None = Field(examples=[0.204])
    p99: float | None = Field(examples=[0.311])
    infinite: list[StatName] = Field(default_factory=list, examples=[["p99"]])


class LittlesLawOut(ResponseModel):
    """Little's law ``L = λ W`` over the whole run: the time-averaged number of requests in the
    engines against ``Σ residence / horizon``; they agree up to requests cut by the horizon."""

    mean_in_system: float | None = Field(examples=[12.4])
    throughput_times_residence: float | None = Field(examples=[12.4])
    relative_error: float | None = Field(examples=[0.001])


class TimeSeriesOut(ResponseModel):
    """Fleet-wide state on an even grid of at most 200 points, for plots (the values of the step
    running at each instant; 0 while idle)."""

    time_s: list[float]
    queue_length: list[int]
    """Requests waiting for admission."""
    running_batch: list[int]
    """Requests in the running set."""
    kv_blocks_used: list[int]
    kv_utilization: list[float]
    """``kv_blocks_used`` over the fleet's KV blocks."""


class EngineConfigOut(ResponseModel):
    """What each simulated engine replica was given (from the memory plan)."""

    policy: str = Field(examples=["vllm_v1"])
    max_num_seqs: int = Field(examples=[1024])
    max_num_batched_tokens: int = Field(examples=[8192])
    kv_block_size: int = Field(examples=[16])
    kv_blocks: int = Field(examples=[29_000])
    engine_replicas: int = Field(examples=[1])


class SimulateResponse(ResponseModel):
    """One simulated run, measured over the requests after the warm-up.

    Latencies are client-observed: TTFT and E2E include ``request_overhead_s`` (HTTP,
    tokenisation, first-token streaming), as ``/v1/performance``'s zero-load TTFT does.
    TPOT is ``(E2E − TTFT)/(N − 1)`` per request; ITL pools every gap between streamed tokens.
    When ``stable`` is false the queue grows through the run: the latency statistics then depend
    on how long the run is and are withheld (``null``), and ``stability_reason`` says why;
    throughput is then the saturation throughput.
    """

    model: str = Field(examples=["meta-llama/Llama-3.1-8B"])
    hardware: str = Field(examples=["h100-sxm"])
    engine: str = Field(examples=["vllm"])
    mode: str = Field(examples=["open_loop"])
    engine_config: EngineConfigOut
    stable: bool = Field(examples=[True])
    stability_reason: str
    ttft_s: LatencyOut | None
    itl_s: LatencyOut | None
    tpot_s: LatencyOut | None
    e2e_s: LatencyOut | None
    queueing_delay_s: LatencyOut | None
    """Send to first scheduling, completed requests only (engine clock)."""
    request_overhead_s: float = Field(examples=[0.0326])
    offered_rate_per_s: float | None = Field(examples=[5.0])
    throughput_requests_per_s: float | None = Field(examples=[4.98])
    throughput_output_tokens_per_s: float | None = Field(examples=[1275.0])
    goodput_requests_per_s: float | None = Field(examples=[4.9])
    """Measured requests that completed and met every SLO, per second (null without ``slo``)."""
    slo_attainment: float | None = Field(examples=[0.98])
    measured: int = Field(examples=[900])
    completed: int = Field(examples=[900])
    failed: int = Field(examples=[0])
    """``timed_out + rejected``; ``completed + failed = measured``."""
    timed_out: int = Field(examples=[0])
    rejected: int = Field(examples=[0])
    preemptions: int = Field(examples=[0])
    peak_kv_utilization: float = Field(examples=[0.12])
    memory_bytes_per_gpu: int = Field(examples=[72_000_000_000])
    """Peak memory per GPU: the engine preallocates the KV pool, so this is the memory plan's
    total."""
    littles_law: LittlesLawOut
    window_start_s: float
    window_end_s: float
    time_series: TimeSeriesOut
    defaults_applied: list[AppliedDefaultOut]
    warnings: list[str]
