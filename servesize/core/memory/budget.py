"""How each engine turns its memory fraction into KV-cache bytes.

- **vLLM** (vllm-project/vllm:vllm/v1/worker/gpu_worker.py): the fraction is of *total*
  memory. ``requested = total · gpu_memory_utilization``;
  ``KV = requested - (weights + activation peak + non-torch growth)``, and from v0.21 also
  ``- CUDA-graph estimate`` (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, default on). What
  was in use before the start-up snapshot (CUDA context) is not charged, but must fit outside:
  vLLM refuses to start when ``free < requested``. The V0 engine (before v0.8.0,
  vllm/worker/worker.py ``determine_num_available_blocks``) applies the same rule; v0.6.0 -
  v0.6.3 charge ``init_free - free_after_profile`` (no context), v0.6.4 all non-torch device
  memory (``used - torch_allocated`` after the profile run), the CUDA context included, and
  from v0.6.5 (``memory_profiling``) only its increase. Until v0.7.0 (PR #11809) "torch" is
  ``allocated_bytes.all.current``, so memory the caching allocator still reserves after
  ``empty_cache`` (segments holding a live block) is charged as non-torch too; that remainder
  depends on where allocations land and is not priced (1.79 GiB in a v0.6.5 H100 log).
  v0.7.0 onwards uses ``torch.cuda.memory_reserved()``.
- **SGLang** (sgl-project/sglang:python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py
  ``profile_max_num_token``): ``KV = free_after_load - free_before_load · (1 - mfs)``, i.e.
  ``mfs · F0 - weights`` with ``F0`` the memory free before loading. Activations and CUDA
  graphs are not profiled; they must fit in ``(1 - mfs) · F0``.
- **TensorRT-LLM** (NVIDIA/TensorRT-LLM:tensorrt_llm/_torch/pyexecutor/_util.py
  ``KvCacheCreator``): the fraction is of memory *free after* weights, the activation peak at
  ``max_num_tokens`` and non-torch memory (NCCL, CUDA graphs):
  ``KV = (total - peak) · free_gpu_memory_fraction``.
"""

from __future__ import annotations

from dataclasses import dataclass

from servesize.core.memory.engine_defaults import (
    VLLM_CUDA_GRAPH_ESTIMATE_VERSION,
    VLLM_MEMORY_PROFILING_VERSION,
    VLLM_NON_TORCH_ALL_VERSION,
    VLLM_V1_VERSION,
)
from servesize.core.memory.units import gib_text

