"""The memory plan of one deployment: every line item, the KV pool, fit and suggestions.

``plan_memory`` resolves the deployment (engine defaults for this GPU), prices each pipeline
stage (weights, activation peak, non-torch, CUDA graphs, KV layout), applies the engine's
budget rule (:mod:`servesize.core.memory.budget`; both in
:mod:`servesize.core.memory.evaluation`) and reports the GPU that limits the KV pool
(the fewest blocks; vLLM takes the minimum over workers). Results are per GPU and, for token
capacity and concurrency, per replica.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from servesize.core.architecture import Architecture, MoeMlp
from servesize.core.hardware.spec import HardwareSpec
from servesize.core.memory.concurrency import ConcurrencyEstimate, concurrency_for_lengths
from servesize.core.memory.constants import DEFAULT_CONSTANTS, MemoryConstants
from servesize.core.memory.deployment import (
    AppliedDefault,
    Deployment,
    ResolvedDeployment,
    resolve_deployment,
)
from servesize.core.memory.engine_defaults import (
    VLLM_CUDA_GRAPH_ESTIMATE_VERSION,
    VLLM_V1_VERSION,
)
from servesize.core.memory.engine_log import vllm_engine_log
from servesize.core.memory.evaluation import MemoryEvaluation, evaluate_deployment, fit_failures
from servesize.core.memory.kv import KvLayout
from servesize.core.memory.ledger import LineItem
from servesize.core.memory.units import gib_text

__all__ = [
    "USAGE_CATEGORIES",
    "MemoryPlan",
    "StageSummary",
    "Suggestions",
    "evaluate_memory",
    "plan_memory",
]

USAGE_CATEGORIES = (
    "weights",
    "activations",
    "non_torch",
    "cuda_graphs",
    "reserve",
    "kv_cache",
    "unallocated",
)
"""Line-item categories that occupy device memory; ``info`` lines explain, they do not add."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StageSummary:
    """One pipeline stage, as seen from one of its GPUs."""

    stage: int
    first_layer: int
    num_layers: int
    weights_bytes_per_gpu: int
    kv_available_bytes_per_gpu: int
    kv_blocks: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestions:
    """Changes that make the deployment fit (None where no such change exists)."""

    largest_max_model_len: int | None
    """Longest ``max_model_len`` whose single worst-case request fits the KV memory."""
    smallest_tensor_parallel_size: int | None
    """Smallest TP (same other settings) that fits, within one node."""
    gpu_memory_utilization_needed: float | None
    """Smallest memory fraction (engine semantics) that fits one ``max_model_len`` request."""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPlan:
    """Where every byte of one GPU goes, and what that allows."""

    model: str
    hardware: str
    engine: str
    engine_version: str
    budget_semantics: str
    deployment: ResolvedDeployment
    line_items: tuple[LineItem, ...]
    device_total_bytes: int
    """Total memory as CUDA reports it."""
    budget_bytes: int
    weights_bytes_per_gpu: int
    activation_bytes_per_gpu: int
    non_torch_bytes_per_gpu: int
    cuda_graph_bytes_per_gpu: int
    kv_available_bytes_per_gpu: int
    """What the engine's rule leaves for the KV cache (negative when over budget)."""
    kv_cache_bytes_per_gpu: int
    """The allocated pool: ``kv_blocks`` blocks of ``group_size`` pages."""
    kv_bytes_per_token_per_gpu: int
    kv_block_size: int
    kv_blocks: int
    kv_capacity_tokens: int
    """Per replica, as the engine logs it ("GPU KV cache size: N tokens")."""
    max_concurrency: float
    """Requests of ``max_model_len`` tokens the pool holds at once, per replica."""
    max_model_len: int
    request_kv_bytes: int
    """KV bytes one worst-case ``max_model_len`` request needs on this GPU."""
    total_bytes_per_gpu: int
    """Sum of the usage line items (everything but ``info`` lines)."""
    fits: bool
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    suggestions: Suggestions
    defaults_applied: tuple[AppliedDefault, ...]
    concurrency: tuple[ConcurrencyEstimate, ...]
    stages: tuple[StageSummary, ...]
    layout: KvLayout
    constants: MemoryConstants
    engine_log: tuple[str, ...] = ()
    """The memory lines the engine prints at start-up, predicted (vLLM only; see
    :mod:`servesize.core.memory.engine_log`)."""


