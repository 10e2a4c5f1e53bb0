"""Routed-expert time: a grouped-GEMM model of one MoE layer, or a measured MoE table.

One MoE layer on one GPU runs, in order (TensorRT-LLM's CUTLASS fused MoE,
``tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py``; vLLM's Triton path,
``vllm/model_executor/layers/fused_moe/fused_moe.py: fused_experts``): routing (top-k of the
router logits, softmax), permutation of the routed rows by expert, the grouped gate/up GEMM,
the gated activation, the grouped down GEMM, and the un-permutation that sums each token's
``k`` rows. Per GPU, with ``T`` tokens entering the layer (every rank's under attention data
parallelism), ``k`` of ``E`` experts per token, ``EP`` expert ranks and ``p_e`` parameters per
expert and GPU:

``t = t_floor + Σ_{g ∈ gate_up, down} max(W_g / (B·η_m), F_g / (P·η_g)) + A / (B·η_m)``

- ``W_g``: weights of the ``E_touched/EP`` local experts the batch touches
  (:mod:`~servesize.core.steptime.routing`);
- ``F_g = 2·R_pad·p_g``: every local expert's rows are padded to a multiple of the GEMM tile
  ``b``, ``R_pad = (E/EP)·b·E[⌈X/b⌉]`` with ``X ~ Binomial(T, k/E)`` the rows one expert gets
  under uniform routing (vLLM ``moe_align_block_size`` pads each expert to ``BLOCK_SIZE_M``;
  CUTLASS grouped GEMMs tile ``M`` per expert), exactly
  ``E[⌈X/b⌉] = Σ_{j≥0} P(X > j·b)``;
- ``A = (T·k/EP)·(c_h·h + c_i·I/TP_e)·2`` bytes: the activation round trips per routed row
  (permute, GEMM inputs and outputs, activation, un-permute), bf16;
- ``t_floor``: routing, permutation and the kernels' launch and tail per layer.

The constants (:data:`DEFAULT_MOE_KERNEL`) are fitted on the Qwen3-30B-A3B layers of
``servesize/data/h100/moe.csv`` (TensorRT-LLM 1.3.0rc20 CUTLASS MoE, bf16 and fp8, TP and EP 1–8,
balanced routing) by :func:`servesize.calibration.fit_moe_kernel`; the Mixtral-8x7B layers of
the same file are held out. A measured table replaces the expression; a shape it lacks gets the
nearest measured layout's latency times a roofline ratio of the two shapes (:func:`moe_cost`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betainc

from servesize.core.steptime._arrays import ArrayLike, FloatArray, as_float_array
from servesize.core.steptime.operators import MoeOp
from servesize.core.steptime.rates import DeviceRates, KernelCost, kernel_cost
from servesize.core.steptime.routing import expected_experts_touched
from servesize.core.steptime.tables import MoeTable

__all__ = [
    "DEFAULT_MOE_KERNEL",
    "ROUTING_DISTRIBUTION",
    "MoeKernelConstants",
    "MoeLayerShape",
    "MoeLookup",
    "expected_padded_rows",
    "moe_cost",
    "moe_layer_time_s",
    "moe_table_for",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeKernelConstants:
    """The fitted constants of the grouped-GEMM MoE layer model (module docstring)."""

    floor_s: float
    """``t_floor``: routing, permutation and launch per layer and GPU."""
    gemm_efficiency: dict[str, float]
    """``η_g`` by compute dtype: achieved fraction of the dense peak in the grouped GEMMs."""
    activation_hidden_factor: float
    """``c_h``: hidden-size elements moved per routed row."""
    activation_intermediate_factor: float
    """``c_i``: expert-width elements moved per routed row."""
    tile_rows: int
    """``b``: rows per GEMM tile, the unit each expert's rows are padded to."""


