"""Kernel costing conventions: peak rates, achieved fractions, floors, and the cost record.

Every kernel is costed as a roofline with a fixed floor,

``t = max(F / (P·η_c), Q / (W·η_m)) + t_floor``

with ``F`` FLOPs, ``Q`` bytes moved, ``P`` the dense peak of the compute dtype, ``W`` the HBM
bandwidth, ``η`` the achieved fractions and ``t_floor`` the shortest a kernel runs. A
measured table replaces the whole expression. For a shape the table lacks, the nearest
measured shape's latency is scaled by the ratio of the two roofline times (ratio transfer:
exact on measured shapes, keeps the table's efficiency for similar ones).

Defaults (used only without a table), from ``servesize/data/h100`` (aiconfigurator-core 0.12.0
H100 SXM tables):

* ``DEFAULT_GEMM_EFFICIENCY_BY_DTYPE``: bf16 0.78 (:data:`servesize.core.hardware.
  DEFAULT_GEMM_EFFICIENCY`; ``gemm.csv`` median 785 of 989 TFLOP/s at m ≥ 4096), fp8 0.55
  (median 1,050–1,080 of 1,979 TFLOP/s at m ≥ 4096);
* ``DEFAULT_BANDWIDTH_EFFICIENCY`` 0.85 (:mod:`servesize.core.hardware`; a least-squares fit of
  ``gemm.csv`` at m ≤ 8 gives 2.85–2.96 TB/s of 3.35 plus a floor);
* ``DEFAULT_KERNEL_FLOOR_S`` 4 µs: the same fit's intercept, 3.1 µs (vLLM) to 5.0 µs
  (TensorRT-LLM) for bf16 GEMMs;
* routed experts have their own fitted model and floor
  (:data:`servesize.core.steptime.experts.DEFAULT_MOE_KERNEL`);
* ``DEFAULT_ATTENTION_FLOOR_S`` 8 µs: decode attention of one short sequence takes 8.4 µs
  (TensorRT-LLM) to 11.8 µs (vLLM FA3) in ``decode_attention_gqa.csv``;
* prefill attention efficiency ``η(t̄) = 0.55·t̄/(t̄ + 1024)`` over the chunk length ``t̄``:
  ``context_attention_gqa.csv`` reaches 0.25–0.31 of the bf16 peak at 1k tokens and 0.5–0.6
  at 16k (FlashAttention tiles idle on short sequences).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from servesize.core.hardware import DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_GEMM_EFFICIENCY
from servesize.core.steptime._arrays import FloatArray

__all__ = [
    "DEFAULT_ATTENTION_FLOOR_S",
    "DEFAULT_GEMM_EFFICIENCY_BY_DTYPE",
    "DEFAULT_KERNEL_FLOOR_S",
    "PREFILL_ATTENTION_EFFICIENCY_MAX",
    "PREFILL_ATTENTION_HALF_TOKENS",
    "DeviceRates",
    "KernelCost",
    "kernel_cost",
]

DEFAULT_GEMM_EFFICIENCY_BY_DTYPE: dict[str, float] = {
    "bf16": DEFAULT_GEMM_EFFICIENCY,
    "fp16": DEFAULT_GEMM_EFFICIENCY,
    "fp32": DEFAULT_GEMM_EFFICIENCY,
    "fp8": 0.55,
    "fp4": 0.55,
}
DEFAULT_KERNEL_FLOOR_S = 4e-6
DEFAULT_ATTENTION_FLOOR_S = 8e-6
PREFILL_ATTENTION_EFFICIENCY_MAX = 0.55
PREFILL_ATTENTION_HALF_TOKENS = 1024.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceRates:
    """Peak rates and achieved fractions of one GPU, resolved for the model's dtypes."""

    peak_flop_per_s: Mapping[str, float]
    """Dense peak by compute dtype (``bf16``, ``fp8``, ``fp4``...), fallbacks applied."""
    memory_bandwidth_bytes_per_s: float
    gemm_efficiency: Mapping[str, float]
    bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
    kernel_floor_s: float = DEFAULT_KERNEL_FLOOR_S
    attention_floor_s: float = DEFAULT_ATTENTION_FLOOR_S
    compute_slowdown: float = 1.0
    memory_slowdown: float = 1.0

    def peak(self, dtype: str) -> float:
        return self.peak_flop_per_s[dtype]

    def compute_time_s(self, flops: FloatArray, dtype: str) -> FloatArray:
        return np.asarray(
            flops * self.compute_slowdown / (self.peak(dtype) * self.gemm_efficiency[dtype]),
            dtype=np.float64,
        )

    def memory_time_s(self, nbytes: FloatArray) -> FloatArray:
        return np.asarray(
            nbytes
            * self.memory_slowdown
            / (self.memory_bandwidth_bytes_per_s * self.bandwidth_efficiency),
            dtype=np.float64,
        )


@dataclass(frozen=True, slots=True)
class KernelCost:
    """Time, work and binding resource of one operator over ``n`` steps."""

    time_s: FloatArray
    flops: FloatArray
    bytes: FloatArray
    compute_bound: FloatArray
    """1.0 where the roofline's compute term exceeds its memory term, else 0.0."""


def kernel_cost(
    time_s: FloatArray, flops: FloatArray, nbytes: FloatArray, tc: FloatArray, tm: FloatArray
) -> KernelCost:
    """A :class:`KernelCost`, compute-bound where the compute term ``tc`` ≥ memory term ``tm``."""
    return KernelCost(time_s, flops, nbytes, (tc >= tm).astype(np.float64))