def _capacity(ev: MemoryEvaluation) -> tuple[int, float]:
    """``(GPU KV cache size in tokens, maximum concurrency at max_model_len)`` as logged.

    - V0 (vllm/executor/gpu_executor.py ``initialize_cache``):
      ``tokens = num_gpu_blocks · block_size``, ``concurrency = tokens / max_model_len``;
    - V1 before v0.21 (vllm/v1/core/kv_cache_utils.py ``_report_kv_cache_config``):
      ``tokens = num_blocks // num_groups · block_size`` and ``concurrency =
      get_max_concurrency_for_kv_cache_config`` = blocks / blocks one ``max_model_len``
      request holds over all its groups; from v0.21 ``tokens = int(concurrency ·
      max_model_len)``.
    """
    stage, res = ev.limiting, ev.res
    layout, blocks = stage.layout, stage.blocks
    length = res.max_model_len
    per_request = layout.blocks_per_request(length)
    concurrency = blocks / per_request if per_request else 0.0
    if res.engine == "vllm" and res.version[:2] < VLLM_V1_VERSION:
        tokens = blocks * layout.block_size
        return tokens, tokens / length
    if res.engine == "trtllm":
        per_token = layout.kv_bytes_per_token
        available = stage.budget.kv_available_bytes
        tokens = available // per_token if per_token and available > 0 else 0
    elif res.engine == "sglang" or res.version[:2] < VLLM_CUDA_GRAPH_ESTIMATE_VERSION:
        tokens = blocks // sum(layout.groups) * layout.block_size
    else:
        tokens = int(concurrency * length)
    return tokens, concurrency


def _largest_len(ev: MemoryEvaluation, limit: int) -> int | None:
    layout, available = ev.limiting.layout, ev.limiting.budget.kv_available_bytes
    if available <= 0 or layout.request_bytes(1) > available:
        return None
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout.request_bytes(mid) <= available:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _fraction_needed(ev: MemoryEvaluation) -> float | None:
    stage, res, total = ev.limiting, ev.res, ev.total
    need = stage.layout.request_bytes(res.max_model_len)
    budget = stage.budget
    weights = stage.weights.total_bytes
    if res.engine == "sglang":
        fraction = (weights + need) / (total - ev.context.bytes_per_gpu)
    elif res.engine == "trtllm":
        if budget.kv_available_bytes <= 0:
            return None
        fraction = need / (budget.kv_available_bytes / res.memory_fraction)
    else:
        used = budget.budget_bytes - budget.kv_available_bytes
        fraction = (used + need) / total
    fraction = max(math.ceil(fraction * 100 - 1e-9) / 100, 0.01)
    if res.engine == "vllm" and fraction * total > total - ev.context.bytes_per_gpu:
        return None
    return fraction if fraction <= 1.0 else None


def _smallest_tp(
    arch: Architecture,
    hardware: HardwareSpec,
    deployment: Deployment,
    constants: MemoryConstants,
) -> int | None:
    node = hardware.interconnect.gpus_per_node if hardware.interconnect else 8
    tp = 1
    while tp * deployment.pipeline_parallel_size <= node:
        try:
            res = resolve_deployment(
                arch, hardware, replace(deployment, tensor_parallel_size=tp), constants
            )
        except ValueError:
            tp *= 2
            continue
        if evaluate_deployment(arch, hardware, res, constants).fits:
            return tp
        tp *= 2
    return None


def _suggestions(
    ev: MemoryEvaluation,
    arch: Architecture,
    hardware: HardwareSpec,
    deployment: Deployment,
    constants: MemoryConstants,
    limit: int,
) -> Suggestions:
    res = ev.res
    largest = _largest_len(ev, limit)
    tp = _smallest_tp(arch, hardware, deployment, constants)
    fraction = _fraction_needed(ev)
    notes: list[str] = []
    if not ev.fits:
        if largest is not None and largest < res.max_model_len:
            notes.append(f"set max_model_len to at most {largest}")
        if tp is not None and tp != res.tensor_parallel_size:
            notes.append(f"use tensor_parallel_size {tp}")
        if fraction is not None and fraction > res.memory_fraction:
            name = {
                "vllm": "gpu_memory_utilization",
                "sglang": "mem_fraction_static",
                "trtllm": "free_gpu_memory_fraction",
            }[res.engine]
            notes.append(f"raise {name} to {fraction:g}")
        if not notes:
            notes.append("no single change fits: use a GPU with more memory or quantize")
    return Suggestions(
        largest_max_model_len=largest,
        smallest_tensor_parallel_size=tp,
        gpu_memory_utilization_needed=fraction,
        notes=tuple(notes),
    )


