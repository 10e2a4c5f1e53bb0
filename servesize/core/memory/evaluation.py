"""One deployment priced stage by stage: the weights, runtime memory, KV layout and engine
budget of every pipeline stage, the stage that limits the KV pool, and why it does not fit.

:func:`evaluate_deployment` is what :mod:`servesize.core.memory.plan` reports on and what the
suggestion searches re-run for other settings; the limiting stage has the fewest KV blocks
(vLLM takes the minimum over workers). Before the hybrid KV cache manager
(:data:`~servesize.core.memory.engine_defaults.VLLM_HYBRID_KV_VERSION`) every attention layer
is pooled per token as full attention: V0's ``CacheEngine.get_cache_block_size`` prices a
block as all layers' pages, and early V1 ``unify_hybrid_kv_cache_specs`` turns sliding-window
layers into full attention.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from servesize.core.architecture import Architecture
from servesize.core.hardware.spec import HardwareSpec
from servesize.core.memory.budget import (
    KvBudget,
    sglang_kv_budget,
    trtllm_kv_budget,
    vllm_kv_budget,
)
from servesize.core.memory.constants import MemoryConstants
from servesize.core.memory.deployment import ResolvedDeployment, device_total_bytes
from servesize.core.memory.engine_defaults import VLLM_HYBRID_KV_VERSION
from servesize.core.memory.kv import KvLayerSpec, KvLayout, kv_layer_specs, kv_layout
from servesize.core.memory.ledger import LineItem
from servesize.core.memory.runtime import (
    activation_item,
    cuda_context_item,
    cuda_graph_item,
    non_torch_item,
)
from servesize.core.memory.sharding import pp_layer_ranges
from servesize.core.memory.units import gib_text
from servesize.core.memory.weights import WeightLedger, weight_ledger

__all__ = [
    "MemoryEvaluation",
    "StageEvaluation",
    "evaluate_deployment",
    "fit_failures",
    "stage_kv_budget",
]


@dataclass(frozen=True, slots=True)
class StageEvaluation:
    """One pipeline stage priced on one of its GPUs: ``blocks`` KV blocks fit its budget."""

    index: int
    layers: range
    weights: WeightLedger
    activation: LineItem
    layout: KvLayout
    budget: KvBudget
    blocks: int
    specs: tuple[KvLayerSpec, ...]


@dataclass(frozen=True, slots=True)
class MemoryEvaluation:
    """Every stage of one resolved deployment; ``limiting`` has the fewest KV blocks."""

    res: ResolvedDeployment
    total: int
    stages: tuple[StageEvaluation, ...]
    limiting: StageEvaluation
    graphs: LineItem
    non_torch: LineItem
    context: LineItem

    @property
    def request_bytes(self) -> int:
        return self.limiting.layout.request_bytes(self.res.max_model_len)

    @property
    def fits(self) -> bool:
        return not fit_failures(self)


def stage_kv_budget(
    res: ResolvedDeployment,
    total: int,
    weights: int,
    activation: int,
    graphs: LineItem,
    non_torch: LineItem,
    context: LineItem,
) -> KvBudget:
    """The engine's KV budget rule for one stage (:mod:`servesize.core.memory.budget`)."""
    if res.engine == "sglang":
        return sglang_kv_budget(
            total_bytes=total,
            mem_fraction_static=res.memory_fraction,
            weights_bytes=weights,
            context_bytes=context.bytes_per_gpu,
        )
    if res.engine == "trtllm":
        return trtllm_kv_budget(
            total_bytes=total,
            free_gpu_memory_fraction=res.memory_fraction,
            weights_bytes=weights,
            activation_bytes=activation,
            non_torch_bytes=non_torch.bytes_per_gpu,
            cuda_graph_bytes=graphs.bytes_per_gpu,
            context_bytes=context.bytes_per_gpu,
        )
    return vllm_kv_budget(
        total_bytes=total,
        gpu_memory_utilization=res.memory_fraction,
        version=res.version,
        weights_bytes=weights,
        activation_bytes=activation,
        non_torch_bytes=non_torch.bytes_per_gpu,
        cuda_graph_bytes=graphs.bytes_per_gpu,
        context_bytes=context.bytes_per_gpu,
    )


