"""Request and response schemas of the serving simulator (``POST /v1/simulate``)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    ConfigDict,
    Field,
    model_validator,
)

from servesize.core.simulation import SchedulingPolicy
from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.energy import EnergyOut
from servesize.schemas.histograms import LatencyHistogramsOut
from servesize.schemas.lengths import MAX_HISTOGRAM_VALUES as MAX_HISTOGRAM_VALUES
from servesize.schemas.lengths import FixedLengthIn as FixedLengthIn
from servesize.schemas.lengths import HistogramLengthIn as HistogramLengthIn
from servesize.schemas.lengths import LengthDistributionIn as LengthDistributionIn
from servesize.schemas.lengths import LengthIn as LengthIn
from servesize.schemas.lengths import LogNormalLengthIn as LogNormalLengthIn
from servesize.schemas.lengths import NormalLengthIn as NormalLengthIn
from servesize.schemas.lengths import UniformLengthIn as UniformLengthIn
from servesize.schemas.memory import AppliedDefaultOut, DeploymentIn, HardwareRef
from servesize.schemas.models import ModelRef
from servesize.schemas.prefix import PrefixIn
from servesize.schemas.sessions import SessionsIn
from servesize.schemas.traces import MAX_LENGTH_TOKENS as MAX_LENGTH_TOKENS
from servesize.schemas.traces import MAX_REQUESTS as MAX_REQUESTS
from servesize.schemas.traces import MAX_TRACE_FILE_CHARS as MAX_TRACE_FILE_CHARS
from servesize.schemas.traces import TRACE_ID_PATTERN
from servesize.schemas.traces import TraceIn as TraceIn
from servesize.schemas.uncertainty import PredictionIntervalOut

MAX_EXPECTED_TOKENS = 200_000_000
"""Most prompt + output tokens one simulation may expect to process (mean lengths × requests)."""
TIME_SERIES_POINTS = 200


class _In(RequestModel):
    """Request parts whose attribute docstrings are their OpenAPI descriptions."""

    model_config = ConfigDict(use_attribute_docstrings=True)


# ----------------------------------------------------------------------------- traffic


class ArrivalIn(_In):
    """Open-loop send times: ``poisson`` (exponential gaps), ``gamma`` (gaps with coefficient of
    variation ``cv``; > 1 is burstier than Poisson), ``constant`` (equal gaps) or ``trace``
    (the times of ``traffic.trace``)."""

    process: Literal["poisson", "gamma", "constant", "trace"] = Field(
        default="poisson", examples=["poisson", "gamma"]
    )
    """How send times are drawn (``trace``: replayed from ``traffic.trace``)."""
    rate_per_s: float = Field(default=1.0, gt=0, le=1_000_000, examples=[5.0])
    """Mean requests per second (not used by a trace)."""
    cv: float = Field(default=1.0, gt=0, le=100, examples=[2.0])
    """Coefficient of variation of the gaps, ``gamma`` only (vLLM bench ``--burstiness`` is
    ``1/cv²``)."""


class TrafficIn(_In):
    """Who sends what, when. ``open_loop``: requests arrive by ``arrival`` whatever the service
    does. ``closed_loop``: ``concurrency`` clients each send their next request
    ``think_time_s`` after the previous one ends — the offered load then falls as the service
    slows, which can hide overload."""

    mode: Literal["open_loop", "closed_loop"] = Field(default="open_loop", examples=["open_loop"])
    """``open_loop``: sends follow ``arrival``; ``closed_loop``: ``concurrency`` clients."""
    arrival: ArrivalIn = Field(default_factory=ArrivalIn)
    """Open loop: the send-time process."""
    concurrency: int = Field(default=1, ge=1, le=100_000, examples=[32])
    """Clients of a closed loop (ignored for an open loop)."""
    think_time_s: float = Field(default=0.0, ge=0, le=86_400, examples=[0.0])
    """Closed loop: pause between a response and the client's next request."""
    input_tokens: LengthIn = Field(
        default=1024, examples=[1024, {"kind": "uniform", "low_tokens": 512, "high_tokens": 1536}]
    )
    """Prompt tokens per request: a number or a distribution."""
    output_tokens: LengthIn = Field(
        default=256, examples=[256, {"kind": "lognormal", "mean_tokens": 256.0, "cv": 0.8}]
    )
    """Output tokens per request: a number or a distribution."""
    num_requests: int = Field(default=1000, ge=1, le=MAX_REQUESTS, examples=[2000])
    """Requests in the run, warm-up included; at most 50,000 (the run happens inside the
    request)."""
    warmup_requests: int = Field(default=0, ge=0, le=MAX_REQUESTS, examples=[100])
    """The first requests load the system but are not measured."""
    cooldown_requests: int = Field(default=0, ge=0, le=MAX_REQUESTS, examples=[100])
    """The last requests (in send order) keep the system loaded while the measured ones drain,
    but are not measured themselves: without them the measured tail runs on an emptying
    engine."""
    trace: TraceIn | None = None
    """Replay these send times and lengths (open loop); ``num_requests``, ``arrival`` and the
    length distributions then do not apply."""
    seed: int = Field(default=0, ge=0, le=2**63 - 1, examples=[0])
    """Same seed, same request: the same response."""
    timeout_s: float | None = Field(default=None, gt=0, le=86_400 * 365, examples=[60.0])
    """Client timeout per request, from its send time (unset: none)."""
    prefix: PrefixIn | None = None
    """Shared prompt heads a prefix cache reuses (unset: every prompt unique)."""
    trace_id: str | None = Field(
        default=None, pattern=TRACE_ID_PATTERN, examples=["trc_5f0c3a9e1b2d4c6f"]
    )
    """Replay a trace stored with ``POST /v1/traces`` (as ``trace``; ``/v1/simulate`` only)."""
    sessions: SessionsIn | None = None
    """Multi-turn sessions instead of independent requests: ``num_requests``, ``arrival``,
    the lengths and ``prefix`` then do not apply (each session's history is its prefix)."""

    @model_validator(mode="after")
    def _something_measured(self) -> TrafficIn:
        if self.trace is not None and self.trace_id is not None:
            raise ValueError("give trace or trace_id, not both")
        if self.sessions is not None:
            self._check_sessions()
            return self  # the number of turns is known once they are drawn
        if self.trace is not None or self.trace_id is not None or self.arrival.process == "trace":
            self._check_trace()
        size = self.num_requests
        if self.trace is not None and self.trace.arrival_s is not None:
            size = len(self.trace.arrival_s)
        elif self.trace is not None or self.trace_id is not None:
            return self  # a file's length is known once it is read
        unmeasured = self.warmup_requests + self.cooldown_requests
        if unmeasured >= size:
            raise ValueError(
                f"warmup_requests + cooldown_requests ({unmeasured}) must be below the number of "
                f"requests ({size}) so that some requests are measured"
            )
        return self

    def _check_sessions(self) -> None:
        if self.mode != "open_loop":
            raise ValueError("sessions start open loop (each is its own closed loop); set mode")
        clash = {"trace", "trace_id", "arrival", "num_requests", "prefix"} & self.model_fields_set
        if clash:
            raise ValueError(f"with sessions leave out {', '.join(sorted(clash))}")

    def _check_trace(self) -> None:
        if self.trace is None and self.trace_id is None:
            raise ValueError('arrival process "trace" needs traffic.trace or traffic.trace_id')
        if self.mode != "open_loop":
            raise ValueError("a trace is replayed open loop; set mode to open_loop")
        if "arrival" in self.model_fields_set and self.arrival.process != "trace":
            raise ValueError(
                f'with a trace the arrival process is "trace", not {self.arrival.process!r}'
            )
        if "num_requests" in self.model_fields_set:
            raise ValueError("a trace sets the number of requests; leave num_requests out")