def _warnings(ev: MemoryEvaluation, arch: Architecture, constants: MemoryConstants) -> list[str]:
    res, stage = ev.res, ev.limiting
    budget = stage.budget
    out: list[str] = []
    needs = [("CUDA context", ev.context.bytes_per_gpu)]
    if not budget.cuda_graphs_charged and ev.graphs.bytes_per_gpu:
        needs.append(("CUDA graphs", ev.graphs.bytes_per_gpu))
    if not budget.activations_charged:
        needs.append(("activations", stage.activation.bytes_per_gpu))
        needs.append(("non-torch memory", ev.non_torch.bytes_per_gpu))
    needs.append(("allocator headroom", constants.allocator_headroom_bytes))
    needed = sum(b for _, b in needs)
    if budget.slack_bytes < needed:
        listed = " + ".join(f"{name} {gib_text(b)}" for name, b in needs)
        out.append(
            f"only {gib_text(budget.slack_bytes)} is left outside the {res.engine} budget for "
            f"{listed} = {gib_text(needed)}: lower the memory fraction; do not allocate every "
            "byte of device memory to the estimate"
        )
    elif res.memory_fraction >= 0.98:
        out.append(
            f"memory fraction {res.memory_fraction:g} leaves almost nothing for fragmentation "
            "and other processes: do not allocate every byte of device memory to the estimate"
        )
    layout = stage.layout
    if layout.padding_layers:
        waste = layout.padding_layers / (layout.group_size * sum(layout.groups))
        out.append(
            f"vLLM pads {layout.padding_layers} layers into groups of {layout.group_size}: up to "
            f"{waste:.0%} of the KV pool may be wasted"
        )
    windowed = any(s.window_tokens or s.state_bytes for s in stage.specs)
    if res.engine != "vllm" and windowed:
        out.append(
            f"{res.engine}: sliding-window and linear-attention pools are not modelled; "
            "windowed layers are counted as full attention"
        )
    elif windowed and not layout.engine_grouping:
        out.append(
            f"vLLM {res.engine_version} has no hybrid KV cache manager: sliding-window layers "
            "are stored as full attention"
        )
    if res.enable_expert_parallel:
        moe = next((la.mlp for la in arch.layers if isinstance(la.mlp, MoeMlp)), None)
        if moe is not None and moe.num_experts < res.expert_parallel_size:
            out.append(
                f"{moe.num_experts} experts over {res.expert_parallel_size} EP ranks: some ranks "
                "hold no experts"
            )
    if res.data_parallel_size > 1:
        out.append(
            f"capacity and concurrency are per replica; {res.data_parallel_size} replicas hold "
            f"{res.data_parallel_size}x as much"
        )
    if arch.multimodal:
        out.append("vision/audio encoders and their profile run are not in the ledger")
    return out


def _info_items(ev: MemoryEvaluation) -> list[LineItem]:
    stage, res = ev.limiting, ev.res
    items = [
        LineItem(
            name="device memory (CUDA total)",
            bytes_per_gpu=ev.total,
            formula=f"{ev.total:,} B ({gib_text(ev.total)})",
            category="info",
        ),
        LineItem(
            name=f"budget ({res.engine})",
            bytes_per_gpu=stage.budget.budget_bytes,
            formula=stage.budget.budget_formula,
            category="info",
        ),
        LineItem(
            name="available for KV cache",
            bytes_per_gpu=stage.budget.kv_available_bytes,
            formula=stage.budget.kv_formula,
            category="info",
        ),
    ]
    for spec in stage.specs:
        if spec.state_bytes:
            items.append(
                LineItem(
                    name=f"KV state per sequence: {spec.kind}",
                    bytes_per_gpu=spec.state_bytes * spec.layers,
                    formula=f"{spec.layers} layers · {spec.formula}",
                    category="info",
                )
            )
        else:
            size = spec.bytes_per_token * spec.layers
            items.append(
                LineItem(
                    name=f"KV per token: {spec.kind}",
                    bytes_per_gpu=size,
                    formula=f"{spec.layers} layers · ({spec.formula}) = {size:,} B/token",
                    category="info",
                )
            )
    request = stage.layout.request_bytes(res.max_model_len)
    items.append(
        LineItem(
            name=f"KV for one request of max_model_len {res.max_model_len}",
            bytes_per_gpu=request,
            formula=(
                "("
                + " + ".join(
                    f"{spec.layers} · {blocks}"
                    for spec, blocks in zip(
                        stage.layout.specs,
                        stage.layout.blocks_by_spec(res.max_model_len),
                        strict=True,
                    )
                )
                + ") blocks"
                + f" · {stage.layout.page_bytes:,} B/page = {request:,} B ({gib_text(request)})"
            ),
            category="info",
        )
    )
    return items