DEFAULT_MOE_KERNEL = MoeKernelConstants(
    floor_s=26.3e-6,
    gemm_efficiency={"bf16": 0.92, "fp16": 0.92, "fp32": 0.92, "fp8": 0.83, "fp4": 0.83},
    activation_hidden_factor=6.35,
    activation_intermediate_factor=6.03,
    tile_rows=64,
)
"""Fitted on ``moe.csv`` (Qwen3-30B-A3B shapes, balanced routing) with
:func:`servesize.calibration.fit_moe_kernel`: floor 26.3 µs, grouped-GEMM efficiency 0.92
(bf16) and 0.83 (fp8) of the dense peak, ``6.35·h + 6.03·I`` bf16 elements per routed row. MAPE
6.0 % on the 378 fitted rows and 7.5 % on the 378 held-out Mixtral-8x7B rows (13 % and 21 % on
the power-law rows of both, whose skew the uniform routing here does not model). The tile is
vLLM's default ``BLOCK_SIZE_M`` of 64 (``fused_moe.py: get_default_config``); the fit is flat in
it (16, 64 and 128 rows fit equally: on H100 a 64-row tile is below the rows where an expert's
GEMM turns compute-bound, ``P/(2B)`` ≈ 150 rows in bf16 and 295 in fp8)."""


