"""The deployment request (vLLM's argument names) and its resolution against model and GPU.

``resolve_deployment`` fills every ``None`` with the engine's default for this GPU and
version, records each default it applied, and refuses what the engine would refuse:

- ``num_attention_heads % TP != 0`` ("Total number of attention heads (..) must be divisible
  by tensor parallel size (..)", vllm/config/model.py ``verify_with_parallel_config``), and
  KV heads that neither divide nor are divided by TP (``QKVParallelLinear``'s ``divide``);
- MLP / expert widths not divisible by their TP degree (``divide`` in ``linear.py`` and
  ``FusedMoE``);
- more pipeline stages than layers; expert parallelism on a dense model;
- ``TP * PP`` beyond the GPUs of one node without a link between nodes, or beyond the
  NVLink domain of an ``nvlink_domain`` link (:mod:`.multinode`);
- ``max_model_len`` above the model's ``max_position_embeddings`` (vLLM's
  ``_get_and_verify_max_len`` without ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``);
- zero or negative memory, fractions outside (0, 1], non-positive sizes.

All problems are reported at once as :class:`InvalidDeploymentError` issues with JSON
pointers under ``/deployment`` and ``/hardware``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from servesize.core.architecture import (
    Architecture,
    DenseMlp,
    GatedDeltaNet,
    LatentAttention,
    MambaMixer,
    MoeMlp,
    MultiHeadAttention,
)
from servesize.core.dtypes import canonical_dtype
from servesize.core.errors import FieldIssue
from servesize.core.hardware import HardwareSpec
from servesize.core.memory.constants import DEFAULT_CONSTANTS, MemoryConstants
from servesize.core.memory.engine_defaults import (
    ENGINES,
    TRTLLM_CAPACITY_SCHEDULER_POLICIES,
    VLLM_OLDEST_VERSION,
    VLLM_V1_VERSION,
    parse_version,
    sglang_memory_defaults,
    vllm_batch_defaults,
    vllm_gpu_memory_utilization,
    vllm_v0_scheduler_defaults,
)
from servesize.core.memory.errors import InvalidDeploymentError
from servesize.core.memory.kv_format import KV_CACHE_DTYPES, KvCacheFormat, resolve_kv_format
from servesize.core.memory.multinode import multi_node_problem
from servesize.core.memory.mxfp4 import resolve_mxfp4_backend
from servesize.core.memory.offload import KVOffload, ResolvedKVOffload, resolve_kv_offload
from servesize.core.memory.prefix_caching import prefix_caching_default
from servesize.core.memory.scheme import WeightScheme, resolve_weight_scheme
from servesize.core.memory.units import MIB

__all__ = [
    "DEFAULT_ENGINE_VERSIONS",
    "AppliedDefault",
    "Deployment",
    "ResolvedDeployment",
    "device_total_bytes",
    "resolve_deployment",
]

DEFAULT_ENGINE_VERSIONS = {"vllm": "0.21.0", "sglang": "0.5.0", "trtllm": "1.0.0"}
"""Version assumed when ``engine_version`` is None: the newest behaviour modelled."""

_Default = Callable[[str, object, str], None]
_DTYPES = {"auto", "bfloat16", "bf16", "float16", "fp16", "half", "float32", "fp32", "float"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """How the model is served; field names follow vLLM's engine arguments.

    ``None`` means "the engine's default"; the plan lists every default it applied. For
    SGLang, ``gpu_memory_utilization`` is ``mem_fraction_static``, ``max_num_batched_tokens``
    is ``chunked_prefill_size``, ``max_num_seqs`` is ``max_running_requests`` and
    ``block_size`` is ``page_size``. For TensorRT-LLM they are ``free_gpu_memory_fraction``,
    ``max_num_tokens``, ``max_batch_size`` and ``tokens_per_block``.
    ``capacity_scheduler_policy`` is TensorRT-LLM's only (``guaranteed_no_evict`` or
    ``max_utilization``; None: ``guaranteed_no_evict``). ``enable_prefix_caching`` is vLLM's
    name for SGLang's radix cache (``not disable_radix_cache``) and TensorRT-LLM's
    ``kv_cache_config.enable_block_reuse``; None: the engine's default.
    """

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    enforce_eager: bool = False
    engine: str = "vllm"
    engine_version: str | None = None
    capacity_scheduler_policy: str | None = None
    mxfp4_backend: str | None = None
    """vLLM only, MXFP4 experts: ``marlin`` or ``triton`` (:mod:`servesize.core.memory.mxfp4`);
    None: Marlin on GPUs without FP8 tensor cores, else Triton."""
    enable_prefix_caching: bool | None = None
    kv_offload: KVOffload | None = None
    """A host-memory KV tier (:mod:`~.offload`); None: none."""
    draft_weight_bytes_per_gpu: int = 0
    """Speculative decoding: the draft's (or head's) weights on each GPU of the last stage
    (:mod:`servesize.core.replica.speculative`)."""
    draft_kv_layers: int = 0
    """Speculative decoding: layers of the target's KV shape the draft's own KV adds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AppliedDefault:
    """A value the planner chose because the request left it unset."""

    field: str
    value: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedDeployment:
    """A deployment with every default applied and every constraint checked."""

    engine: str
    engine_version: str
    version: tuple[int, int, int]
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    enable_expert_parallel: bool
    expert_parallel_size: int
    """``TP * DP`` with expert parallelism on, else 1."""
    moe_tensor_parallel_size: int
    """TP degree of routed experts: ``TP * DP`` without expert parallelism, else 1."""
    dtype: str
    weights: WeightScheme
    kv_cache: KvCacheFormat
    memory_fraction: float
    """``gpu_memory_utilization`` / ``mem_fraction_static`` / ``free_gpu_memory_fraction``."""
    max_model_len: int
    max_num_seqs: int | None
    """None for SGLang, which derives ``max_running_requests`` from the KV pool."""
    max_num_batched_tokens: int
    block_size: int
    enforce_eager: bool
    cuda_graph_max_bs: int | None = None
    """SGLang only."""
    capacity_scheduler_policy: str | None = None
    """TensorRT-LLM only: ``guaranteed_no_evict`` (its default) or ``max_utilization``."""
    mxfp4_backend: str | None = None
    """vLLM with MXFP4 experts only: ``marlin`` or ``triton``."""
    enable_prefix_caching: bool = False
    """Whether cached prefix blocks are reused (:mod:`~.prefix_caching`)."""
    kv_offload: ResolvedKVOffload | None = None
    """The host KV tier (:mod:`~.offload`), None without one."""
    draft_weight_bytes_per_gpu: int = 0
    draft_kv_layers: int = 0
    defaults: tuple[AppliedDefault, ...] = ()


