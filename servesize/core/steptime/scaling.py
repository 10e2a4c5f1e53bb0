"""Measured kernel tables of a reference GPU carried to another GPU by physical ratios.

A GPU without measured tables borrows the reference's (the H100 SXM tables of
``servesize/data/h100``), each cell rescaled by what physically differs between the two
datasheets (docs/modeling.md §2.11). A cell measured in ``t_ref`` splits into a fixed part
and a work part, and the work part's roofline decides which resource binds:

    t_fix  = min(t_ref, t_floor)                      t_work = t_ref − t_fix
    t_tgt  = t_fix · (f_ref / f_tgt)
           + t_work · max(T_c · r_P · w, T_m · r_W) / max(T_c, T_m)

- ``T_c = F / (P_ref·η_c)`` and ``T_m = Q / (W_ref·η_m)`` are the cell's roofline terms on the
  reference (``F`` FLOPs, ``Q`` HBM bytes, the default efficiencies of ``rates.py``, the same on
  both GPUs: the achieved fraction of peak is what carries over);
- ``r_P = P_ref / P_tgt`` (dense peak of the cell's compute dtype) and ``r_W = W_ref / W_tgt``
  (HBM bandwidth): a memory-bound cell on a GPU with 1.43× the bandwidth takes 1/1.43 of the
  time, a compute-bound one scales with the peak, and a cell near the ridge switches to the
  target's binding resource (a max, as the roofline itself: the hidden resource is not charged);
- ``t_floor`` the kernel floors of ``rates.py`` (4 µs GEMM, 8 µs attention, 20 µs MoE layer):
  the fixed part is pipeline fill, prologue and epilogue, counted in cycles, so it scales with
  the boost-clock ratio ``f_ref / f_tgt`` (1 when either clock is unknown);
- ``w`` wave quantisation for GEMMs: with 128×128 output tiles a GEMM has
  ``T = ⌈m/128⌉·⌈n/128⌉`` tiles and runs ``⌈T/S⌉`` waves on ``S`` SMs, so the compute term
  carries ``q(S) = ⌈T/S⌉·S/T`` and ``w = q(S_tgt) / q(S_ref)`` (1 when an SM count is unknown).

A target with an FP4 peak and no FP4 table gets one derived from each FP8 GEMM table: the same
cell with the FP8 peak of the reference against the FP4 peak of the target for ``T_c``, and
the NVFP4 weight bytes (``NVFP4_WEIGHT_BYTES`` = 9/16 per element: 4-bit values plus one FP8
scale per 16) against FP8's one byte for ``T_m``:

    t_fp4 = t_fix · f_ref/f_tgt
          + t_work · max(T_c · P8_ref/P4_tgt · w, T_m^fp4 · r_W) / max(T_c, T_m)

so an FP4 GEMM keeps the fraction of peak the H100's FP8 kernel reached at that shape, where the
roofline alone would assume its large-GEMM efficiency at every ``m``.

Collectives keep their smallest-message latency ``α`` (link and synchronisation latency) and
scale the rest by the per-direction link bandwidth ratio; a target without a GPU-to-GPU fabric
(PCIe), or with fewer GPUs per node than a table, drops those tables so the bandwidth formula of
``communication.py`` applies. Tables of a dtype the target has no peak for are dropped.

Not modelled: L2 residency (the reference tables were timed back to back, so weights smaller
than the L2 may have been served from it; serving streams every layer's weights, so the HBM
term is kept for both GPUs), a different kernel library on another vendor (ROCm kernels are
assumed to reach the fraction of peak cuBLAS and FlashAttention reach on the H100), and
per-SM resources (shared memory, registers) that change tile choices.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from servesize.core.hardware import DEFAULT_BANDWIDTH_EFFICIENCY, HardwareSpec
from servesize.core.steptime._arrays import FloatArray
from servesize.core.steptime.experts import DEFAULT_MOE_KERNEL
from servesize.core.steptime.rates import (
    DEFAULT_ATTENTION_FLOOR_S,
    DEFAULT_GEMM_EFFICIENCY_BY_DTYPE,
    DEFAULT_KERNEL_FLOOR_S,
)
from servesize.core.steptime.tables import (
    AttentionTable,
    CollectiveTable,
    GemmTable,
    MeasuredProfile,
    MoeTable,
)

__all__ = [
    "GEMM_TILE",
    "NVFP4_WEIGHT_BYTES",
    "GpuRatios",
    "gpu_ratios",
    "scale_kernel_time_s",
    "scale_measured_profile",
    "wave_quantisation",
]

GEMM_TILE = 128
"""Output tile edge assumed for wave quantisation (CUTLASS/cuBLAS Hopper GEMMs use 128×128
or 128×256 tiles for large problems; the ratio is insensitive to the choice)."""

NVFP4_WEIGHT_BYTES = 9 / 16
"""Bytes per NVFP4 weight: a 4-bit E2M1 value plus one FP8 scale per 16 (``core/dtypes.py``)."""

_FABRICS = ("nvlink", "infinity_fabric")
_WEIGHT_BYTES = {"fp8": 1.0, "fp4": NVFP4_WEIGHT_BYTES}


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuRatios:
    """Reference-over-target ratios of the physical quantities the scaling uses (> 1: the
    target is faster)."""

    reference: HardwareSpec
    target: HardwareSpec
    memory: float
    """``W_ref / W_tgt``."""
    clock: float
    """``f_ref / f_tgt``, 1 when either boost clock is unknown."""
    link: float | None
    """Per-direction GPU-to-GPU bandwidth ``B_ref / B_tgt``; None when the target has no
    fabric (its collectives are priced by the formula instead)."""

    def compute(self, dtype: str) -> float | None:
        """``P_ref / P_tgt`` for ``dtype``; None when either GPU lacks a peak for it."""
        ref = self.reference.peak_flop_per_s(dtype)
        tgt = self.target.peak_flop_per_s(dtype)
        return None if not ref or not tgt else ref / tgt

    def waves(self, tiles: FloatArray) -> FloatArray:
        """``w = q(S_tgt) / q(S_ref)``; ones when an SM count is unknown."""
        s_ref, s_tgt = self.reference.sm_count, self.target.sm_count
        if not s_ref or not s_tgt:
            return np.ones_like(tiles)
        return np.asarray(
            wave_quantisation(tiles, s_tgt) / wave_quantisation(tiles, s_ref), dtype=np.float64
        )


def gpu_ratios(reference: HardwareSpec, target: HardwareSpec) -> GpuRatios:
    """The ratios of ``reference`` over ``target`` (see :class:`GpuRatios`).

    >>> from servesize.core.hardware import HardwareSpec
    >>> a = HardwareSpec(id="a", vendor="v", name="A", memory_bytes=1,
    ...                  memory_bandwidth_bytes_per_s=3_350_000_000_000, boost_clock_hz=1.98e9)
    >>> b = replace(a, id="b", memory_bandwidth_bytes_per_s=4_800_000_000_000)
    >>> r = gpu_ratios(a, b)
    >>> round(r.memory, 4), r.clock, r.link
    (0.6979, 1.0, None)
    """
    f_ref, f_tgt = reference.boost_clock_hz, target.boost_clock_hz
    clock = f_ref / f_tgt if f_ref and f_tgt else 1.0
    ref_link, tgt_link = reference.interconnect, target.interconnect
    link = None
    if (
        ref_link is not None
        and tgt_link is not None
        and tgt_link.kind in _FABRICS
        and ref_link.bandwidth_bytes_per_s
        and tgt_link.bandwidth_bytes_per_s
    ):
        link = ref_link.bandwidth_bytes_per_s / tgt_link.bandwidth_bytes_per_s
    return GpuRatios(
        reference=reference,
        target=target,
        memory=reference.memory_bandwidth_bytes_per_s / target.memory_bandwidth_bytes_per_s,
        clock=clock,
        link=link,
    )


def wave_quantisation(tiles: FloatArray, sms: int) -> FloatArray:
    """``q = ⌈T/S⌉·S / T ≥ 1``: SM-slots occupied over tiles (1 when the tiles fill whole
    waves).

    >>> wave_quantisation(np.array([132.0, 133.0, 264.0]), 132).round(4).tolist()
    [1.0, 1.985, 1.0]
    """
    t = np.maximum(tiles, 1.0)
    return np.asarray(np.ceil(t / sms) * sms / t, dtype=np.float64)


def scale_kernel_time_s(
    t_ref_s: FloatArray,
    compute_s: FloatArray,
    memory_s: FloatArray,
    *,
    compute_ratio: float,
    memory_ratio: float,
    floor_s: float,
    clock_ratio: float,
    wave_ratio: FloatArray | float = 1.0,
    bound_s: FloatArray | None = None,
) -> FloatArray:
    """One measured time carried to the target (the formula of the module docstring).

    ``compute_s`` / ``memory_s`` are the reference roofline terms ``T_c``, ``T_m``;
    ``bound_s`` is ``max(T_c, T_m)`` of the measured kernel when the terms passed are not
    its own (a change of dtype rescales ``T_m`` first).

    >>> t = scale_kernel_time_s(np.array([100e-6]), np.array([0.0]), np.array([90e-6]),
    ...     compute_ratio=1.0, memory_ratio=1 / 1.43, floor_s=0.0, clock_ratio=1.0)
    >>> round(float(t[0]) * 1e6, 4)
    69.9301
    """
    fixed = np.minimum(t_ref_s, floor_s)
    work = t_ref_s - fixed
    bound = np.maximum(compute_s, memory_s) if bound_s is None else bound_s
    scaled = np.maximum(compute_s * compute_ratio * wave_ratio, memory_s * memory_ratio)
    factor = np.where(bound > 0, scaled / np.where(bound > 0, bound, 1.0), memory_ratio)
    return np.asarray(fixed * clock_ratio + work * factor, dtype=np.float64)


def _terms(
    flops: FloatArray, nbytes: FloatArray, dtype: str, reference: HardwareSpec
) -> tuple[FloatArray, FloatArray]:
    peak = reference.peak_flop_per_s(dtype) or reference.peak_flop_per_s("bf16") or 1.0
    eta = DEFAULT_GEMM_EFFICIENCY_BY_DTYPE.get(dtype, 0.78)
    bandwidth = reference.memory_bandwidth_bytes_per_s * DEFAULT_BANDWIDTH_EFFICIENCY
    return flops / (peak * eta), nbytes / bandwidth


def _scale_gemm(table: GemmTable, r: GpuRatios, as_dtype: str | None = None) -> GemmTable | None:
    """``table`` on the target; ``as_dtype="fp4"`` derives the FP4 table of an FP8 one."""
    dtype = as_dtype or table.dtype
    ref_peak = r.reference.peak_flop_per_s(table.dtype)
    tgt_peak = r.target.peak_flop_per_s(dtype)
    if not ref_peak or not tgt_peak:
        return None
    wb = _WEIGHT_BYTES.get(table.dtype, 2.0)
    m = table.m[None, :]
    n, k = table.n[:, None], table.k[:, None]
    flops = 2.0 * m * n * k
    nbytes = n * k * wb + m * (n + k) * 2.0
    tc, tm = _terms(flops, nbytes, table.dtype, r.reference)
    # the target's memory term carries its own weight bytes (the same as the reference's
    # unless the dtype changes): T_m^tgt / T_m = Q_tgt / Q_ref
    bytes_ratio = (n * k * _WEIGHT_BYTES.get(dtype, 2.0) + m * (n + k) * 2.0) / nbytes
    tiles = np.ceil(m / GEMM_TILE) * np.ceil(n / GEMM_TILE)
    latency = scale_kernel_time_s(
        table.latency_s,
        tc,
        tm * bytes_ratio,
        compute_ratio=ref_peak / tgt_peak,
        memory_ratio=r.memory,
        floor_s=DEFAULT_KERNEL_FLOOR_S,
        clock_ratio=r.clock,
        wave_ratio=r.waves(tiles),
        bound_s=np.maximum(tc, tm),
    )
    source = _source(table.source, r) + (f" as {dtype}" if as_dtype else "")
    return replace(table, dtype=dtype, latency_s=latency, source=source)


def _attention_work(table: AttentionTable) -> tuple[FloatArray, FloatArray]:
    """FLOPs and HBM bytes of every ``(batch, length)`` cell of one attention table."""
    b, length = table.batch[:, None], table.length[None, :]
    kvb = 1.0 if table.kv_dtype.startswith("fp8") else 2.0
    h = float(table.num_heads)
    if table.mechanism == "mla":
        # absorbed MLA: the latent (kv_lora 512 + rope 64) is read per token; decode scores
        # against 576 dims and accumulates 512, prefill uses 192-dim QK and 128-dim V.
        kv_token = 576.0 * kvb
        decode_pair, prefill_pair = 2.0 * h * (576.0 + 512.0), 2.0 * h * (192.0 + 128.0)
    else:
        kv_token = 2.0 * table.num_kv_heads * table.head_dim * kvb
        decode_pair = prefill_pair = 4.0 * h * table.head_dim
    if table.phase == "decode":
        pairs = b * length
        return pairs * decode_pair, pairs * kv_token + b * 4.0 * h * table.head_dim * 2.0
    pairs = b * length * (length + 1.0) / 2.0
    return pairs * prefill_pair, b * length * (kv_token + 4.0 * h * table.head_dim * 2.0)


def _scale_attention(table: AttentionTable, r: GpuRatios) -> AttentionTable | None:
    compute_ratio = r.compute("bf16")
    if compute_ratio is None:
        return None
    flops, nbytes = _attention_work(table)
    tc, tm = _terms(flops, nbytes, "bf16", r.reference)
    latency = scale_kernel_time_s(
        table.latency_s,
        tc,
        tm,
        compute_ratio=compute_ratio,
        memory_ratio=r.memory,
        floor_s=DEFAULT_ATTENTION_FLOOR_S,
        clock_ratio=r.clock,
    )
    return replace(table, latency_s=latency, source=_source(table.source, r))


def _scale_moe(table: MoeTable, r: GpuRatios) -> MoeTable | None:
    compute_ratio = r.compute(table.dtype)
    if compute_ratio is None:
        return None
    t = table.tokens
    e, k = float(table.num_experts), float(table.experts_per_token)
    h, inter = float(table.hidden_size), float(table.intermediate_size)
    shards = float(table.tensor_parallel_size * table.expert_parallel_size)
    wb = 1.0 if table.dtype == "fp8" else 2.0
    touched = (e / table.expert_parallel_size) * (1.0 - (1.0 - k / e) ** t)
    flops = 2.0 * t * k * 3.0 * h * inter / shards
    nbytes = touched * 3.0 * h * inter / table.tensor_parallel_size * wb + t * h * 4.0
    tc, tm = _terms(flops, nbytes, table.dtype, r.reference)
    latency = scale_kernel_time_s(
        table.latency_s,
        tc,
        tm,
        compute_ratio=compute_ratio,
        memory_ratio=r.memory,
        floor_s=DEFAULT_MOE_KERNEL.floor_s,
        clock_ratio=r.clock,
    )
    return replace(table, latency_s=latency, source=_source(table.source, r))


def _scale_collective(table: CollectiveTable, r: GpuRatios) -> CollectiveTable | None:
    link = r.target.interconnect
    if r.link is None or link is None or table.num_gpus > link.gpus_per_node:
        return None
    alpha = float(table.latency_s[0])
    latency = alpha + (table.latency_s - alpha) * r.link
    return replace(table, latency_s=np.asarray(latency), source=_source(table.source, r))


def _source(source: str, r: GpuRatios) -> str:
    return f"{source}, scaled {r.reference.name} → {r.target.name}"


def scale_measured_profile(
    profile: MeasuredProfile, reference: HardwareSpec, target: HardwareSpec
) -> MeasuredProfile:
    """``profile`` (measured on ``reference``) carried to ``target`` by physical ratios.

    Every table is rescaled cell by cell (module docstring); tables the target cannot run
    (a dtype without a peak, collectives without a GPU fabric) are dropped, so those operators
    fall back to the roofline and the link formula.
    """
    r = gpu_ratios(reference, target)
    gemm = tuple(t for t in (_scale_gemm(g, r) for g in profile.gemm) if t is not None)
    if not any(g.dtype == "fp4" for g in profile.gemm):
        derived = (_scale_gemm(g, r, "fp4") for g in profile.gemm if g.dtype == "fp8")
        gemm += tuple(t for t in derived if t is not None)
    attention = tuple(
        t for t in (_scale_attention(a, r) for a in profile.attention) if t is not None
    )
    moe = tuple(t for t in (_scale_moe(m, r) for m in profile.moe) if t is not None)
    collectives = tuple(
        t for t in (_scale_collective(c, r) for c in profile.collectives) if t is not None
    )
    note = (
        f"scaled from {reference.name} to {target.name}: bandwidth ×{1 / r.memory:.3g}, "
        f"clock ×{1 / r.clock:.3g}, link "
        + (f"×{1 / r.link:.3g}" if r.link else "formula (no GPU fabric)")
    )
    return MeasuredProfile(
        name=f"{profile.name} scaled to {target.name}",
        gemm=gemm,
        attention=attention,
        moe=moe,
        collectives=collectives,
        notes=(*profile.notes, note),
    )