class SloIn(_In):
    """Per-request targets; a request is good when it completed and meets every one given."""

    ttft_s: float | None = Field(default=None, gt=0, le=86_400, examples=[0.5])
    """Most client-observed time to first token."""
    tpot_s: float | None = Field(default=None, gt=0, le=86_400, examples=[0.05])
    """Most time per output token, ``(E2E − TTFT)/(N − 1)``."""
    e2e_s: float | None = Field(default=None, gt=0, le=86_400, examples=[30.0])
    """Most client-observed end-to-end latency."""

    @model_validator(mode="after")
    def _some_target(self) -> SloIn:
        if self.ttft_s is None and self.tpot_s is None and self.e2e_s is None:
            raise ValueError("give at least one of ttft_s, tpot_s and e2e_s (or leave slo out)")
        return self


class OverheadsIn(_In):
    """Client-side latency outside the engine, added to every client-observed TTFT and E2E
    (ITL and TPOT are gaps between tokens and do not change). Unset fields are 0."""

    preprocess_s: float = Field(default=0.0, ge=0, le=3600, examples=[0.005])
    """Tokenisation, validation and routing before the request reaches the engine queue."""
    output_processing_s: float = Field(default=0.0, ge=0, le=3600, examples=[0.002])
    """Detokenising and streaming the first output (first-output overhead)."""
    network_rtt_s: float = Field(default=0.0, ge=0, le=3600, examples=[0.02])
    """Client-server round trip (request leg plus response leg)."""


