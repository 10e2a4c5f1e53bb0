"""Routed-expert time: touched experts' weights, grouped-GEMM FLOPs, or a measured MoE table.

Per GPU, ``T`` tokens routed to ``k`` of ``E`` experts over ``EP`` ranks cost
``2·(T·k/EP)·p_e`` FLOPs (``p_e`` expert parameters per GPU) and read the weights of the
``E_touched/EP`` local experts they touch (:mod:`~servesize.core.steptime.routing`), plus a
per-layer floor for routing, permutation and the grouped GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servesize.core.steptime._arrays import FloatArray
from servesize.core.steptime.operators import MoeOp
from servesize.core.steptime.rates import DEFAULT_MOE_FLOOR_S, DeviceRates, KernelCost, kernel_cost
from servesize.core.steptime.routing import expected_experts_touched
from servesize.core.steptime.tables import MoeTable

__all__ = ["MoeLookup", "moe_cost", "moe_table_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeLookup:
    """A measured MoE table for one expert block: its own shape, or the nearest shape with the
    same parallelism and dtype (ratio transfer)."""

    table: MoeTable
    exact: bool


def moe_table_for(op: MoeOp, tables: tuple[MoeTable, ...], *, prefer: str) -> MoeLookup | None:
    """The measured MoE table for ``op``: same expert parallelism, sharding and compute dtype;
    the exact shape when measured, else the nearest in ``(h, I, E, k)``."""
    dtype = "fp8" if op.compute_dtype == "fp8" else "bf16"
    usable = [
        t
        for t in tables
        if (t.tensor_parallel_size, t.expert_parallel_size)
        == (op.expert_tensor_parallel_size, op.expert_parallel_size)
        and t.dtype == dtype
    ]
    if not usable:
        return None

    def distance(t: MoeTable) -> float:
        return float(
            abs(np.log(t.hidden_size / op.hidden_size))
            + abs(np.log(t.intermediate_size / op.expert_intermediate_size))
            + abs(np.log(t.num_experts / op.num_experts))
            + abs(np.log(t.experts_per_token / op.experts_per_token))
            + (0.0 if t.distribution == prefer else 1e-3)
        )

    best = min(usable, key=distance)
    exact = (
        best.hidden_size,
        best.intermediate_size,
        best.num_experts,
        best.experts_per_token,
    ) == (
        op.hidden_size,
        op.expert_intermediate_size,
        op.num_experts,
        op.experts_per_token,
    ) and op.weight_bytes_per_element == (1.0 if dtype == "fp8" else 2.0)
    return MoeLookup(table=best, exact=exact)


def _moe_roofline(
    tokens: FloatArray,
    touched: FloatArray,
    *,
    experts_per_token: int,
    expert_parallel_size: int,
    params_per_expert: float,
    width: float,
    hidden_size: int,
    weight_bytes: float,
    activation_bytes: float,
    dtype: str,
    rates: DeviceRates,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    routed = tokens * experts_per_token / expert_parallel_size
    flops = 2.0 * routed * params_per_expert
    nbytes = (touched / expert_parallel_size) * params_per_expert * weight_bytes + routed * (
        2 * hidden_size + 3 * width
    ) * activation_bytes
    return flops, nbytes, rates.compute_time_s(flops, dtype), rates.memory_time_s(nbytes)


def moe_cost(
    op: MoeOp,
    tokens: FloatArray,
    *,
    activation_bytes: float,
    rates: DeviceRates,
    lookup: MoeLookup | None,
) -> KernelCost:
    """Routed experts for ``tokens`` tokens entering the layer (all ranks together).

    Per GPU: ``2·(T·k/EP)·p_e`` FLOPs with ``p_e`` expert parameters per GPU, and the weights of
    the ``E_touched/EP`` local experts the batch touches (:mod:`~servesize.core.steptime.routing`),
    plus a per-layer floor for routing, permutation and the grouped GEMMs. A transferred table
    is rescaled by the two rooflines, the table's with balanced routing (``min(E, T·k)``
    experts touched, as it was measured).
    """
    layers = float(op.layers)
    touched = expected_experts_touched(
        tokens, num_experts=op.num_experts, experts_per_token=op.experts_per_token
    )
    flops, nbytes, tc, tm = _moe_roofline(
        tokens,
        touched,
        experts_per_token=op.experts_per_token,
        expert_parallel_size=op.expert_parallel_size,
        params_per_expert=op.params_per_expert_per_gpu,
        width=op.expert_intermediate_size / op.expert_tensor_parallel_size,
        hidden_size=op.hidden_size,
        weight_bytes=op.weight_bytes_per_element,
        activation_bytes=activation_bytes,
        dtype=op.compute_dtype,
        rates=rates,
    )
    safe = np.maximum(tokens, 1.0)
    if lookup is None:
        t = np.maximum(tc, tm) + DEFAULT_MOE_FLOOR_S
    else:
        table = lookup.table
        t = table.latency(safe)
        if not lookup.exact:
            matrices = 3 if op.gated else 2
            _, _, rc, rm = _moe_roofline(
                safe,
                np.minimum(float(table.num_experts), safe * table.experts_per_token),
                experts_per_token=table.experts_per_token,
                expert_parallel_size=table.expert_parallel_size,
                params_per_expert=matrices
                * table.hidden_size
                * table.intermediate_size
                / table.tensor_parallel_size,
                width=table.intermediate_size / table.tensor_parallel_size,
                hidden_size=table.hidden_size,
                weight_bytes=1.0 if table.dtype == "fp8" else 2.0,
                activation_bytes=activation_bytes,
                dtype=op.compute_dtype,
                rates=rates,
            )
            t = t * np.maximum(tc, tm) / np.maximum(np.maximum(rc, rm), 1e-30)
        t = t * np.where(tc >= tm, rates.compute_slowdown, rates.memory_slowdown)
    active = tokens > 0
    return kernel_cost(np.where(active, t * layers, 0.0), flops * layers, nbytes * layers, tc, tm)
