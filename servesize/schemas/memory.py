"""Memory-ledger and KV-budget schemas. Deployment fields use vLLM's engine-argument names."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from servesize.core.memory import Deployment, KVOffload
from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.hardware import InterconnectIn, InterNodeIn, PeakDtype
from servesize.schemas.launch import LaunchOut
from servesize.schemas.models import InlineModel, ModelRef
from servesize.schemas.speculative import SpeculativeIn

Engine = Literal["vllm", "sglang", "trtllm"]


class InlineHardware(RequestModel):
    """A GPU given by its figures instead of a profile id."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    name: str = Field(default="inline", max_length=200, examples=["H100 SXM"])
    """Device name; vLLM's default batch sizes depend on it (A100s get the small ones)."""
    vendor: str = Field(default="unknown", max_length=64, examples=["nvidia"])
    """Manufacturer, for messages."""
    memory_bytes: int = Field(gt=0, le=2**50, examples=[85_899_345_920])
    """Device memory in bytes (80 GiB = 85,899,345,920)."""
    memory_bandwidth_bytes_per_s: int = Field(gt=0, le=10**15, examples=[3_350_000_000_000])
    """Peak memory bandwidth in bytes per second (H100 SXM: 3.35 TB/s)."""
    peak_tflop_per_s: dict[PeakDtype, float | None] = Field(
        default_factory=dict, examples=[{"bf16": 989.4, "fp8": 1978.9}]
    )
    """Dense peak per dtype in TFLOP/s (int8 in TOPS); null or absent = unsupported."""
    interconnect: InterconnectIn | None = Field(
        default=None,
        examples=[{"kind": "nvlink", "bandwidth_bytes_per_s": 450_000_000_000, "gpus_per_node": 8}],
    )
    """The GPU-to-GPU link inside a node, for collectives and KV transfer between
    disaggregated pools. Null: collectives assume PCIe (about 25 GB/s per direction)."""
    inter_node: InterNodeIn | None = Field(
        default=None,
        examples=[
            {"kind": "infiniband", "bandwidth_bytes_per_s": 50_000_000_000, "latency_s": 5e-6}
        ],
    )
    """The link between nodes, for TP × PP groups wider than a node and MoE all-to-alls
    across nodes. Null: the default for the interconnect (NVLink 4+: InfiniBand NDR, 50 GB/s
    per GPU, 5 µs; NVLink 3: HDR, 25 GB/s; none for PCIe)."""
    host_link_bytes_per_s: int | None = Field(
        default=None, gt=0, le=10**13, examples=[50_000_000_000]
    )
    """GPU-to-host bandwidth per direction that a KV offload tier loads at (PCIe Gen5 x16:
    about 50 GB/s achieved; NVLink-C2C: 450 GB/s). Null: 450 GB/s for GH200/GB200/GB300 names,
    else PCIe Gen4's 25 GB/s."""
    host_memory_bytes: int | None = Field(default=None, gt=0, le=2**50, examples=[274877906944])
    """Host memory per GPU; a KV offload tier larger than it is warned about. Null: unchecked."""