__all__ = ["KvBudget", "sglang_kv_budget", "trtllm_kv_budget", "vllm_kv_budget"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KvBudget:
    """The KV bytes an engine grants, and what it leaves outside its budget."""

    semantics: str
    """Which rule was applied, in words."""
    budget_bytes: int
    """What the engine's fraction grants (vLLM ``requested_memory``; SGLang weights + KV;
    TensorRT-LLM the KV pool)."""
    budget_formula: str
    kv_available_bytes: int
    """KV-cache bytes; zero or negative when nothing is left."""
    kv_formula: str
    cuda_graphs_charged: bool
    """Whether CUDA graphs are inside the budget (else they use the slack)."""
    activations_charged: bool
    slack_bytes: int
    """Device memory outside the budget."""
    start_error: str | None = None
    """Why the engine would refuse to start, if it would."""


def vllm_kv_budget(
    *,
    total_bytes: int,
    gpu_memory_utilization: float,
    version: tuple[int, int, int],
    weights_bytes: int,
    activation_bytes: int,
    non_torch_bytes: int,
    cuda_graph_bytes: int,
    context_bytes: int,
) -> KvBudget:
    """vLLM: ``KV = util · total - weights - activations - non_torch [- graphs]``.

    ``non_torch`` also holds the CUDA context on v0.6.4 (see the module docstring).

    >>> b = vllm_kv_budget(total_bytes=100, gpu_memory_utilization=0.9, version=(0, 10, 0),
    ...     weights_bytes=40, activation_bytes=5, non_torch_bytes=1, cuda_graph_bytes=2,
    ...     context_bytes=1)
    >>> b.budget_bytes, b.kv_available_bytes, b.cuda_graphs_charged
    (90, 44, False)
    >>> vllm_kv_budget(total_bytes=100, gpu_memory_utilization=0.9, version=(0, 6, 4),
    ...     weights_bytes=40, activation_bytes=5, non_torch_bytes=1, cuda_graph_bytes=2,
    ...     context_bytes=1).kv_available_bytes
    43
    """
    requested = int(total_bytes * gpu_memory_utilization)
    charge_graphs = version[:2] >= VLLM_CUDA_GRAPH_ESTIMATE_VERSION
    charge_context = VLLM_NON_TORCH_ALL_VERSION <= version < VLLM_MEMORY_PROFILING_VERSION
    graphs = cuda_graph_bytes if charge_graphs else 0
    non_torch = non_torch_bytes + (context_bytes if charge_context else 0)
    kv = requested - weights_bytes - activation_bytes - non_torch - graphs
    label = ".".join(map(str, version))
    engine = "V0 engine" if version[:2] < VLLM_V1_VERSION else "V1 engine"
    semantics = (
        f"vLLM {label} ({engine}): gpu_memory_utilization is a fraction of total device "
        "memory; KV = budget - weights - activation peak - non-torch"
        + (" - CUDA-graph estimate (profiled since v0.21)" if charge_graphs else "")
        + (
            "; all non-torch memory is charged, the CUDA context included (v0.6.4)"
            if charge_context
            else "; memory used before start-up (CUDA context) is not charged"
        )
        + ("" if charge_graphs else "; CUDA graphs are captured afterwards, in the slack")
    )
    kv_formula = (
        f"{requested:,} - {weights_bytes:,} - {activation_bytes:,} - {non_torch:,}"
        + (f" - {graphs:,}" if charge_graphs else "")
        + f" = {kv:,} B ({gib_text(kv)})"
    )
    free = total_bytes - context_bytes
    error = None
    if free < requested:
        error = (
            f"free memory on device at start-up ({gib_text(free)} of {gib_text(total_bytes)}) "
            f"is less than desired GPU memory utilization ({gpu_memory_utilization:g}, "
            f"{gib_text(requested)}): vLLM refuses to start"
        )
    return KvBudget(
        semantics=semantics,
        budget_bytes=requested,
        budget_formula=(
            f"{gpu_memory_utilization:g} · {total_bytes:,} B total = {requested:,} B "
            f"({gib_text(requested)})"
        ),
        kv_available_bytes=kv,
        kv_formula=kv_formula,
        cuda_graphs_charged=charge_graphs,
        activations_charged=True,
        slack_bytes=total_bytes - requested,
        start_error=error,
    )


def sglang_kv_budget(
    *,
    total_bytes: int,
    mem_fraction_static: float,
    weights_bytes: int,
    context_bytes: int,
) -> KvBudget:
    """SGLang: ``KV = mfs · F0 - weights`` with ``F0 = total - context`` (free before load).

    >>> b = sglang_kv_budget(total_bytes=101, mem_fraction_static=0.8, weights_bytes=30,
    ...                      context_bytes=1)
    >>> b.budget_bytes, b.kv_available_bytes, b.slack_bytes
    (80, 50, 21)
    """
    free = total_bytes - context_bytes
    static = int(free * mem_fraction_static)
    kv = static - weights_bytes
    return KvBudget(
        semantics=(
            "SGLang: mem_fraction_static is the share of memory free before weight loading "
            "given to weights plus the KV pool; activations and CUDA graphs use the rest"
        ),
        budget_bytes=static,
        budget_formula=(
            f"{mem_fraction_static:g} · ({total_bytes:,} - {context_bytes:,}) B free at start "
            f"= {static:,} B ({gib_text(static)})"
        ),
        kv_available_bytes=kv,
        kv_formula=f"{static:,} - {weights_bytes:,} = {kv:,} B ({gib_text(kv)})",
        cuda_graphs_charged=False,
        activations_charged=False,
        slack_bytes=total_bytes - static,
    )


def trtllm_kv_budget(
    *,
    total_bytes: int,
    free_gpu_memory_fraction: float,
    weights_bytes: int,
    activation_bytes: int,
    non_torch_bytes: int,
    cuda_graph_bytes: int,
    context_bytes: int,
) -> KvBudget:
    """TensorRT-LLM: ``KV = (total - peak non-KV) · free_gpu_memory_fraction``.

    >>> b = trtllm_kv_budget(total_bytes=100, free_gpu_memory_fraction=0.9, weights_bytes=40,
    ...     activation_bytes=5, non_torch_bytes=2, cuda_graph_bytes=2, context_bytes=1)
    >>> b.kv_available_bytes  # (100 - 50) · 0.9
    45
    """
    peak = weights_bytes + activation_bytes + non_torch_bytes + cuda_graph_bytes + context_bytes
    free = total_bytes - peak
    kv = int(free * free_gpu_memory_fraction) if free > 0 else free
    return KvBudget(
        semantics=(
            "TensorRT-LLM: free_gpu_memory_fraction is a share of the memory still free after "
            "weights, the activation peak at max_num_tokens, CUDA context, NCCL and CUDA graphs"
        ),
        budget_bytes=kv,
        budget_formula=(
            f"{free_gpu_memory_fraction:g} · ({total_bytes:,} - {peak:,}) B free after "
            f"profiling = {kv:,} B ({gib_text(kv)})"
        ),
        kv_available_bytes=kv,
        kv_formula=(
            f"({total_bytes:,} - {weights_bytes:,} - {activation_bytes:,} - {non_torch_bytes:,} "
            f"- {cuda_graph_bytes:,} - {context_bytes:,}) · {free_gpu_memory_fraction:g} "
            f"= {kv:,} B ({gib_text(kv)})"
        ),
        cuda_graphs_charged=True,
        activations_charged=True,
        slack_bytes=total_bytes - peak - max(kv, 0),
    )
