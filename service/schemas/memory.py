"""Memory-ledger and KV-budget schemas. Deployment fields use vLLM's engine-argument names."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from service.schemas.base import RequestModel, ResponseModel
from service.schemas.hardware import InterconnectIn, PeakDtype
from service.schemas.models import InlineModel, ModelRef

Engine = Literal["vllm", "sglang", "trtllm"]


class InlineHardware(RequestModel):
    """A GPU given by its figures instead of a profile id."""

    name: str = Field(default="inline", max_length=200)
    vendor: str = Field(default="unknown", max_length=64)
    memory_bytes: int = Field(gt=0, le=2**50)
    memory_bandwidth_bytes_per_s: int = Field(gt=0, le=10**15)
    peak_tflop_per_s: dict[PeakDtype, float | None] = Field(default_factory=dict)
    interconnect: InterconnectIn | None = None


HardwareRef = str | InlineHardware
"""A profile id (``"h100-sxm"``) or ``{"memory_bytes": ..., ...}``."""


class DeploymentIn(RequestModel):
    """How the model is served. Unset fields take the engine's default for this GPU and
    version; the response lists every default it applied. For SGLang the memory fraction is
    ``mem_fraction_static``; for TensorRT-LLM, ``free_gpu_memory_fraction``."""

    tensor_parallel_size: int = Field(default=1, ge=1, le=1024)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=1024)
    data_parallel_size: int = Field(default=1, ge=1, le=1024)
    enable_expert_parallel: bool = False
    dtype: str = Field(default="auto", max_length=32, examples=["auto", "bfloat16"])
    quantization: str | None = Field(default=None, max_length=64, examples=["fp8", "awq"])
    kv_cache_dtype: str = Field(default="auto", max_length=32, examples=["auto", "fp8"])
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1, le=2**24)
    max_num_seqs: int | None = Field(default=None, ge=1, le=2**20)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=2**24)
    block_size: int | None = Field(default=None, ge=1, le=4096)
    enforce_eager: bool = False
    engine: Engine = "vllm"
    engine_version: str | None = Field(default=None, max_length=32, examples=["0.21.0"])


class MemoryRequest(RequestModel):
    model: ModelRef = Field(examples=["meta-llama/Llama-3.1-8B"])
    hardware: HardwareRef = Field(examples=["h100-sxm"])
    deployment: DeploymentIn = Field(default_factory=DeploymentIn)
    request_lengths: list[int] = Field(default_factory=list, max_length=64)
    """Extra lengths (tokens per request) to report concurrency for."""
    request_weights: list[float] | None = Field(default=None, max_length=64)
    """Relative frequency of each of ``request_lengths``; adds a mix estimate."""


class LineItemOut(ResponseModel):
    name: str
    bytes_per_gpu: int
    formula: str
    category: str


class AppliedDefaultOut(ResponseModel):
    field: str
    value: str
    reason: str


class ConcurrencyOut(ResponseModel):
    tokens_per_request: float
    blocks_per_request: float
    kv_tokens_per_request: float
    kv_bytes_per_request: float
    max_concurrency: float


class StageOut(ResponseModel):
    stage: int
    first_layer: int
    num_layers: int
    weights_bytes_per_gpu: int
    kv_available_bytes_per_gpu: int
    kv_blocks: int


class SuggestionsOut(ResponseModel):
    largest_max_model_len: int | None
    smallest_tensor_parallel_size: int | None
    gpu_memory_utilization_needed: float | None
    notes: list[str]


class MemoryResponse(ResponseModel):
    """Where every byte of the most loaded GPU goes, and what that allows."""

    model: str
    hardware: str
    engine: str
    engine_version: str
    budget_semantics: str
    fits: bool
    reasons: list[str]
    warnings: list[str]
    weights_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    kv_cache_bytes_per_gpu: int
    kv_available_bytes_per_gpu: int
    kv_capacity_tokens: int
    kv_block_size: int
    kv_blocks: int
    max_concurrency: float
    max_model_len: int
    request_kv_bytes: int
    device_total_bytes: int
    budget_bytes: int
    activation_bytes_per_gpu: int
    non_torch_bytes_per_gpu: int
    cuda_graph_bytes_per_gpu: int
    total_bytes_per_gpu: int
    line_items: list[LineItemOut]
    suggestions: SuggestionsOut
    defaults_applied: list[AppliedDefaultOut]
    concurrency: list[ConcurrencyOut]
    stages: list[StageOut]


class KvBudgetRequest(RequestModel):
    """The seed's calculator: give a model or the raw geometry, and two of
    ``concurrency``, ``tokens_per_sequence``, ``memory_bytes``; the third is computed."""

    model: ModelRef | None = None
    num_layers: int | None = Field(default=None, ge=1, le=10_000)
    num_kv_heads: int | None = Field(default=None, ge=1, le=100_000)
    head_dim: int | None = Field(default=None, ge=1, le=100_000)
    bytes_per_element: float | None = Field(default=None, gt=0, le=16)
    kv_cache_dtype: str = Field(default="auto", max_length=32)
    tensor_parallel_size: int = Field(default=1, ge=1, le=1024)
    concurrency: int | None = Field(default=None, ge=1)
    tokens_per_sequence: int | None = Field(default=None, ge=1)
    memory_bytes: int | None = Field(default=None, ge=1)
    block_size: int | None = Field(default=None, ge=1, le=4096)


class KvBudgetResponse(ResponseModel):
    kv_bytes: int | None
    max_concurrency: int | None
    max_tokens_per_sequence: int | None
    bytes_per_token: int
    formula: str


__all__ = ["HardwareRef", "InlineHardware", "InlineModel"]