class KVTransferIn(_In):
    """Prefill-to-decode KV transfer per request: ``latency_s + prompt_tokens ·
    kv_bytes_per_token / bandwidth_bytes_per_s``, with the KV bytes per token of one GPU (each
    tensor-parallel rank sends its own shard over its own link)."""

    latency_s: float = Field(default=0.0, ge=0, le=60, examples=[0.001])
    """Fixed cost per transfer (handshake, first byte); 0 by default."""
    bandwidth_bytes_per_s: float | None = Field(default=None, gt=0, le=1e13, examples=[50e9])
    """Per-GPU link bandwidth, one direction; unset: the hardware profile's interconnect (pools
    in one NVLink domain). Give the NIC bandwidth for pools on different nodes."""
    first_token_after_transfer: bool = Field(default=False, examples=[False])
    """False: the client sees the first token when the prefill replica emits it; true: only
    once the KV has reached the decode replica."""


class DisaggregationIn(_In):
    """Prefill/decode disaggregation: ``prefill_replicas`` replicas run prompts and hand each
    request's KV to one of ``decode_replicas`` replicas that generate the rest (both pools use
    ``deployment``)."""

    prefill_replicas: int = Field(default=1, ge=1, le=256, examples=[1])
    """Replicas of the prefill pool (requests reach them by ``routing``)."""
    decode_replicas: int = Field(default=1, ge=1, le=256, examples=[2])
    """Replicas of the decode pool."""
    decode_routing: Literal["round_robin", "random", "least_loaded"] = Field(
        default="least_loaded", examples=["least_loaded"]
    )
    """How prefilled requests are spread over the decode pool."""
    kv_transfer: KVTransferIn = Field(default_factory=KVTransferIn)
    """The KV hand-off between the pools."""


class SimulateRequest(_In):
    model: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    """A catalogue or custom model id, or an inline ``{"hf_config": {...}}``."""
    hardware: HardwareRef = Field(examples=["h100-sxm"])
    """A hardware profile id, or an inline GPU."""
    deployment: DeploymentIn = Field(
        default_factory=DeploymentIn, examples=[{"tensor_parallel_size": 1}]
    )
    """Engine and parallelism of each replica (unset fields take the engine's defaults)."""
    traffic: TrafficIn = Field(default_factory=TrafficIn)
    """Who sends what, when."""
    replicas: int = Field(default=1, ge=1, le=256, examples=[1])
    """Identical deployments behind one router (1 with ``disaggregation``, which sizes its
    pools itself)."""
    routing: Literal["round_robin", "random", "least_loaded"] = Field(
        default="round_robin", examples=["round_robin", "least_loaded"]
    )
    policy: SchedulingPolicy | None = Field(default=None, examples=["vllm_v1"])
    """Scheduler: vLLM v1 (running first, chunked prefill), Sarathi-style stall-free batching,
    without chunked prefill, or SGLang's default (prefill-only steps first, decodes wait).
    Unset: the deployment engine's own — ``vllm_v1`` for vLLM, ``prefill_first`` for SGLang,
    ``no_chunking`` for TensorRT-LLM (chunked prefill off by default)."""
    slo: SloIn | None = None
    """Targets for goodput and attainment (unset: none)."""
    overheads: OverheadsIn | None = None
    """Client-side overheads; unset: the engine profile's fitted ``request_overhead_s`` as
    preprocessing (HTTP, tokenisation and first-token streaming together). That figure belongs
    to the front-end it was fitted behind: vLLM's (which SGLang borrows) behind ``vllm serve``
    (23 ms), TensorRT-LLM's behind Dynamo's front-end (6 ms); behind another front-end, give
    its own."""
    disaggregation: DisaggregationIn | None = None
    """Run prefill and decode on separate pools (unset: every replica does both)."""
    use_measurements: bool = Field(default=True, examples=[True])
    """Use measured kernel tables when the profile has them (else datasheet roofline)."""
    calibrated: bool = Field(default=True, examples=[True])
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
    preemptions: list[int]
    """Requests preempted (vLLM recompute, SGLang retraction) since the previous sample (at
    the first: up to it), timed at the step whose scheduling evicted them; they sum to every
    preemption of the run, warm-up included."""


