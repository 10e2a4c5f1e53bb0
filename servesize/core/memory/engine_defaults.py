"""Engine defaults that depend on the GPU and the engine version.

vLLM (vllm-project/vllm):

- ``gpu_memory_utilization``: 0.9 up to v0.20 (vllm/config/cache.py), 0.92 from v0.21.0
  (PR #38284, which also turned CUDA-graph memory profiling on by default).
- ``max_num_seqs`` / ``max_num_batched_tokens`` for ``vllm serve``
  (vllm/engine/arg_utils.py ``get_batch_defaults``): 1024 / 8192 when the device has at least
  70 GiB and is not an A100, else 256 / 2048. Left unset, ``max_num_batched_tokens`` becomes
  ``min(max_num_seqs * max_model_len, default)`` and ``max_num_seqs`` at most
  ``max_num_batched_tokens``.
- ``block_size``: 16 (``CacheConfig.DEFAULT_BLOCK_SIZE``); MLA models get 64, the FlashMLA
  kernel's page size (vllm/platforms/cuda.py; unverified for every backend).

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
    "SglangMemoryDefaults",
    "parse_version",
    "sglang_memory_defaults",
    "vllm_batch_defaults",
    "vllm_gpu_memory_utilization",
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


def vllm_batch_defaults(device_total_bytes: int, device_name: str) -> tuple[int, int]:
    """``(max_num_seqs, max_num_batched_tokens)`` defaults of ``vllm serve`` on a device.

    >>> vllm_batch_defaults(85_000_000_000, "H100 SXM"), vllm_batch_defaults(85 * 10**9, "A100")
    ((1024, 8192), (256, 2048))
    """
    if device_total_bytes >= 70 * GIB and "a100" not in device_name.lower():
        return 1024, 8192
    return 256, 2048


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