def _usage_items(ev: MemoryEvaluation, constants: MemoryConstants) -> list[LineItem]:
    stage = ev.limiting
    layout = stage.layout
    items = list(stage.weights.items)
    items += [stage.activation, ev.non_torch, ev.graphs, ev.context]
    headroom = constants.allocator_headroom_bytes
    items.append(
        LineItem(
            name="allocator headroom",
            bytes_per_gpu=headroom,
            formula=(
                f"kept free outside the budget for fragmentation: {headroom:,} B "
                f"({gib_text(headroom)}, vLLM's redundancy_buffer_memory)"
            ),
            category="reserve",
        )
    )
    pool = stage.blocks * layout.block_bytes
    items.append(
        LineItem(
            name="KV cache pool",
            bytes_per_gpu=pool,
            formula=(
                f"{stage.blocks:,} blocks · {layout.group_size} layers/group · "
                f"{layout.page_bytes:,} B/page ({layout.block_size} tokens) = {pool:,} B "
                f"({gib_text(pool)})"
            ),
            category="kv_cache",
        )
    )
    remainder = max(stage.budget.kv_available_bytes, 0) - pool
    if remainder:
        items.append(
            LineItem(
                name="KV remainder (less than one block)",
                bytes_per_gpu=remainder,
                formula=f"{max(stage.budget.kv_available_bytes, 0):,} - {pool:,} = {remainder:,} B",
                category="unallocated",
            )
        )
    return items


def evaluate_memory(
    arch: Architecture,
    hardware: HardwareSpec,
    deployment: Deployment,
    constants: MemoryConstants = DEFAULT_CONSTANTS,
) -> bool:
    """Whether ``deployment`` fits, without building the full report (used by searches)."""
    res = resolve_deployment(arch, hardware, deployment, constants)
    return evaluate_deployment(arch, hardware, res, constants).fits


def plan_memory(
    arch: Architecture,
    hardware: HardwareSpec,
    deployment: Deployment | None = None,
    *,
    constants: MemoryConstants = DEFAULT_CONSTANTS,
    request_lengths: Sequence[int] = (),
    request_weights: Sequence[float] | None = None,
) -> MemoryPlan:
    """Plan one GPU's memory for serving ``arch`` on ``hardware`` as ``deployment`` says.

    ``request_lengths`` (with optional relative ``request_weights``) adds one concurrency
    estimate per length and, when weights are given, one for the whole mix.

    Raises
    ------
    InvalidDeploymentError
        When the deployment is impossible as written (pointers say which fields).
    """
    deployment = deployment or Deployment()
    res = resolve_deployment(arch, hardware, deployment, constants)
    ev = evaluate_deployment(arch, hardware, res, constants)
    stage = ev.limiting
    reasons = fit_failures(ev)
    tokens, concurrency = _capacity(ev)
    limit = arch.max_position_embeddings or res.max_model_len
    suggestions = _suggestions(ev, arch, hardware, deployment, constants, limit)
    estimates: list[ConcurrencyEstimate] = [
        concurrency_for_lengths(stage.layout, stage.blocks, [t]) for t in request_lengths
    ]
    if request_lengths and request_weights is not None:
        estimates.append(
            concurrency_for_lengths(stage.layout, stage.blocks, request_lengths, request_weights)
        )
    usage = _usage_items(ev, constants)
    items = tuple(usage + _info_items(ev))
    return MemoryPlan(
        model=arch.name,
        hardware=hardware.name,
        engine=res.engine,
        engine_version=res.engine_version,
        budget_semantics=stage.budget.semantics,
        deployment=res,
        line_items=items,
        device_total_bytes=ev.total,
        budget_bytes=stage.budget.budget_bytes,
        weights_bytes_per_gpu=stage.weights.total_bytes,
        activation_bytes_per_gpu=stage.activation.bytes_per_gpu,
        non_torch_bytes_per_gpu=ev.non_torch.bytes_per_gpu,
        cuda_graph_bytes_per_gpu=ev.graphs.bytes_per_gpu,
        kv_available_bytes_per_gpu=stage.budget.kv_available_bytes,
        kv_cache_bytes_per_gpu=stage.blocks * stage.layout.block_bytes,
        kv_bytes_per_token_per_gpu=stage.layout.kv_bytes_per_token,
        kv_block_size=stage.layout.block_size,
        kv_blocks=stage.blocks,
        kv_capacity_tokens=tokens,
        max_concurrency=concurrency,
        max_model_len=res.max_model_len,
        request_kv_bytes=ev.request_bytes,
        total_bytes_per_gpu=sum(i.bytes_per_gpu for i in usage),
        fits=not reasons,
        reasons=tuple(reasons),
        warnings=tuple(_warnings(ev, arch, constants)),
        suggestions=suggestions,
        defaults_applied=res.defaults,
        concurrency=tuple(estimates),
        stages=tuple(
            StageSummary(
                stage=s.index,
                first_layer=s.layers.start,
                num_layers=len(s.layers),
                weights_bytes_per_gpu=s.weights.total_bytes,
                kv_available_bytes_per_gpu=s.budget.kv_available_bytes,
                kv_blocks=s.blocks,
            )
            for s in ev.stages
        ),
        layout=stage.layout,
        constants=constants,
        engine_log=vllm_engine_log(ev, tokens, concurrency),
    )
