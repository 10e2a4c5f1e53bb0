"""What ``servesize-agent`` uploads to ``POST /v1/hardware/{id}/measurements``.

Units live in the names: seconds (``_s``), bytes (``_bytes``), bytes per second
(``_bytes_per_s``), TFLOP/s (``_tflop_per_s``, 10^12 FLOP per second).
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, model_validator

from servesize.schemas.base import RequestModel

GemmDtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
CollectiveOp = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
BandwidthKind = Literal["copy", "read", "write", "triad"]
LoadMode = Literal["closed_loop", "open_loop"]

PowerSample = Annotated[float, Field(gt=0, le=10_000)]
"""One board-power reading in watts."""

MAX_GEMM_ROWS = 4096
MAX_DIM = 1 << 20


class Provenance(RequestModel):
    """Where, when and how the numbers were measured."""

    agent_version: str = Field(min_length=1, max_length=64)
    method_version: int = Field(
        ge=1,
        le=2**31 - 1,  # a 32-bit INTEGER column
        description="Bumped whenever the measuring method changes.",
    )
    host: str = Field(min_length=1, max_length=255)
    device: str = Field(min_length=1, max_length=64, examples=["cuda:0", "cpu"])
    gpu_name: str = Field(min_length=1, max_length=255, examples=["NVIDIA H100 80GB HBM3"])
    gpu_uuid: str | None = Field(default=None, max_length=128)
    gpu_memory_bytes: int | None = Field(default=None, gt=0)
    driver_version: str | None = Field(default=None, max_length=64)
    cuda_version: str | None = Field(default=None, max_length=64)
    torch_version: str | None = Field(default=None, max_length=64)
    sm_clock_mhz: float | None = Field(default=None, gt=0)
    memory_clock_mhz: float | None = Field(default=None, gt=0)
    power_limit_w: float | None = Field(default=None, gt=0)
    ecc_enabled: bool | None = None
    mig_mode: bool | None = None
    gpu_count: int = Field(default=1, ge=1, le=1024)
    measured_at: datetime


class GemmResult(RequestModel):
    """One matmul ``(M x K) @ (K x N)``: FLOPs = 2·M·N·K, median time of the repeats."""

    dtype: GemmDtype
    m: int = Field(ge=1, le=MAX_DIM)
    n: int = Field(ge=1, le=MAX_DIM)
    k: int = Field(ge=1, le=MAX_DIM)
    latency_s: float = Field(gt=0, le=3600)
    achieved_tflop_per_s: float = Field(gt=0)

    @model_validator(mode="after")
    def _rate_matches_time(self) -> GemmResult:
        implied = 2 * self.m * self.n * self.k / self.latency_s / 1e12
        if abs(implied - self.achieved_tflop_per_s) > 0.01 * implied:
            raise ValueError(
                f"achieved_tflop_per_s {self.achieved_tflop_per_s} disagrees with "
                f"2·m·n·k/latency_s = {implied:.6g}"
            )
        return self


class BandwidthResult(RequestModel):
    """A memory-bandwidth test; ``bytes_moved`` counts reads plus writes."""

    kind: BandwidthKind
    bytes_moved: int = Field(gt=0)
    latency_s: float = Field(gt=0, le=3600)
    achieved_bytes_per_s: float = Field(gt=0)


class CollectiveResult(RequestModel):
    """A collective over ``num_gpus``; bus bandwidth by the nccl-tests factors."""

    op: CollectiveOp
    num_gpus: int = Field(ge=2, le=1024)
    message_bytes: int = Field(gt=0)
    latency_s: float = Field(gt=0, le=3600)
    bus_bandwidth_bytes_per_s: float = Field(gt=0)


class LatencyStats(RequestModel):
    """Summary of a latency sample, in seconds. A percentile the source did not report (e.g.
    ``vllm bench serve`` saves only p99 by default) is ``None``, never guessed; ``std``,
    ``min`` and ``max`` are optional for the same reason."""

    mean: float = Field(ge=0)
    p50: float | None = Field(default=None, ge=0)
    p90: float | None = Field(default=None, ge=0)
    p95: float | None = Field(default=None, ge=0)
    p99: float | None = Field(default=None, ge=0)
    std: float | None = Field(default=None, ge=0)
    min: float | None = Field(default=None, ge=0)
    max: float | None = Field(default=None, ge=0)

    @property
    def absent(self) -> list[str]:
        """The percentiles (``p50``, ``p90``, ``p95``, ``p99``) the source did not report."""
        return [p for p in ("p50", "p90", "p95", "p99") if getattr(self, p) is None]


class EndpointLevel(RequestModel):
    """One load level of an endpoint benchmark. Failed and timed-out requests stay in every
    denominator; TPOT = (E2E − TTFT)/(N − 1); ITL pools every gap between tokens."""

    mode: LoadMode
    concurrency: int | None = Field(default=None, ge=1)
    rate_per_s: float | None = Field(default=None, gt=0)
    requests: int = Field(ge=1)
    completed: int = Field(ge=0)
    failed: int = Field(ge=0)
    timed_out: int = Field(ge=0)
    duration_s: float = Field(gt=0)
    ttft_s: LatencyStats | None
    itl_s: LatencyStats | None
    tpot_s: LatencyStats | None
    e2e_s: LatencyStats | None
    throughput_requests_per_s: float = Field(ge=0)
    throughput_output_tokens_per_s: float = Field(ge=0)
    goodput_requests_per_s: float | None = Field(default=None, ge=0)
    throughput_input_tokens_per_s: float | None = Field(default=None, ge=0)
    throughput_total_tokens_per_s: float | None = Field(
        default=None, ge=0, description="(input + output tokens of completed requests) / duration"
    )
    mean_input_tokens: float | None = Field(
        default=None,
        ge=0,
        description="Mean prompt length of completed requests, as counted by the server",
    )
    mean_output_tokens: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> EndpointLevel:
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise ValueError("give exactly one of concurrency (closed loop) or rate_per_s (open)")
        if (self.mode == "closed_loop") != (self.concurrency is not None):
            raise ValueError("closed_loop levels give concurrency; open_loop give rate_per_s")
        if self.completed + self.failed + self.timed_out != self.requests:
            raise ValueError("completed + failed + timed_out must equal requests")
        return self


class EndpointBenchmark(RequestModel):
    """A live serving endpoint measured at several load levels."""

    model: str = Field(min_length=1, max_length=255)
    engine: str | None = Field(default=None, max_length=64, examples=["vllm", "sglang"])
    engine_version: str | None = Field(default=None, max_length=64)
    source: Literal[
        "servesize-agent", "vllm-bench", "guidellm", "aiperf", "inference-perf", "llm-d"
    ] = "servesize-agent"
    warmup_requests: int | None = Field(
        default=None, ge=0, description="Requests sent before each level and left out of it"
    )
    input_tokens: int | None = Field(default=None, ge=1)
    output_tokens: int | None = Field(default=None, ge=1)
    levels: list[EndpointLevel] = Field(min_length=1, max_length=256)


class MeasurementUpload(RequestModel):
    """A set of measurements of one GPU (or host), never overwritten once stored."""

    provenance: Provenance
    gemm: list[GemmResult] = Field(default_factory=list, max_length=MAX_GEMM_ROWS)
    memory_bandwidth: list[BandwidthResult] = Field(default_factory=list, max_length=256)
    collectives: list[CollectiveResult] = Field(default_factory=list, max_length=4096)
    kernel_launch_overhead_s: float | None = Field(default=None, gt=0, le=0.01)
    endpoint_benchmarks: list[EndpointBenchmark] = Field(default_factory=list, max_length=64)
    power_samples_w: list[PowerSample] = Field(
        default_factory=list,
        max_length=100_000,
        description="NVML board power (nvmlDeviceGetPowerUsage, watts) sampled while the GPU "
        "runs a compute-bound GEMM; their median replaces the TDP as the busy power.",
        examples=[[652.1, 661.8, 658.0]],
    )
    idle_power_samples_w: list[PowerSample] = Field(
        default_factory=list,
        max_length=100_000,
        description="NVML board power with nothing running; their median is the idle power "
        "(default: 11.5 % of the busy power).",
        examples=[[71.2, 70.8]],
    )

    @model_validator(mode="after")
    def _not_empty(self) -> MeasurementUpload:
        if not (
            self.gemm
            or self.memory_bandwidth
            or self.collectives
            or self.kernel_launch_overhead_s
            or self.endpoint_benchmarks
            or self.power_samples_w
        ):
            raise ValueError("an upload must carry at least one measurement")
        return self

    @model_validator(mode="after")
    def _idle_below_busy(self) -> MeasurementUpload:
        idle = self.idle_power_samples_w
        if idle and not self.power_samples_w:
            raise ValueError("idle_power_samples_w needs power_samples_w under load")
        if idle and statistics.median(idle) > statistics.median(self.power_samples_w):
            raise ValueError("the median idle power exceeds the median power under load")
        return self