class SchedulerConfigOut(ResponseModel):
    """What each simulated engine replica was given (from the memory plan)."""

    policy: str = Field(examples=["vllm_v1"])
    max_num_seqs: int = Field(examples=[1024])
    max_num_batched_tokens: int = Field(examples=[8192])
    kv_block_size: int = Field(examples=[16])
    kv_blocks: int = Field(examples=[29_000])
    engine_replicas: int = Field(examples=[1])
    capacity_policy: str = Field(default="incremental", examples=["guaranteed_no_evict"])
    """KV admission and eviction: ``incremental`` (vLLM), ``guaranteed_no_evict`` or
    ``max_utilization`` (TensorRT-LLM's ``capacity_scheduler_policy``), ``new_token_ratio``
    (SGLang)."""
    prefix_caching: str = Field(default="off", examples=["free_queue_lru"])
    """``off``, ``free_queue_lru`` (vLLM, TensorRT-LLM) or ``radix_lru`` (SGLang)."""


class OverheadsOut(ResponseModel):
    """The client-side overheads added to TTFT and E2E (``total_s``)."""

    preprocess_s: float = Field(examples=[0.0326])
    output_processing_s: float = Field(examples=[0.0])
    network_rtt_s: float = Field(examples=[0.0])
    total_s: float = Field(examples=[0.0326])
    source: Literal["request", "engine_profile"] = Field(examples=["engine_profile"])
    """``engine_profile``: the profile's fitted ``request_overhead_s``, taken as preprocessing."""


class DisaggregationOut(ResponseModel):
    """The two pools and the KV hand-off between them."""

    prefill_replicas: int = Field(examples=[1])
    decode_replicas: int = Field(examples=[2])
    kv_bytes_per_token: int = Field(examples=[131_072])
    """KV bytes per prompt token on one GPU (what each rank sends)."""
    bandwidth_bytes_per_s: float = Field(examples=[450e9])
    latency_s: float = Field(examples=[0.0])
    bandwidth_source: Literal["request", "hardware_interconnect"]
    transfer_s: LatencyOut
    """Transfer time per measured request that went to a decode replica (not waiting for
    blocks)."""


