"""The start-up log lines vLLM prints about memory, as the plan predicts them.

Formats by release (vllm-project/vllm):

- v0.6.0 - v0.6.3 V0: no memory summary, only the block lines below;
- v0.6.4 V0 (vllm/worker/worker.py ``determine_num_available_blocks``):
  ``Memory profiling results: total_gpu_memory=...GiB initial_memory_usage=...GiB
  peak_torch_memory=...GiB memory_usage_post_profile=...GiB non_torch_memory=...GiB
  kv_cache_size=...GiB gpu_memory_utilization=0.90``; weights as ``Loading model weights took
  X GB`` (vllm/worker/model_runner.py, bytes / 2^30 labelled GB);
- v0.6.5 - v0.7.x V0 (``memory_profiling``): ``the current vLLM instance can use
  total_gpu_memory (T GiB) x gpu_memory_utilization (u) = B GiB`` and ``model weights take
  ...GiB; non_torch_memory takes ...GiB; PyTorch activation peak memory takes ...GiB; the rest
  of the memory reserved for KV Cache is ...GiB.``;
- V0 blocks (vllm/executor/gpu_executor.py ``initialize_cache``): ``# GPU blocks: N, # CPU
  blocks: M`` with ``M = swap_space (4 GiB) // block bytes``, then ``Maximum concurrency for L
  tokens per request: (N · block_size / L)x``;
- V1 (v0.8.0+): ``Model loading took X GiB`` (vllm/v1/worker/gpu_model_runner.py ``load_model``,
  four decimals before v0.11.1, then ``X GiB memory``), ``Available KV cache memory: X GiB``
  (vllm/v1/worker/gpu_worker.py ``determine_available_memory``), ``GPU KV cache size: N
  tokens`` and ``Maximum concurrency for L tokens per request: Cx`` (vllm/v1/core/
  kv_cache_utils.py ``_report_kv_cache_config``, thousands separators since PR #13596);
  MXFP4 experts loaded through Marlin are announced first by the warning of
  vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py
  ``prepare_moe_fp4_layer_for_marlin`` (:data:`MARLIN_FP4_WARNING`).

Timings are not predicted and are left out of the lines.
"""

from __future__ import annotations

from servesize.core.memory.engine_defaults import (
    VLLM_MEMORY_PROFILING_VERSION,
    VLLM_NON_TORCH_ALL_VERSION,
    VLLM_V1_VERSION,
)
from servesize.core.memory.evaluation import MemoryEvaluation
from servesize.core.memory.units import GIB

__all__ = ["MARLIN_FP4_WARNING", "SWAP_SPACE_BYTES", "vllm_engine_log"]

MARLIN_FP4_WARNING = (
    "Your GPU does not have native support for FP4 computation but FP4 quantization is being "
    "used. Weight-only FP4 compression will be used leveraging the Marlin kernel. This may "
    "degrade performance for compute-heavy workloads."
)
"""What v0.10.1 and v0.11.0 print when MXFP4 experts load through Marlin."""

SWAP_SPACE_BYTES = 4 * GIB
"""V0 ``CacheConfig.swap_space`` default (4 GiB of CPU blocks per GPU)."""

_GIB_DECIMALS_VERSION = (0, 11, 1)
"""From about this release ``Model loading took`` prints two decimals and "GiB memory"
(unverified boundary: v0.11.0 logs show four decimals, late-2025 logs two)."""


def _g(value: int) -> float:
    return value / GIB


def vllm_engine_log(ev: MemoryEvaluation, tokens: int, concurrency: float) -> tuple[str, ...]:
    """The memory lines vLLM would print at start-up for the limiting GPU of ``ev``.

    ``tokens`` and ``concurrency`` are the plan's "GPU KV cache size" and "Maximum
    concurrency" (:func:`servesize.core.memory.plan._capacity`). Empty for other engines.
    """
    res, stage = ev.res, ev.limiting
    if res.engine != "vllm":
        return ()
    version = res.version
    budget = stage.budget
    weights = stage.weights.total_bytes
    activation = stage.activation.bytes_per_gpu
    kv = budget.kv_available_bytes
    length = res.max_model_len
    context = ev.context.bytes_per_gpu
    growth = ev.non_torch.bytes_per_gpu
    util = res.memory_fraction
    if version[:2] >= VLLM_V1_VERSION:
        loading = (
            f"Model loading took {_g(weights):.4f} GiB"
            if version < _GIB_DECIMALS_VERSION
            else f"Model loading took {_g(weights):.2f} GiB memory"
        )
        marlin = (MARLIN_FP4_WARNING,) if res.mxfp4_backend == "marlin" else ()
        return (
            *marlin,
            loading,
            f"Available KV cache memory: {_g(kv):.2f} GiB",
            f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {length:,} tokens per request: {concurrency:.2f}x",
        )
    lines = [f"Loading model weights took {_g(weights):.4f} GB"]
    if version < VLLM_NON_TORCH_ALL_VERSION:
        pass
    elif version < VLLM_MEMORY_PROFILING_VERSION:
        lines.append(
            f"Memory profiling results: total_gpu_memory={_g(ev.total):.2f}GiB "
            f"initial_memory_usage={_g(context + weights):.2f}GiB "
            f"peak_torch_memory={_g(weights + activation):.2f}GiB "
            f"memory_usage_post_profile={_g(context + weights + growth):.2f}GiB "
            f"non_torch_memory={_g(context + growth):.2f}GiB kv_cache_size={_g(kv):.2f}GiB "
            f"gpu_memory_utilization={util:.2f}"
        )
    else:
        lines.append(
            f"the current vLLM instance can use total_gpu_memory ({_g(ev.total):.2f}GiB) x "
            f"gpu_memory_utilization ({util:.2f}) = {_g(budget.budget_bytes):.2f}GiB"
        )
        lines.append(
            f"model weights take {_g(weights):.2f}GiB; non_torch_memory takes "
            f"{_g(growth):.2f}GiB; PyTorch activation peak memory takes {_g(activation):.2f}GiB; "
            f"the rest of the memory reserved for KV Cache is {_g(kv):.2f}GiB."
        )
    block_bytes = stage.layout.block_bytes
    cpu_blocks = SWAP_SPACE_BYTES // block_bytes if block_bytes else 0
    lines.append(f"# GPU blocks: {stage.blocks}, # CPU blocks: {cpu_blocks}")
    lines.append(f"Maximum concurrency for {length} tokens per request: {concurrency:.2f}x")
    return tuple(lines)