def device_total_bytes(hardware: HardwareSpec, constants: MemoryConstants) -> int:
    """Memory CUDA reports as total (``cudaMemGetInfo``), from a measurement or the datasheet.

    >>> from servesize.core.hardware import HardwareSpec
    >>> h100 = HardwareSpec(id="h100", vendor="NVIDIA", name="H100 SXM",
    ...                     memory_bytes=80 * 2**30, memory_bandwidth_bytes_per_s=3350 * 10**9)
    >>> round(device_total_bytes(h100, DEFAULT_CONSTANTS) / 2**30, 2)
    79.18
    """
    if constants.device_total_bytes is not None:
        return constants.device_total_bytes
    return int(hardware.memory_bytes * (1.0 - constants.device_reserved_fraction))


def _issue(issues: list[FieldIssue], name: str, problem: str) -> None:
    issues.append(FieldIssue(field=f"/deployment/{name}", problem=problem))


def _check_positive(issues: list[FieldIssue], name: str, value: int | None) -> None:
    if value is not None and value < 1:
        _issue(issues, name, f"must be >= 1, got {value}")


def _check_parallelism(
    arch: Architecture, dep: Deployment, hardware: HardwareSpec, issues: list[FieldIssue]
) -> None:
    tp, pp, dp = dep.tensor_parallel_size, dep.pipeline_parallel_size, dep.data_parallel_size
    if min(tp, pp, dp) < 1:
        return
    mixers = {layer.mixer for layer in arch.layers}
    for mixer in mixers:
        if isinstance(mixer, MultiHeadAttention | LatentAttention) and mixer.num_heads % tp:
            _issue(
                issues,
                "tensor_parallel_size",
                f"{mixer.num_heads} attention heads are not divisible by tensor_parallel_size "
                f"{tp} (vLLM requires it)",
            )
        if isinstance(mixer, MultiHeadAttention):
            kv = mixer.num_kv_heads
            if (tp >= kv and tp % kv) or (tp < kv and kv % tp):
                _issue(
                    issues,
                    "tensor_parallel_size",
                    f"{kv} KV heads can neither be split over nor replicated across "
                    f"tensor_parallel_size {tp}",
                )
        if isinstance(mixer, GatedDeltaNet) and (
            mixer.num_key_heads % tp or mixer.num_value_heads % tp
        ):
            _issue(
                issues,
                "tensor_parallel_size",
                f"linear-attention heads ({mixer.num_key_heads} key, {mixer.num_value_heads} "
                f"value) are not divisible by tensor_parallel_size {tp}",
            )
        if isinstance(mixer, MambaMixer) and _mamba_tp_problem(mixer, tp):
            _issue(issues, "tensor_parallel_size", _mamba_tp_problem(mixer, tp))
    has_moe = any(isinstance(layer.mlp, MoeMlp) for layer in arch.layers)
    moe_tp = 1 if dep.enable_expert_parallel else tp * dp
    for mlp in {layer.mlp for layer in arch.layers}:
        if isinstance(mlp, DenseMlp) and mlp.intermediate_size % tp:
            _issue(
                issues,
                "tensor_parallel_size",
                f"MLP width {mlp.intermediate_size} is not divisible by tensor_parallel_size {tp}",
            )
        if isinstance(mlp, MoeMlp) and mlp.expert_intermediate_size % moe_tp:
            _issue(
                issues,
                "tensor_parallel_size",
                f"expert width {mlp.expert_intermediate_size} is not divisible by the MoE "
                f"tensor-parallel degree TP·DP = {moe_tp}; enable expert parallelism instead",
            )
    if dep.enable_expert_parallel and not has_moe:
        _issue(issues, "enable_expert_parallel", f"{arch.name} has no mixture-of-experts layers")
    if pp > len(arch.layers):
        _issue(
            issues,
            "pipeline_parallel_size",
            f"{pp} stages exceed the model's {len(arch.layers)} layers",
        )
    problem = multi_node_problem(hardware, tp=tp, pp=pp)
    if problem is not None:
        _issue(issues, "tensor_parallel_size", problem)
        if pp > 1:
            _issue(issues, "pipeline_parallel_size", problem)