def evaluate_deployment(
    arch: Architecture, hardware: HardwareSpec, res: ResolvedDeployment, constants: MemoryConstants
) -> MemoryEvaluation:
    """Price every pipeline stage of ``res`` and pick the one that limits the KV pool."""
    total = device_total_bytes(hardware, constants)
    graphs = cuda_graph_item(res, constants)
    non_torch = non_torch_item(res, constants)
    context = cuda_context_item(res, constants)
    ranges = pp_layer_ranges(len(arch.layers), res.pipeline_parallel_size)
    stages = []
    for index, layers in enumerate(ranges):
        first, last = index == 0, index == len(ranges) - 1
        weights = weight_ledger(arch, res, constants, layers, first=first, last=last)
        activation = activation_item(arch, res, constants, layers, last=last)
        specs = kv_layer_specs(arch, layers, res.tensor_parallel_size, res.kv_cache, res.dtype)
        if last and (res.draft_weight_bytes_per_gpu or res.draft_kv_layers):
            weights, specs = with_draft(weights, specs, res)
        layout = kv_layout(
            specs,
            block_size=res.block_size,
            batched_tokens=res.max_num_batched_tokens,
            state_blocks=constants.mamba_blocks_per_request,
            hybrid_grouping=res.engine == "vllm" and res.version[:2] >= VLLM_HYBRID_KV_VERSION,
        )
        budget = stage_kv_budget(
            res,
            total,
            weights.total_bytes,
            activation.bytes_per_gpu,
            graphs,
            non_torch,
            context,
        )
        blocks = layout.num_blocks(budget.kv_available_bytes)
        stages.append(
            StageEvaluation(index, layers, weights, activation, layout, budget, blocks, specs)
        )
    limiting = min(
        stages,
        key=lambda s: (s.blocks, s.budget.kv_available_bytes, -s.weights.total_bytes),
    )
    return MemoryEvaluation(res, total, tuple(stages), limiting, graphs, non_torch, context)


def with_draft(
    weights: WeightLedger, specs: tuple[KvLayerSpec, ...], res: ResolvedDeployment
) -> tuple[WeightLedger, tuple[KvLayerSpec, ...]]:
    """The last stage with a speculative draft: its weights as one more line item, its KV as
    ``draft_kv_layers`` more layers of the stage's largest attention kind (vLLM gives the
    EAGLE/MTP layers KV pages of their own in the same pool,
    ``vllm/v1/spec_decode/eagle.py: EagleProposer.load_model``)."""
    draft = res.draft_weight_bytes_per_gpu
    item = LineItem(
        name="speculative draft weights",
        bytes_per_gpu=draft,
        formula=f"the draft's parameters on this GPU: {draft:,} B ({gib_text(draft)})",
        category="weights",
    )
    ledger = WeightLedger(
        items=(*weights.items, item), by_component={**weights.by_component, "draft": draft}
    )
    attention = [s for s in specs if s.bytes_per_token]
    if not res.draft_kv_layers or not attention:
        return ledger, specs
    main = max(attention, key=lambda s: s.bytes_per_token)
    grown = replace(main, layers=main.layers + res.draft_kv_layers)
    return ledger, tuple(grown if s is main else s for s in specs)


def fit_failures(ev: MemoryEvaluation) -> list[str]:
    """Why the limiting stage cannot start or hold one ``max_model_len`` request (empty: fits)."""
    stage, res = ev.limiting, ev.res
    budget = stage.budget
    reasons = []
    if budget.start_error:
        reasons.append(budget.start_error)
    weights = stage.weights.total_bytes
    if res.engine != "trtllm" and weights > budget.budget_bytes:
        reasons.append(
            f"the weights need {gib_text(weights)} per GPU but the {res.engine} budget is "
            f"{gib_text(budget.budget_bytes)}"
        )
    if budget.kv_available_bytes <= 0:
        reasons.append(
            f"no memory is left for the KV cache ({gib_text(budget.kv_available_bytes)} after "
            "weights and runtime memory): the engine stops with 'No available memory for the "
            "cache blocks'"
        )
    else:
        need = stage.layout.request_bytes(res.max_model_len)
        if need > budget.kv_available_bytes:
            reasons.append(
                f"max_model_len {res.max_model_len} needs {gib_text(need, 1)} of KV for one "
                f"sequence; {gib_text(budget.kv_available_bytes, 1)} is left"
            )
    return reasons