class KVOffloadIn(RequestModel):
    """A host-memory KV tier in the engine's own terms: vLLM takes ``size_gib`` (and
    ``backend``), SGLang ``hicache_ratio`` or ``hicache_size_gb``, TensorRT-LLM
    ``host_cache_size_bytes``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    size_gib: float | None = Field(default=None, gt=0, le=2**20, examples=[64])
    """vLLM ``--kv-offloading-size``: GiB of host memory for the whole replica, split evenly
    over its TP × PP ranks (vLLM 0.14.0 and later)."""
    backend: Literal["native", "lmcache"] | None = Field(default=None, examples=["native"])
    """vLLM ``--kv-offloading-backend``. Null: ``native`` (the OffloadingConnector)."""
    hicache_ratio: float | None = Field(default=None, gt=0, le=1000, examples=[2.0])
    """SGLang ``--hicache-ratio``: host pool tokens per device pool token (default 2)."""
    hicache_size_gb: int | None = Field(default=None, ge=1, le=2**20, examples=[100])
    """SGLang ``--hicache-size``: GB (10^9 bytes) of host memory per TP rank; overrides the
    ratio."""
    host_cache_size_bytes: int | None = Field(default=None, ge=1, le=2**50, examples=[68719476736])
    """TensorRT-LLM ``kv_cache_config.host_cache_size``: bytes of host memory per rank for the
    secondary pool of reusable blocks (needs prefix caching on)."""


HardwareRef = str | InlineHardware
"""A profile id (``"h100-sxm"``) or ``{"memory_bytes": ..., ...}``."""


class DeploymentIn(RequestModel):
    """How the model is served. Unset fields take the engine's default for this GPU and
    version; the response lists every default it applied. For SGLang the memory fraction is
    ``mem_fraction_static``; for TensorRT-LLM, ``free_gpu_memory_fraction``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    tensor_parallel_size: int = Field(default=1, ge=1, le=1024, examples=[1, 2])
    """GPUs each layer's weights are split over (``--tensor-parallel-size``)."""
    pipeline_parallel_size: int = Field(default=1, ge=1, le=1024, examples=[1])
    """Pipeline stages the layers are split into (``--pipeline-parallel-size``)."""
    data_parallel_size: int = Field(default=1, ge=1, le=1024, examples=[1])
    """Data-parallel ranks in one engine (``--data-parallel-size``); each holds a full copy of
    the dense weights and its own KV cache."""
    enable_expert_parallel: bool = Field(default=False, examples=[False])
    """Shard MoE experts over ``TP × DP`` GPUs instead of tensor-splitting each expert."""
    dtype: str = Field(default="auto", max_length=32, examples=["auto", "bfloat16"])
    """Activation and unquantized weight dtype: ``auto`` (the checkpoint's ``torch_dtype``;
    fp32 is served as bf16), ``bfloat16``, ``float16`` or ``float32``."""
    quantization: str | None = Field(default=None, max_length=64, examples=["fp8", "awq"])
    """Weight quantization method; must match a quantized checkpoint's ``quant_method``, and
    only ``fp8`` quantizes an unquantized checkpoint online. Null: as the checkpoint is."""
    kv_cache_dtype: str = Field(default="auto", max_length=32, examples=["auto", "fp8"])
    """KV-cache element type: ``auto`` (the model dtype), ``fp8``/``fp8_e4m3``/``fp8_e5m2``,
    ``bfloat16``, ``float16``, or a special layout (``nvfp4``, ``fp8_per_token_head``,
    ``int8_per_token_head``, ``fp8_ds_mla`` for MLA models)."""
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1, examples=[0.9])
    """Fraction of device memory the engine may use (SGLang ``mem_fraction_static``,
    TensorRT-LLM ``free_gpu_memory_fraction``). Null: the engine version's default."""
    max_model_len: int | None = Field(default=None, ge=1, le=2**24, examples=[8192])
    """Longest prompt plus output, in tokens. Null: the model's ``max_position_embeddings``."""
    max_num_seqs: int | None = Field(default=None, ge=1, le=2**20, examples=[256])
    """Most requests running in one step (SGLang ``max_running_requests``, TensorRT-LLM
    ``max_batch_size``). Null: the engine's default for this GPU."""
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=2**24, examples=[8192])
    """Token budget of one step, prefill chunks included (SGLang ``chunked_prefill_size``,
    TensorRT-LLM ``max_num_tokens``). Null: the engine's default for this GPU."""
    block_size: int | None = Field(default=None, ge=1, le=4096, examples=[16])
    """Tokens per KV-cache block (SGLang ``page_size``, TensorRT-LLM ``tokens_per_block``).
    Null: vLLM 16 (64 for MLA models), SGLang 1, TensorRT-LLM 32."""
    enforce_eager: bool = Field(default=False, examples=[False])
    """Disable CUDA graphs: no graph memory, and every step pays per-layer kernel launches."""
    engine: Engine = Field(default="vllm", examples=["vllm"])
    """Serving engine whose defaults, memory accounting and arguments apply."""
    engine_version: str | None = Field(default=None, max_length=32, examples=["0.21.0"])
    """Engine version whose defaults, profile run and KV accounting apply (vLLM 0.6.0 and
    later: V0 before 0.8.0, the hybrid KV manager from 0.10, CUDA graphs charged from 0.21).
    Null: the newest modelled (vLLM 0.21.0, SGLang 0.5.0, TensorRT-LLM 1.0.0)."""
    capacity_scheduler_policy: str | None = Field(
        default=None, max_length=32, examples=["guaranteed_no_evict", "max_utilization"]
    )
    """TensorRT-LLM only (``scheduler_config.capacity_scheduler_policy``):
    ``guaranteed_no_evict`` admits a request only when the KV blocks of its whole prompt and
    output are free and never evicts; ``max_utilization`` admits on the blocks of the next step
    and pauses the newest requests (recomputed later) when the cache runs out. Null: the
    engine's default, ``guaranteed_no_evict``. Refused (422) for vLLM and SGLang."""
    mxfp4_backend: str | None = Field(default=None, max_length=16, examples=["marlin"])
    """vLLM with MXFP4 experts (gpt-oss) only: the expert kernel it loads them for. ``marlin``
    pads each expert to ``round_up(I, 128)`` × ``round_up(H, 256)`` (GPUs before Hopper, and a
    pip install without ``triton_kernels``); ``triton`` keeps the checkpoint's sizes plus a fitted
    load overhead. Null: ``marlin`` on GPUs without FP8 tensor cores, else ``triton``. Refused
    (422) elsewhere."""
    enable_prefix_caching: bool | None = Field(default=None, examples=[True])
    """Reuse the KV blocks of prompt prefixes already computed (vLLM
    ``--enable-prefix-caching``, SGLang's radix cache, TensorRT-LLM
    ``kv_cache_config.enable_block_reuse``). Null: the engine's default — on for vLLM V1
    (0.8.0 and later), SGLang and TensorRT-LLM, off for vLLM V0. It changes predictions only for
    traffic with shared prefixes (``traffic.prefix``, ``workload.prefix``)."""
    kv_offload: KVOffloadIn | None = Field(default=None, examples=[{"size_gib": 64}])
    """A host-memory KV tier (vLLM ``--kv-offloading-size``, SGLang
    ``--enable-hierarchical-cache``): blocks the GPU evicts are kept in host memory and loaded
    back over the host link instead of recomputed. Null: none."""
    speculative: SpeculativeIn | None = None
    """Speculative decoding (EAGLE-3, MTP, n-gram or a draft model); null: none."""

    def core_fields(self) -> dict[str, Any]:
        """The fields of :class:`~servesize.core.memory.Deployment` (``speculative`` apart, its
        draft's memory added by the replica resolver)."""
        fields = self.model_dump(exclude={"kv_offload", "speculative"})
        offload = self.kv_offload
        fields["kv_offload"] = None if offload is None else KVOffload(**offload.model_dump())
        return fields

    def core(self) -> Deployment:
        """The core deployment these fields state (without a speculative draft's memory)."""
        return Deployment(**self.core_fields())


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
    engine_log: list[str]
    """Start-up memory lines vLLM would print (e.g. "GPU KV cache size: 1,234,560 tokens");
    empty for other engines."""
    host_kv_tier: HostKVTierOut | None = None
    """The second KV tier, in host memory (``deployment.kv_offload``); null without one."""
    launch: LaunchOut | None = None
    """The engine's launch commands for this deployment (one replica, ``gpus_per_node`` of the
    profile's interconnect), with every knob it states: parallelism, the KV pool pinned,
    prefix caching, the host KV tier and speculative decoding. Null when the deployment does
    not fit or the engine release cannot launch it (``launch_unsupported``)."""
    launch_unsupported: str | None = None
    """Why there is no launch command (a KV format, layout or speculation method the engine
    release of ``launch.engine_version`` has no form for); null when there is one."""


class HostKVTierOut(ResponseModel):
    """One GPU's host KV tier: what it holds and how fast a block comes back."""

    bytes_per_gpu: int
    tokens: int
    """Host KV tokens per GPU, counted as the device pool counts them."""
    blocks: int
    block_size: int
    block_bytes_per_gpu: int
    host_link_bytes_per_s: int
    host_link_basis: str
    block_load_s: float
    """``block_bytes_per_gpu / host_link_bytes_per_s``."""
    device_tokens: int
    cacheable_tokens: int
    """``max(device, host)`` tokens of distinct cached KV: every computed block is written
    through to the host, so the host tier also holds the device's blocks. Running requests
    are resident on the GPU only; the host tier holds cached blocks to load back."""
    formula: str
    warnings: list[str]


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