def _capacity_scheduler_policy(
    dep: Deployment, issues: list[FieldIssue], default: _Default
) -> str | None:
    """TensorRT-LLM's capacity scheduler policy (its default when unset); None for the others,
    which refuse one."""
    value = dep.capacity_scheduler_policy
    if dep.engine != "trtllm":
        if value is not None:
            _issue(
                issues,
                "capacity_scheduler_policy",
                f"{dep.engine} has no capacity scheduler policy (a TensorRT-LLM setting); "
                "leave it unset",
            )
        return None
    allowed = TRTLLM_CAPACITY_SCHEDULER_POLICIES
    if value is None:
        default("capacity_scheduler_policy", allowed[0], "TensorRT-LLM default")
        return allowed[0]
    key = value.strip().lower()
    if key not in allowed:
        _issue(
            issues,
            "capacity_scheduler_policy",
            f"{value!r} is not one of {', '.join(allowed)}",
        )
        return allowed[0]
    return key


def _version(dep: Deployment, issues: list[FieldIssue]) -> tuple[str, tuple[int, int, int]]:
    engine = dep.engine if dep.engine in ENGINES else "vllm"
    text = dep.engine_version or DEFAULT_ENGINE_VERSIONS[engine]
    parsed = parse_version(text)
    if parsed is None:
        _issue(issues, "engine_version", f"{text!r} is not a version such as '0.10.1'")
        parsed = (0, 0, 0)
    elif engine == "vllm" and parsed < VLLM_OLDEST_VERSION:
        oldest = ".".join(map(str, VLLM_OLDEST_VERSION))
        _issue(
            issues,
            "engine_version",
            f"vLLM {text} predates the oldest release modelled ({oldest}): its start-up "
            "memory profiling differs",
        )
    return text, parsed