class SimulateResponse(ResponseModel):
    """One simulated run, measured over the requests after the warm-up.

    ``ttft_s`` and ``e2e_s`` are client-observed: they add the client-side overheads
    (``overheads``; ``request_overhead_s`` is their total) to the engine's own figures
    ``engine_ttft_s`` and ``engine_e2e_s`` (send to first / last token inside the engine, queueing
    included), as ``/v1/performance``'s zero-load TTFT does.
    TPOT is ``(E2E − TTFT)/(N − 1)`` per request; ITL pools every gap between streamed tokens.
    When ``stable`` is false the queue grows through the run: the latency statistics then depend
    on how long the run is and are withheld (``null``), and ``stability_reason`` says why;
    throughput is then the saturation throughput.
    """

    model: str = Field(examples=["meta-llama/Llama-3.1-8B"])
    hardware: str = Field(examples=["h100-sxm"])
    engine: str = Field(examples=["vllm"])
    mode: str = Field(examples=["open_loop"])
    engine_config: SchedulerConfigOut
    stable: bool = Field(examples=[True])
    stability_reason: str
    stability_conclusive: bool = Field(examples=[True])
    """False when the measured window was too short (under two mean residences) to tell a
    growing queue from one still filling up: ``stable`` is then false as a precaution, and more
    requests (or warm-up) settle it."""
    ttft_s: LatencyOut | None
    itl_s: LatencyOut | None
    tpot_s: LatencyOut | None
    e2e_s: LatencyOut | None
    engine_ttft_s: LatencyOut | None
    """TTFT inside the engine: ``ttft_s`` without the client-side overheads."""
    engine_e2e_s: LatencyOut | None
    """E2E inside the engine: ``e2e_s`` without the client-side overheads."""
    queueing_delay_s: LatencyOut | None
    """Send to first scheduling, completed requests only (engine clock)."""
    request_overhead_s: float = Field(examples=[0.0326])
    """Total client-side overhead per request (``overheads.total_s``)."""
    overheads: OverheadsOut
    disaggregation: DisaggregationOut | None = None
    offered_rate_per_s: float | None = Field(examples=[5.0])
    throughput_requests_per_s: float | None = Field(examples=[4.98])
    """Completions per second inside the measurement window; for an unstable run, the measured
    requests over the time until the last of them finished (the saturation rate)."""
    throughput_output_tokens_per_s: float | None = Field(examples=[1275.0])
    goodput_requests_per_s: float | None = Field(examples=[4.9])
    """Requests that complete and meet every SLO, per second: ``throughput_requests_per_s ×
    slo_attainment``, the departure rate times the share of measured requests (failures
    included) meeting every limit, so it never exceeds throughput (null without ``slo``)."""
    slo_attainment: float | None = Field(examples=[0.98])
    measured: int = Field(examples=[900])
    """Requests sent inside the measurement window (warm-up and cool-down excluded). The four
    outcome counts below are disjoint and add up to it:
    ``completed + failed + timed_out + rejected = measured``."""
    completed: int = Field(examples=[900])
    """Measured requests that finished within their timeout."""
    failed: int = Field(examples=[0])
    """Measured requests that ended otherwise than completed, timed out or rejected (the
    simulator has no such end today: always 0; neither timeouts nor rejections are in it)."""
    timed_out: int = Field(examples=[0])
    """Measured requests whose client gave up (``traffic.timeout_s``) before the last token."""
    rejected: int = Field(examples=[0])
    """Measured requests the engine refused (longer than the KV cache can ever hold)."""
    preemptions: int = Field(examples=[0])
    peak_kv_utilization: float = Field(examples=[0.12])
    prefix_cache_hit_rate: float | None = Field(default=None, examples=[0.45])
    """Measured prompt tokens served from the prefix cache (null: no cache or no prefixes)."""
    host_kv_hit_rate: float | None = Field(default=None, examples=[0.2])
    """Measured prompt tokens loaded from the host KV tier instead (null: no ``kv_offload``)."""
    memory_bytes_per_gpu: int = Field(examples=[72_000_000_000])
    """Peak memory per GPU: the engine preallocates the KV pool, so this is the memory plan's
    total."""
    littles_law: LittlesLawOut
    window_start_s: float
    window_end_s: float
    time_series: TimeSeriesOut
    histograms: LatencyHistogramsOut | None = None
    """TTFT and ITL histograms (null for an unstable run, as the percentiles are)."""
    defaults_applied: list[AppliedDefaultOut]
    warnings: list[str]
    ttft_s_interval: PredictionIntervalOut | None = None
    """Prediction interval of the mean ``ttft_s`` (from steady-state residuals)."""
    tpot_s_interval: PredictionIntervalOut | None = None
    e2e_s_interval: PredictionIntervalOut | None = None
    throughput_output_tokens_per_s_interval: PredictionIntervalOut | None = None
    """Closed loop only (an open loop's throughput is its arrival rate)."""
    energy: EnergyOut | None = None
    """Power and energy over the window, every replica's GPUs and idle time included."""