ROUTING_DISTRIBUTION: dict[str, str] = {"trtllm": "power_law_1.01"}
"""Which routing of a measured MoE table prices an engine's serving traffic (any other engine:
``balanced``). TensorRT-LLM: ``moe.csv``'s power-law rows
(expert loads drawn from a power law of exponent 1.01, aiconfigurator's collector
``collect_moe.py``; ``ModelConfig.workload_distribution = "power_law"`` is aiconfigurator's
default for the same reason). A trained router is skewed: at a few tokens it touches fewer
experts than uniform routing (0.55–0.9× the balanced time at 8–64 tokens, Qwen3-30B-A3B shape,
EP 1), and at many tokens the busiest expert rank sets the layer time (1.3–1.5× at EP 8 from
1,000 tokens on; 2–4× for the Mixtral shape). The tables time TensorRT-LLM's own CUTLASS MoE
(``CutlassFusedMoE.forward``). vLLM keeps the balanced rows: its gpt-oss-120b calibration rows
borrow these kernels across shape and format (MXFP4 ``fused_experts``) and their TPOT gets worse
with the skewed rows (9.5 → 13.5 % MAPE), so the skew is not applied where it was not checked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeLayerShape:
    """One MoE layer on one GPU: what :func:`moe_layer_time_s` needs."""

    hidden_size: int
    expert_intermediate_size: int
    num_experts: int
    experts_per_token: int
    expert_parallel_size: int
    expert_tensor_parallel_size: int
    gated: bool
    weight_bytes_per_element: float
    compute_dtype: str

    @classmethod
    def of(cls, op: MoeOp) -> MoeLayerShape:
        return cls(
            hidden_size=op.hidden_size,
            expert_intermediate_size=op.expert_intermediate_size,
            num_experts=op.num_experts,
            experts_per_token=op.experts_per_token,
            expert_parallel_size=op.expert_parallel_size,
            expert_tensor_parallel_size=op.expert_tensor_parallel_size,
            gated=op.gated,
            weight_bytes_per_element=op.weight_bytes_per_element,
            compute_dtype=op.compute_dtype,
        )

    @classmethod
    def of_table(cls, table: MoeTable, compute_dtype: str) -> MoeLayerShape:
        return cls(
            hidden_size=table.hidden_size,
            expert_intermediate_size=table.intermediate_size,
            num_experts=table.num_experts,
            experts_per_token=table.experts_per_token,
            expert_parallel_size=table.expert_parallel_size,
            expert_tensor_parallel_size=table.tensor_parallel_size,
            gated=True,
            weight_bytes_per_element=1.0 if table.dtype == "fp8" else 2.0,
            compute_dtype=compute_dtype,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeLookup:
    """A measured MoE table for one expert block: its own shape, or the nearest shape with the
    same parallelism and dtype (ratio transfer)."""

    table: MoeTable
    exact: bool


def moe_table_for(
    op: MoeOp, tables: tuple[MoeTable, ...], *, prefer: str | None = None, engine: str = ""
) -> MoeLookup | None:
    """The measured MoE table for ``op``: same expert parallelism, sharding and compute dtype;
    the exact shape when measured, else the nearest in ``(h, I, E, k)``; of the routing
    ``prefer`` (``None``: ``engine``'s :data:`ROUTING_DISTRIBUTION`) where both are measured."""
    prefer = ROUTING_DISTRIBUTION.get(engine, "balanced") if prefer is None else prefer
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


def expected_padded_rows(
    tokens: ArrayLike, *, num_experts: int, experts_per_token: int, tile_rows: int,
    balanced: bool = False,
) -> FloatArray:  # fmt: skip
    """Expected rows of one expert after padding to ``tile_rows``: ``b·E[⌈X/b⌉]``.

    ``X ~ Binomial(T, k/E)`` (uniform routing), ``E[⌈X/b⌉] = Σ_{j≥0} P(X > j·b)`` with the
    binomial tail as a regularised incomplete beta (``T`` may be fractional); only the terms
    within ``6σ`` of the mean are summed, the ones below count 1 each. ``balanced``: every expert
    gets ``T·k/E`` rows, or one row for ``T·k`` of them when ``T·k < E`` (as ``moe.csv``'s
    balanced distribution routes).

    >>> expected_padded_rows([1, 64], num_experts=8, experts_per_token=8, tile_rows=64).tolist()
    [64.0, 64.0]
    >>> expected_padded_rows([65, 64], num_experts=8, experts_per_token=8, tile_rows=64,
    ...                      balanced=True).tolist()
    [128.0, 64.0]
    """
    t = as_float_array(tokens)
    b = float(tile_rows)
    p = experts_per_token / num_experts
    mean = t * p
    if balanced:
        ceil = np.where(mean >= 1.0, np.ceil(mean / b - 1e-9), t * experts_per_token / num_experts)
        return np.asarray(b * ceil, dtype=np.float64)
    sigma = np.sqrt(np.maximum(t * p * (1.0 - p), 0.0))
    low = np.maximum(np.floor((mean - 6.0 * sigma) / b) - 1.0, 0.0)
    width = int(np.max(np.ceil(12.0 * sigma / b), initial=0.0)) + 3
    j = low[..., None] + np.arange(width)
    x = j * b
    n = t[..., None]
    inside = x < n
    tail = np.where(
        inside, betainc(np.where(inside, x + 1.0, 1.0), np.where(inside, n - x, 1.0), p), 0.0
    )
    tail = np.where((j == 0) & inside, 1.0 - np.power(1.0 - p, n), tail)
    return np.asarray(b * (low + tail.sum(axis=-1)), dtype=np.float64)


def moe_layer_time_s(
    shape: MoeLayerShape,
    tokens: ArrayLike,
    *,
    rates: DeviceRates,
    constants: MoeKernelConstants = DEFAULT_MOE_KERNEL,
    balanced: bool = False,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """One layer's ``(time, FLOPs, bytes, compute term, memory term)`` per GPU for ``tokens``
    tokens entering it (module docstring). ``balanced`` routes as ``moe.csv``'s balanced rows."""
    t = as_float_array(tokens)
    e, k, ep = shape.num_experts, shape.experts_per_token, shape.expert_parallel_size
    h = shape.hidden_size
    width = shape.expert_intermediate_size / shape.expert_tensor_parallel_size
    up = (2.0 if shape.gated else 1.0) * h * width
    down = h * width
    wb = shape.weight_bytes_per_element
    routed = t * k / ep
    if balanced:
        touched = np.minimum(float(e), t * k)
    else:
        touched = expected_experts_touched(t, num_experts=e, experts_per_token=k)
    rows = (e / ep) * expected_padded_rows(
        t, num_experts=e, experts_per_token=k, tile_rows=constants.tile_rows, balanced=balanced
    )
    rows = np.where(t > 0, rows, 0.0)
    dtype = shape.compute_dtype
    eff = constants.gemm_efficiency[dtype] / rates.gemm_efficiency[dtype]
    act_bytes = (
        routed
        * (
            constants.activation_hidden_factor * h
            + constants.activation_intermediate_factor * width
        )
        * 2.0
    )
    weights = (touched / ep) * (up + down) * wb
    tc = np.zeros_like(t)
    tm = rates.memory_time_s(act_bytes)
    total = np.full_like(t, constants.floor_s) + tm
    for params in (up, down):
        c = rates.compute_time_s(2.0 * rows * params, dtype) / eff
        m = rates.memory_time_s((touched / ep) * params * wb)
        total = total + np.maximum(c, m)
        tc = tc + c
        tm = tm + m
    flops = 2.0 * routed * (up + down)
    nbytes = weights + act_bytes
    return total, flops, nbytes, tc, tm


def _transfer_roofline_s(
    shape: MoeLayerShape,
    tokens: FloatArray,
    touched: FloatArray,
    *,
    activation_bytes: float,
    rates: DeviceRates,
) -> tuple[FloatArray, FloatArray]:
    """The compute and memory terms ``F/(P·η_c)``, ``Q/(W·η_m)`` of the routed experts without a
    floor, whose maximum is the ratio a measured table is transferred by: ``F = 2·(T·k/EP)·p_e``,
    ``Q`` the touched local experts' weights plus ``(2h + 3I/TP_e)`` activation elements per
    routed row."""
    width = shape.expert_intermediate_size / shape.expert_tensor_parallel_size
    params = (3 if shape.gated else 2) * shape.hidden_size * width
    routed = tokens * shape.experts_per_token / shape.expert_parallel_size
    flops = 2.0 * routed * params
    nbytes = (touched / shape.expert_parallel_size) * params * shape.weight_bytes_per_element + (
        routed * (2 * shape.hidden_size + 3 * width) * activation_bytes
    )
    return rates.compute_time_s(flops, shape.compute_dtype), rates.memory_time_s(nbytes)


def moe_cost(
    op: MoeOp,
    tokens: FloatArray,
    *,
    activation_bytes: float,
    rates: DeviceRates,
    lookup: MoeLookup | None,
) -> KernelCost:
    """Routed experts for ``tokens`` tokens entering the layer (all ranks together).

    Without a table, the grouped-GEMM model (module docstring). With one, its latency; a table
    of another shape is scaled by the floor-free roofline ratio of the two shapes
    (:func:`_transfer_roofline_s`, the table's routed as it was measured, balanced), times the
    engine's slowdown. The grouped-GEMM model's own ratio transfers better between the kernel
    tables (Qwen3-30B-A3B to Mixtral-8x7B: 8.9 % against 68 %) but makes the TensorRT-LLM
    Qwen3-235B-A22B and vLLM gpt-oss-120b serving rows 20 % faster than measured under the
    current engine constants, so
    the roofline ratio stays until those are refitted with it (docs/modeling.md §2.12).
    """
    layers = float(op.layers)
    shape = MoeLayerShape.of(op)
    t, flops, nbytes, tc, tm = moe_layer_time_s(shape, tokens, rates=rates)
    if lookup is not None:
        table = lookup.table
        safe = np.maximum(tokens, 1.0)
        t = table.latency(safe)
        touched = expected_experts_touched(
            tokens, num_experts=op.num_experts, experts_per_token=op.experts_per_token
        )
        rc, rm = _transfer_roofline_s(
            shape, tokens, touched, activation_bytes=activation_bytes, rates=rates
        )
        if not lookup.exact:
            sc, sm = _transfer_roofline_s(
                MoeLayerShape.of_table(table, op.compute_dtype),
                safe,
                np.minimum(float(table.num_experts), safe * table.experts_per_token),
                activation_bytes=activation_bytes,
                rates=rates,
            )
            t = t * np.maximum(rc, rm) / np.maximum(np.maximum(sc, sm), 1e-30)
        t = t * np.where(rc >= rm, rates.compute_slowdown, rates.memory_slowdown)
    active = tokens > 0
    return kernel_cost(np.where(active, t * layers, 0.0), flops * layers, nbytes * layers, tc, tm)