def resolve_deployment(
    arch: Architecture,
    hardware: HardwareSpec,
    deployment: Deployment,
    constants: MemoryConstants = DEFAULT_CONSTANTS,
) -> ResolvedDeployment:
    """Check ``deployment`` against the model and GPU and apply the engine's defaults.

    Raises
    ------
    InvalidDeploymentError
        Listing every invalid field (JSON pointers under ``/deployment`` and ``/hardware``).
    """
    dep = deployment
    issues: list[FieldIssue] = []
    applied: list[AppliedDefault] = []

    def default(name: str, value: object, reason: str) -> None:
        applied.append(AppliedDefault(field=name, value=str(value), reason=reason))

    if hardware.memory_bytes <= 0:
        issues.append(
            FieldIssue(
                field="/hardware/memory_bytes", problem=f"must be > 0, got {hardware.memory_bytes}"
            )
        )
    if dep.engine not in ENGINES:
        _issue(issues, "engine", f"{dep.engine!r} is not one of {', '.join(ENGINES)}")
    for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        _check_positive(issues, name, getattr(dep, name))
    for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size"):
        _check_positive(issues, name, getattr(dep, name))
    seqs, batched = dep.max_num_seqs, dep.max_num_batched_tokens
    if dep.engine == "vllm" and seqs is not None and batched is not None and 1 <= batched < seqs:
        # vllm/config/scheduler.py (SchedulerConfig._verify_args) refuses to start.
        _issue(
            issues,
            "max_num_batched_tokens",
            f"{batched} is below max_num_seqs ({seqs}); vLLM refuses a token budget smaller "
            "than the running batch",
        )
    if dep.gpu_memory_utilization is not None and not 0.0 < dep.gpu_memory_utilization <= 1.0:
        _issue(
            issues,
            "gpu_memory_utilization",
            f"must be in (0, 1], got {dep.gpu_memory_utilization}",
        )
    capacity = _capacity_scheduler_policy(dep, issues, default)
    _check_parallelism(arch, dep, hardware, issues)
    version_text, version = _version(dep, issues)
    if dep.engine_version is None:
        default("engine_version", version_text, f"newest {dep.engine} behaviour modelled")
    prefix_caching = dep.enable_prefix_caching
    if prefix_caching is None:
        prefix_caching, why = prefix_caching_default(dep.engine, version)
        default("enable_prefix_caching", str(prefix_caching).lower(), why)
    offload = resolve_kv_offload(
        dep.kv_offload,
        engine=dep.engine,
        version=version,
        prefix_caching=prefix_caching,
        issues=issues,
        default=default,
    )

    dtype = _dtype(arch, dep, issues, default)
    scheme = resolve_weight_scheme(arch.quantization, dep.quantization, dtype)
    if isinstance(scheme, str):
        field = "/deployment/quantization" if dep.quantization else "/model/quantization_config"
        issues.append(FieldIssue(field=field, problem=scheme))
        scheme = WeightScheme(method="none", model_dtype=dtype, quantized=None)
    kv = _kv_format(arch, dep, dtype, issues, default)
    mxfp4 = resolve_mxfp4_backend(dep.mxfp4_backend, dep.engine, scheme, hardware, issues, default)

    limit = arch.max_position_embeddings
    if dep.max_model_len is None:
        if limit is None:
            _issue(
                issues, "max_model_len", "required: the model config has no max_position_embeddings"
            )
            max_model_len = 1
        else:
            max_model_len = limit
            default("max_model_len", limit, "the model's max_position_embeddings")
    else:
        max_model_len = dep.max_model_len
        if limit is not None and max_model_len > limit:
            _issue(
                issues,
                "max_model_len",
                f"{max_model_len} exceeds the model's limit of {limit} tokens "
                "(max_position_embeddings)",
            )
    if issues:
        raise InvalidDeploymentError(issues)

    tp, pp, dp = dep.tensor_parallel_size, dep.pipeline_parallel_size, dep.data_parallel_size
    total = device_total_bytes(hardware, constants)
    fraction, seqs, batched, block, graph_bs = _engine_sizes(
        arch, hardware, dep, version, total, max_model_len, default
    )
    return ResolvedDeployment(
        engine=dep.engine,
        engine_version=version_text,
        version=version,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        enable_expert_parallel=dep.enable_expert_parallel,
        expert_parallel_size=tp * dp if dep.enable_expert_parallel else 1,
        moe_tensor_parallel_size=1 if dep.enable_expert_parallel else tp * dp,
        dtype=dtype,
        weights=scheme,
        kv_cache=kv,
        memory_fraction=fraction,
        max_model_len=max_model_len,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        block_size=block,
        enforce_eager=dep.enforce_eager,
        cuda_graph_max_bs=graph_bs,
        capacity_scheduler_policy=capacity,
        mxfp4_backend=mxfp4,
        enable_prefix_caching=prefix_caching,
        kv_offload=offload,
        draft_weight_bytes_per_gpu=dep.draft_weight_bytes_per_gpu,
        draft_kv_layers=dep.draft_kv_layers,
        defaults=tuple(applied),
    )


