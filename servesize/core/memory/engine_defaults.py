"""Engine defaults that depend on the GPU and the engine version.

vLLM (vllm-project/vllm):

- ``gpu_memory_utilization``: 0.9 up to v0.20 (vllm/config/cache.py), 0.92 from v0.21.0
  (PR #38284, which also turned CUDA-graph memory profiling on by default).
- ``max_num_seqs`` / ``max_num_batched_tokens`` for ``vllm serve``
  (vllm/engine/arg_utils.py ``get_batch_defaults``): 1024 / 8192 when the device has at least
  70 GiB and is not an A100, else 256 / 2048. The device split came with PR #17885 (v0.9.0);
  V1 releases before it serve with 256 / 2048 on every device. Left unset,
  ``max_num_batched_tokens`` becomes ``min(max_num_seqs * max_model_len, default)`` and
  ``max_num_seqs`` at most ``max_num_batched_tokens``.
- ``block_size``: 16 (``CacheConfig.DEFAULT_BLOCK_SIZE``); MLA models get 64, the FlashMLA
  kernel's page size (vllm/platforms/cuda.py; unverified for every backend).
- Releases before v0.8.0 run the V0 engine (:data:`VLLM_V1_VERSION`), whose scheduler defaults
  differ (vllm/config.py ``SchedulerConfig.__post_init__``, vllm/engine/arg_utils.py of v0.6.x):
  ``max_num_seqs`` 256; chunked prefill is switched on when ``max_model_len > 32768``
  (``EngineArgs.create_engine_config``), with a 512-token budget (unverified for v0.7.x),
  else ``max_num_batched_tokens = max(max_model_len, 2048)``: the profile run then covers a
  whole ``max_model_len`` prompt (:func:`vllm_v0_scheduler_defaults`).

SGLang (sgl-project/sglang:python/sglang/srt/server_args.py ``_handle_gpu_memory_settings``):
``chunked_prefill_size`` and ``cuda_graph_max_bs`` by GPU memory bucket, then
``mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3)`` with
``reserved = 512 + 1.5 * max(chunked_prefill_size, 2048) + 2 * cuda_graph_max_bs
+ 1024 * TP * PP / 8`` MB, at least 10 GiB on GPUs above 60 GiB.

TensorRT-LLM (``KvCacheConfig``, nvidia.github.io/TensorRT-LLM/llm-api/reference):
``free_gpu_memory_fraction`` 0.9, ``tokens_per_block`` 32, ``max_num_tokens`` 8192.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servesize.core.memory.units import GIB

__all__ = [
    "ENGINES",
    "TRTLLM_CAPACITY_SCHEDULER_POLICIES",
    "VLLM_CUDA_GRAPH_ESTIMATE_VERSION",
    "VLLM_DEVICE_BATCH_DEFAULTS_VERSION",
    "VLLM_HYBRID_KV_VERSION",
    "VLLM_MEMORY_PROFILING_VERSION",
    "VLLM_NON_TORCH_ALL_VERSION",
    "VLLM_OLDEST_VERSION",
    "VLLM_V1_VERSION",
    "SglangMemoryDefaults",
    "VllmV0SchedulerDefaults",
    "parse_version",
    "sglang_memory_defaults",
    "vllm_batch_defaults",
    "vllm_gpu_memory_utilization",
    "vllm_v0_scheduler_defaults",
]

ENGINES = ("vllm", "sglang", "trtllm")

TRTLLM_CAPACITY_SCHEDULER_POLICIES = ("guaranteed_no_evict", "max_utilization")
"""TensorRT-LLM's ``SchedulerConfig.capacity_scheduler_policy`` values that are modelled, the
default first (``CapacitySchedulerPolicy.GUARANTEED_NO_EVICT`` in ``tensorrt_llm/llmapi/
llm_args.py``; ``STATIC_BATCH`` is not). vLLM and SGLang have no such knob."""

VLLM_CUDA_GRAPH_ESTIMATE_VERSION = (0, 21)
"""From this vLLM release the profiler estimates CUDA-graph memory and subtracts it from the
KV budget (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to 1), and the default
``gpu_memory_utilization`` is 0.92."""

VLLM_V1_VERSION = (0, 8)
"""First release whose ``vllm serve`` runs the V1 engine by default (``VLLM_USE_V1=1``): older
releases profile, pool and log the KV cache the V0 way (vllm/worker/worker.py)."""

VLLM_DEVICE_BATCH_DEFAULTS_VERSION = (0, 9)
"""First release whose ``vllm serve`` batch defaults depend on the device (PR #17885)."""

VLLM_HYBRID_KV_VERSION = (0, 10)
"""From this release the V1 hybrid KV cache manager (PR #17996, merged June 2025; first
release unverified between v0.9.2 and v0.10.0) groups sliding-window, full and linear-attention
layers separately (vllm/v1/core/kv_cache_utils.py ``_get_kv_cache_groups_uniform_page_size``);
before it ``unify_hybrid_kv_cache_specs`` stores sliding-window layers as full attention."""

VLLM_NON_TORCH_ALL_VERSION = (0, 6, 4)
"""V0 releases from this one up to :data:`VLLM_MEMORY_PROFILING_VERSION` charge all non-torch
device memory, the CUDA context included (``non_torch_allocations = used - torch_allocated``
after the profile run, PR #9352; first release unverified). Earlier V0 releases charge
``init_free - free_after_profile`` (weights, profile peak and non-torch growth, no context)."""

VLLM_MEMORY_PROFILING_VERSION = (0, 6, 5)
"""From this V0 release ``determine_num_available_blocks`` charges only the *increase* of
non-torch memory during profiling (``memory_profiling``, PR #10511)."""

VLLM_OLDEST_VERSION = (0, 6, 0)
"""Oldest vLLM release whose start-up memory accounting is modelled."""

V0_CHUNKED_PREFILL_MIN_LEN = 32768
"""V0 turns chunked prefill on by itself above this ``max_model_len`` (EngineArgs)."""

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``"v0.10.1.post1"`` -> ``(0, 10, 1)``; None when it is not a version.

    >>> parse_version("0.21.0rc1"), parse_version("latest")
    ((0, 21, 0), None)
    """
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3] or 0)


def vllm_gpu_memory_utilization(version: tuple[int, int, int]) -> float:
    """Default ``gpu_memory_utilization`` of a vLLM release."""
    return 0.92 if version[:2] >= VLLM_CUDA_GRAPH_ESTIMATE_VERSION else 0.9


def vllm_batch_defaults(
    device_total_bytes: int,
    device_name: str,
    version: tuple[int, int, int] = (0, 21, 0),
) -> tuple[int, int]:
    """``(max_num_seqs, max_num_batched_tokens)`` defaults of ``vllm serve`` (V1) on a device.

    >>> vllm_batch_defaults(85_000_000_000, "H100 SXM"), vllm_batch_defaults(85 * 10**9, "A100")
    ((1024, 8192), (256, 2048))
    >>> vllm_batch_defaults(85_000_000_000, "H100 SXM", (0, 8, 5))
    (256, 2048)
    """
    if version[:2] < VLLM_DEVICE_BATCH_DEFAULTS_VERSION:
        return 256, 2048
    if device_total_bytes >= 70 * GIB and "a100" not in device_name.lower():
        return 1024, 8192
    return 256, 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class VllmV0SchedulerDefaults:
    """``max_num_seqs`` / ``max_num_batched_tokens`` of a V0 release, and why."""

    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    reason: str


def vllm_v0_scheduler_defaults(
    max_model_len: int, max_num_seqs: int | None = None
) -> VllmV0SchedulerDefaults:
    """The V0 (v0.6.x - v0.7.x) scheduler defaults for ``max_model_len``.

    ``vllm serve`` with 20,000 tokens: no chunked prefill, the profile run is one
    ``max(20000, 2048)``-token batch; with 40,960 tokens chunked prefill takes over at 512.

    >>> vllm_v0_scheduler_defaults(20000).max_num_batched_tokens
    20000
    >>> d = vllm_v0_scheduler_defaults(40960)
    >>> d.chunked_prefill, d.max_num_batched_tokens, d.max_num_seqs
    (True, 512, 256)
    """
    seqs = 256 if max_num_seqs is None else max_num_seqs
    if max_model_len > V0_CHUNKED_PREFILL_MIN_LEN:
        return VllmV0SchedulerDefaults(
            max_num_seqs=seqs,
            max_num_batched_tokens=512,
            chunked_prefill=True,
            reason=(
                f"V0: max_model_len > {V0_CHUNKED_PREFILL_MIN_LEN} turns chunked prefill on "
                "with a 512-token budget"
            ),
        )
    return VllmV0SchedulerDefaults(
        max_num_seqs=seqs,
        max_num_batched_tokens=max(max_model_len, 2048),
        chunked_prefill=False,
        reason="V0 without chunked prefill: max(max_model_len, 2048)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SglangMemoryDefaults:
    """SGLang's memory-related defaults for one GPU and parallel layout."""

    chunked_prefill_size: int
    cuda_graph_max_bs: int
    reserved_mb: float
    mem_fraction_static: float


def sglang_memory_defaults(gpu_mem_mb: float, tp_size: int, pp_size: int) -> SglangMemoryDefaults:
    """SGLang's ``_handle_gpu_memory_settings`` for a GPU of ``gpu_mem_mb`` MiB.

    H100 80 GB (81,559 MiB), TP 1: reserved ``512 + 1.5*8192 + 2*256 + 1024/8 = 13,440`` MB,
    ``mem_fraction_static = round((81559 - 13440) / 81559, 3) = 0.835``.

    >>> sglang_memory_defaults(81559, 1, 1).mem_fraction_static
    0.835
    """
    small_tp = tp_size < 4
    if gpu_mem_mb < 20 * 1024:
        chunk, graph_bs = 2048, 8
    elif gpu_mem_mb < 35 * 1024:
        chunk, graph_bs = 2048, 24 if small_tp else 80
    elif gpu_mem_mb < 60 * 1024:
        chunk, graph_bs = 4096, 32 if small_tp else 160
    elif gpu_mem_mb < 160 * 1024:
        chunk, graph_bs = 8192, 256 if small_tp else 512
    else:
        chunk, graph_bs = 16384, 512
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp_size * pp_size / 8 * 1024
    if gpu_mem_mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    fraction = round((gpu_mem_mb - reserved) / gpu_mem_mb, 3)
    return SglangMemoryDefaults(
        chunked_prefill_size=chunk,
        cuda_graph_max_bs=graph_bs,
        reserved_mb=reserved,
        mem_fraction_static=fraction,
    )
