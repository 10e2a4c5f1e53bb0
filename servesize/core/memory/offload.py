"""KV offload to host memory: the deployment knob, per engine, and the host tier it buys.

Engines and their flags (``Deployment.kv_offload``):

* vLLM (0.14.0 and later): ``--kv-offloading-size GiB --kv-offloading-backend native|lmcache``.
  The size is the replica's, summed over its TP × PP ranks, each rank taking an even share
  (``vllm/config/kv_offloading.py: NativeOffloadingParser.configure_kv_transfer``:
  ``offloading_size_gib · 2^30 / (TP · PP)``; the LMCache parser likewise). The connector is the
  OffloadingConnector (native) or LMCacheConnectorV1; both store every computed block to the
  CPU and load hits back. 0.14.0 is the first release with the flags that also loads a
  preempted request back (vLLM blog, 2026-01-08; PRs #24498, #29870, #32421).
* SGLang (0.5.0 and later): ``--enable-hierarchical-cache`` with ``--hicache-ratio R``
  (host pool = R × the device pool's tokens, default 2.0) or ``--hicache-size N`` (N GB =
  10^9 bytes per TP rank, overriding the ratio), as ``HostKVCache.__init__``
  (``python/sglang/srt/mem_cache/memory_pool_host.py``) sizes it:
  ``size = N·1e9 // size_per_token`` or ``int(device_size · R)``, then aligned up to pages,
  ``(size // page + 1) · page``. The hierarchical cache extends the radix cache, so it needs
  prefix caching on.
* TensorRT-LLM (1.0): ``kv_cache_config.host_cache_size`` bytes of host memory per rank
  (``KvCacheConfig.host_cache_size``, ``tensorrt_llm/llmapi/llm_args.py``: "Size of the host
  cache in bytes"): the KV cache manager's secondary pool, which takes reusable blocks evicted
  from the GPU pool and onboards them back on a hit (``onboard_blocks``, default true), so it
  needs block reuse (prefix caching) on. Modelled like the other two tiers (a block cached in
  the host pool loads back at the host link's bandwidth); ``blocks = host_cache_size //
  block bytes``. A preempted request is not reloaded (the default ``GUARANTEED_NO_EVICT``
  policy never preempts).

The host tier holds cached blocks, not running requests: a request runs only from the GPU pool,
so the batch it can hold is unchanged; what grows is the cache a later request (or a preempted
one, on vLLM) loads from at the host link's bandwidth instead of recomputing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from servesize.core.errors import FieldIssue
from servesize.core.hardware import HardwareSpec, host_link_bandwidth
from servesize.core.memory.units import GIB

__all__ = [
    "SGLANG_DEFAULT_HICACHE_RATIO",
    "SGLANG_HICACHE_OLDEST",
    "VLLM_KV_OFFLOAD_BACKENDS",
    "VLLM_KV_OFFLOAD_OLDEST",
    "HostKVTier",
    "KVOffload",
    "ResolvedKVOffload",
    "host_kv_tier",
    "plan_host_tier",
    "resolve_kv_offload",
]

VLLM_KV_OFFLOAD_OLDEST = (0, 14, 0)
SGLANG_HICACHE_OLDEST = (0, 5, 0)
VLLM_KV_OFFLOAD_BACKENDS = ("native", "lmcache")
SGLANG_DEFAULT_HICACHE_RATIO = 2.0
"""``ServerArgs.hicache_ratio``."""
_FIELD = "/deployment/kv_offload"


@dataclass(frozen=True, slots=True, kw_only=True)
class KVOffload:
    """A host-memory KV tier as the engine's flags state it (module docstring)."""

    size_gib: float | None = None
    """vLLM ``--kv-offloading-size``: GiB of host memory for the whole replica."""
    backend: str | None = None
    """vLLM ``--kv-offloading-backend``: ``native`` (default) or ``lmcache``."""
    hicache_ratio: float | None = None
    """SGLang ``--hicache-ratio``: host tokens per device token (default 2.0)."""
    hicache_size_gb: int | None = None
    """SGLang ``--hicache-size``: GB (10^9 bytes) per TP rank; overrides the ratio."""
    host_cache_size_bytes: int | None = None
    """TensorRT-LLM ``kv_cache_config.host_cache_size``: bytes of host memory per rank."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedKVOffload:
    """The offload tier with its defaults applied."""

    engine: str
    size_gib: float | None
    backend: str | None
    hicache_ratio: float | None
    hicache_size_gb: int | None
    overlap: bool
    host_cache_size_bytes: int | None = None
    """Loads run layer by layer under the forward pass (SGLang)."""
    reloads_preempted: bool
    """A preempted request loads its blocks back (vLLM 0.14+); SGLang recomputes."""


def resolve_kv_offload(
    offload: KVOffload | None,
    *,
    engine: str,
    version: tuple[int, int, int],
    prefix_caching: bool,
    issues: list[FieldIssue],
    default: Callable[[str, object, str], None],
) -> ResolvedKVOffload | None:
    """Check ``offload`` against the engine and release; every problem names its field."""
    if offload is None:
        return None

    def bad(field: str, problem: str) -> None:
        issues.append(FieldIssue(field=f"{_FIELD}/{field}" if field else _FIELD, problem=problem))

    sglang_fields = offload.hicache_ratio is not None or offload.hicache_size_gb is not None
    vllm_fields = offload.size_gib is not None or offload.backend is not None
    trtllm_field = offload.host_cache_size_bytes is not None
    if trtllm_field and engine != "trtllm":
        bad("host_cache_size_bytes", "TensorRT-LLM's kv_cache_config.host_cache_size")
    if engine == "vllm":
        if version < VLLM_KV_OFFLOAD_OLDEST:
            bad("", "vLLM takes --kv-offloading-size from 0.14.0; older releases are not modelled")
        if sglang_fields:
            bad("hicache_ratio", "SGLang's hierarchical-cache settings; vLLM takes size_gib")
        if offload.size_gib is None or not offload.size_gib > 0:
            bad("size_gib", "required for vLLM and must be > 0 (--kv-offloading-size, GiB)")
        backend = offload.backend or "native"
        if offload.backend is None:
            default("kv_offload.backend", backend, "vLLM default (--kv-offloading-backend)")
        elif backend not in VLLM_KV_OFFLOAD_BACKENDS:
            bad("backend", f"{backend!r} is not one of {', '.join(VLLM_KV_OFFLOAD_BACKENDS)}")
        return ResolvedKVOffload(
            engine=engine,
            size_gib=offload.size_gib,
            backend=backend,
            hicache_ratio=None,
            hicache_size_gb=None,
            overlap=False,
            reloads_preempted=True,
        )
    if engine == "sglang":
        if version < SGLANG_HICACHE_OLDEST:
            bad("", "SGLang's hierarchical cache is modelled from 0.5.0")
        if vllm_fields:
            bad("size_gib", "vLLM's settings; SGLang takes hicache_ratio or hicache_size_gb")
        if not prefix_caching:
            bad("", "SGLang's hierarchical cache extends the radix cache: enable prefix caching")
        ratio = offload.hicache_ratio
        if offload.hicache_size_gb is not None and offload.hicache_size_gb < 1:
            bad("hicache_size_gb", f"must be >= 1, got {offload.hicache_size_gb}")
        if ratio is not None and not ratio > 0:
            bad("hicache_ratio", f"must be > 0, got {ratio}")
        if ratio is None and offload.hicache_size_gb is None:
            ratio = SGLANG_DEFAULT_HICACHE_RATIO
            default("kv_offload.hicache_ratio", ratio, "SGLang default (--hicache-ratio)")
        return ResolvedKVOffload(
            engine=engine,
            size_gib=None,
            backend=None,
            hicache_ratio=ratio,
            hicache_size_gb=offload.hicache_size_gb,
            overlap=True,
            reloads_preempted=False,
        )
    if engine != "trtllm":
        bad("", f"KV offload is modelled for vLLM, SGLang and TensorRT-LLM, not {engine}")
        return None
    if vllm_fields or sglang_fields:
        bad("size_gib", "vLLM's or SGLang's settings; TensorRT-LLM takes host_cache_size_bytes")
    size = offload.host_cache_size_bytes
    if size is None or size < 1:
        bad("host_cache_size_bytes", "required for TensorRT-LLM and must be >= 1 byte")
    if not prefix_caching:
        bad("", "TensorRT-LLM's host cache holds reusable blocks: enable prefix caching")
    return ResolvedKVOffload(
        engine=engine,
        size_gib=None,
        backend=None,
        hicache_ratio=None,
        hicache_size_gb=None,
        host_cache_size_bytes=size,
        overlap=False,
        reloads_preempted=False,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HostKVTier:
    """The host tier of one GPU (every GPU of the replica holds its share of each block).

    ``blocks`` and ``tokens`` count as the device pool does (``block_size`` tokens of the
    GPU's layers and heads); a block loads in ``block_load_s`` over the host link.
    """

    bytes_per_gpu: int
    tokens: int
    blocks: int
    block_size: int
    block_bytes_per_gpu: int
    host_link_bytes_per_s: int
    host_link_basis: str
    block_load_s: float
    device_tokens: int
    cacheable_tokens: int
    """``max(device, host)``: both engines write every computed block through to the host, so
    the host tier holds the device's blocks as well (inclusive)."""
    formula: str
    warnings: tuple[str, ...] = ()


def host_kv_tier(
    offload: ResolvedKVOffload,
    *,
    hardware: HardwareSpec,
    kv_bytes_per_token_per_gpu: int,
    block_size: int,
    device_tokens: int,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
) -> HostKVTier:
    """The host tier's size per GPU and its load time per block (module docstring).

    >>> from servesize.core.hardware import HardwareSpec
    >>> h100 = HardwareSpec(id="h100", vendor="NVIDIA", name="H100 SXM", memory_bytes=1,
    ...                     memory_bandwidth_bytes_per_s=1, host_link_bytes_per_s=50 * 10**9)
    >>> vllm = resolve_kv_offload(KVOffload(size_gib=64), engine="vllm", version=(0, 21, 0),
    ...     prefix_caching=True, issues=[], default=lambda *a: None)
    >>> tier = host_kv_tier(vllm, hardware=h100, kv_bytes_per_token_per_gpu=131072,
    ...     block_size=16, device_tokens=400_000, tensor_parallel_size=1,
    ...     pipeline_parallel_size=1)
    >>> tier.tokens, round(tier.block_load_s * 1e6, 2)
    (524288, 41.94)
    """
    per_token = max(kv_bytes_per_token_per_gpu, 1)
    block_bytes = per_token * block_size
    link, basis = host_link_bandwidth(hardware)
    warnings: list[str] = []
    if offload.engine == "vllm":
        assert offload.size_gib is not None
        ranks = tensor_parallel_size * pipeline_parallel_size
        share = int(offload.size_gib * GIB) // ranks
        blocks = share // block_bytes
        tokens = blocks * block_size
        formula = (
            f"{offload.size_gib:g} GiB / {ranks} ranks = {share} B per GPU; "
            f"{share} // ({per_token} B/token · {block_size}) = {blocks} blocks"
        )
    elif offload.engine == "trtllm":
        assert offload.host_cache_size_bytes is not None
        share = offload.host_cache_size_bytes
        blocks = share // block_bytes
        tokens = blocks * block_size
        formula = (
            f"host_cache_size {share} B per rank // ({per_token} B/token · {block_size}) = "
            f"{blocks} blocks"
        )
    else:
        page = block_size
        if offload.hicache_size_gb:
            size = int(offload.hicache_size_gb * 10**9 // per_token)
            how = f"{offload.hicache_size_gb} GB · 1e9 // {per_token} B/token = {size}"
        else:
            ratio = offload.hicache_ratio or SGLANG_DEFAULT_HICACHE_RATIO
            size = int(device_tokens * ratio)
            how = f"int({device_tokens} device tokens · {ratio:g}) = {size}"
        tokens = (size // page + 1) * page
        blocks = tokens // block_size
        formula = f"{how}; aligned up to pages of {page}: {tokens} tokens"
        if tokens <= device_tokens:
            warnings.append(
                f"the host pool ({tokens} tokens) is not larger than the device pool "
                f"({device_tokens}); SGLang warns (or, in older releases, refuses to start)"
            )
    host_bytes = tokens * per_token
    if hardware.host_memory_bytes is not None and host_bytes > hardware.host_memory_bytes:
        warnings.append(
            f"the host tier needs {host_bytes / GIB:.1f} GiB per GPU but the profile's host "
            f"memory is {hardware.host_memory_bytes / GIB:.1f} GiB per GPU; pinning it fails"
        )
    return HostKVTier(
        bytes_per_gpu=host_bytes,
        tokens=tokens,
        blocks=blocks,
        block_size=block_size,
        block_bytes_per_gpu=block_bytes,
        host_link_bytes_per_s=link,
        host_link_basis=basis,
        block_load_s=block_bytes / link,
        device_tokens=device_tokens,
        cacheable_tokens=max(device_tokens, tokens),
        formula=formula,
        warnings=tuple(warnings),
    )


def plan_host_tier(
    deployment: ResolvedKVOffload | None,
    *,
    hardware: HardwareSpec,
    kv_bytes_per_token_per_gpu: int,
    block_size: int,
    device_tokens: int,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
) -> HostKVTier | None:
    """:func:`host_kv_tier` when the deployment has an offload tier, else None."""
    if deployment is None:
        return None
    return host_kv_tier(
        deployment,
        hardware=hardware,
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu,
        block_size=block_size,
        device_tokens=device_tokens,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
    )