def _dtype(arch: Architecture, dep: Deployment, issues: list[FieldIssue], default: _Default) -> str:
    key = dep.dtype.strip().lower()
    if key not in _DTYPES:
        _issue(issues, "dtype", f"{dep.dtype!r} is not one of auto, bfloat16, float16, float32")
        return "bf16"
    if key != "auto":
        return canonical_dtype(key)
    dtype = arch.weight_dtype if arch.weight_dtype in ("bf16", "fp16", "fp32") else "bf16"
    if dtype == "fp32":
        dtype = "bf16"
        default(
            "dtype", dtype, "auto: fp32 checkpoints are served in bf16 (vLLM _get_and_verify_dtype)"
        )
    else:
        default("dtype", dtype, "auto: the checkpoint's torch_dtype")
    return dtype


def _kv_format(
    arch: Architecture,
    dep: Deployment,
    dtype: str,
    issues: list[FieldIssue],
    default: _Default,
) -> KvCacheFormat:
    kv = resolve_kv_format(dep.kv_cache_dtype, dtype)
    if kv is None:
        _issue(
            issues,
            "kv_cache_dtype",
            f"{dep.kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}",
        )
        return KvCacheFormat(name=dtype, element_dtype=dtype)
    is_mla = any(isinstance(layer.mixer, LatentAttention) for layer in arch.layers)
    if kv.layout == "ds_mla" and not is_mla:
        _issue(issues, "kv_cache_dtype", "fp8_ds_mla applies to MLA models only")
    if dep.kv_cache_dtype.strip().lower() == "auto":
        default("kv_cache_dtype", kv.name, "auto: the model dtype")
    return kv


def _engine_sizes(
    arch: Architecture,
    hardware: HardwareSpec,
    dep: Deployment,
    version: tuple[int, int, int],
    total: int,
    max_model_len: int,
    default: _Default,
) -> tuple[float, int | None, int, int, int | None]:
    """``(memory fraction, max_num_seqs, max_num_batched_tokens, block size, graph bs)``."""
    is_mla = any(isinstance(layer.mixer, LatentAttention) for layer in arch.layers)
    if dep.engine == "sglang":
        mb = total / MIB
        sg = sglang_memory_defaults(mb, dep.tensor_parallel_size, dep.pipeline_parallel_size)
        fraction = dep.gpu_memory_utilization
        if fraction is None:
            fraction = sg.mem_fraction_static
            default(
                "gpu_memory_utilization",
                fraction,
                f"SGLang mem_fraction_static = round(({mb:.0f} - {sg.reserved_mb:.0f}) / "
                f"{mb:.0f}, 3) MB",
            )
        batched = dep.max_num_batched_tokens
        if batched is None:
            batched = sg.chunked_prefill_size
            default("max_num_batched_tokens", batched, "SGLang chunked_prefill_size for this GPU")
        block = dep.block_size
        if block is None:
            block = 1
            default("block_size", 1, "SGLang page_size 1 (token-granular pool)")
        return fraction, dep.max_num_seqs, batched, block, sg.cuda_graph_max_bs
    if dep.engine == "trtllm":
        fraction = dep.gpu_memory_utilization
        if fraction is None:
            fraction = 0.9
            default("gpu_memory_utilization", 0.9, "TensorRT-LLM free_gpu_memory_fraction")
        batched = dep.max_num_batched_tokens
        if batched is None:
            batched = 8192
            default("max_num_batched_tokens", 8192, "TensorRT-LLM max_num_tokens")
        seqs = dep.max_num_seqs
        if seqs is None:
            seqs = 2048
            default(
                "max_num_seqs",
                2048,
                "TensorRT-LLM max_batch_size (tensorrt_llm/llmapi/llm_args.py: BaseLlmArgs)",
            )
        block = dep.block_size
        if block is None:
            block = 32
            default("block_size", 32, "TensorRT-LLM tokens_per_block")
        return fraction, seqs, batched, block, None
    fraction = dep.gpu_memory_utilization
    if fraction is None:
        fraction = vllm_gpu_memory_utilization(version)
        default("gpu_memory_utilization", fraction, f"vLLM {'.'.join(map(str, version))} default")
    seqs = dep.max_num_seqs
    batched = dep.max_num_batched_tokens
    block = dep.block_size
    if block is None:
        block = 64 if is_mla else 16
        reason = "FlashMLA page size for MLA models" if is_mla else "vLLM DEFAULT_BLOCK_SIZE"
        default("block_size", block, reason)
    if version[:2] < VLLM_V1_VERSION:
        v0 = vllm_v0_scheduler_defaults(max_model_len, seqs)
        if batched is None:
            batched = v0.max_num_batched_tokens
            default("max_num_batched_tokens", batched, v0.reason)
        if seqs is None:
            seqs = v0.max_num_seqs
            default("max_num_seqs", seqs, "V0 SchedulerConfig default")
        return fraction, seqs, batched, block, None
    seq_default, batched_default = vllm_batch_defaults(total, hardware.name, version)
    label = f"vllm serve default on {hardware.name}"
    if batched is None:
        base_seqs = seqs if seqs is not None else seq_default
        batched = min(base_seqs * max_model_len, batched_default)
        default(
            "max_num_batched_tokens",
            batched,
            f"{label}: min(max_num_seqs · max_model_len, {batched_default})",
        )
    if seqs is None:
        seqs = min(seq_default, batched)
        default("max_num_seqs", seqs, f"{label}: min({seq_default}, max_num_batched_tokens)")
    return fraction, seqs, batched, block, None


def _mamba_tp_problem(mixer: MambaMixer, tp: int) -> str:
    """vLLM ``MambaMixer2``: heads must split over TP, and groups either split or be one
    (replicated); ``MambaMixer`` (Mamba-1) splits ``d_inner``."""
    if mixer.version == 1:
        if mixer.d_inner % tp:
            return f"Mamba d_inner {mixer.d_inner} is not divisible by tensor_parallel_size {tp}"
        return ""
    if mixer.num_heads % tp:
        return f"{mixer.num_heads} Mamba heads are not divisible by tensor_parallel_size {tp}"
    if mixer.n_groups % tp and mixer.n_groups != 1:
        return (
            f"{mixer.n_groups} Mamba groups can neither be split over nor replicated across "
            f"tensor_parallel_size {tp}"
        )
    return ""
