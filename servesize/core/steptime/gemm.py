"""GEMM time: roofline with a floor, or a measured table's curve over ``m``.

For a shape the table lacks, the measured shapes' ratio ``t_measured / t_roofline`` is
averaged with inverse-square distance weights in ``(log n, log k)`` and applied to the shape's
own roofline (exact on measured shapes; AIConfigurator interpolates the same tables,
ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/sdk/perf_database.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servesize.core.steptime._arrays import FloatArray
from servesize.core.steptime.interpolation import loglog_interp
from servesize.core.steptime.operators import GemmOp
from servesize.core.steptime.rates import DeviceRates, KernelCost, kernel_cost
from servesize.core.steptime.tables import GemmTable

__all__ = ["GemmCurve", "gemm_cost", "gemm_curve"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmCurve:
    """Measured (or transferred) latency of one GEMM shape over the table's ``m`` grid."""

    m: FloatArray
    latency_s: FloatArray
    exact: bool
    """True when the shape itself was measured; False when transferred from a neighbour."""

    def latency(self, m: FloatArray) -> FloatArray:
        return loglog_interp(m, self.m, self.latency_s)


def _gemm_roofline(
    m: FloatArray, n: float, k: float, wb: float, ab: float, dtype: str, rates: DeviceRates
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    flops = 2.0 * m * n * k
    nbytes = n * k * wb + m * (n + k) * ab
    return flops, nbytes, rates.compute_time_s(flops, dtype), rates.memory_time_s(nbytes)


def gemm_curve(
    op: GemmOp, table: GemmTable, *, activation_bytes: float, rates: DeviceRates
) -> GemmCurve:
    """The latency curve of ``op`` from ``table``: its own row, or ratio-transferred.

    Transfer: at each ``m`` of the grid the ratio ``t_measured / t_roofline`` of the measured
    shapes is averaged with inverse-square distance weights in ``(log n, log k)`` and applied to
    ``op``'s roofline time (exact when ``op``'s shape is in the table).
    """
    same_bytes = op.weight_bytes_per_element == _table_weight_bytes(table)
    row = table.shape_index(op.n, op.k) if same_bytes else None
    dtype = op.compute_dtype
    if row is not None:
        return GemmCurve(m=table.m, latency_s=table.latency_s[row], exact=True)
    m = table.m
    ratios = np.empty((len(table.n), len(m)))
    for s, (n, k) in enumerate(zip(table.n, table.k, strict=True)):
        _, _, tc, tm = _gemm_roofline(
            m, float(n), float(k), _table_weight_bytes(table), activation_bytes, dtype, rates
        )
        ratios[s] = table.latency_s[s] / np.maximum(tc, tm)
    distance = np.hypot(np.log(table.n / op.n), np.log(table.k / op.k))
    weights = 1.0 / np.maximum(distance, 1e-9) ** 2
    log_ratio = (weights[:, None] * np.log(ratios)).sum(axis=0) / weights.sum()
    _, _, tc, tm = _gemm_roofline(
        m, op.n, op.k, op.weight_bytes_per_element, activation_bytes, dtype, rates
    )
    return GemmCurve(m=m, latency_s=np.exp(log_ratio) * np.maximum(tc, tm), exact=False)


def _table_weight_bytes(table: GemmTable) -> float:
    """Bytes per weight of the table's dtype: FP8 1, FP4 9/16 (NVFP4: 4 bits plus one FP8 scale
    per 16, the tables derived in ``scaling.py``), else 2."""
    return {"fp8": 1.0, "fp4": 9 / 16}.get(table.dtype, 2.0)


def gemm_cost(
    op: GemmOp,
    m: FloatArray,
    *,
    activation_bytes: float,
    rates: DeviceRates,
    curve: GemmCurve | None,
) -> KernelCost:
    """``op.layers`` GEMMs with ``m`` rows each (0 rows: no kernel)."""
    flops, nbytes, tc, tm = _gemm_roofline(
        m, op.n, op.k, op.weight_bytes_per_element, activation_bytes, op.compute_dtype, rates
    )
    if curve is None:
        t = np.maximum(tc, tm) + rates.kernel_floor_s
    else:
        scale = np.where(tc >= tm, rates.compute_slowdown, rates.memory_slowdown)
        t = curve.latency(np.maximum(m, 1.0)) * scale
    active = m > 0
    layers = float(op.layers)
    return kernel_cost(
        np.where(active, t * layers, 0.0),
        flops * layers,
        np.where(active, nbytes * layers, 0.0),
        tc,
        tm,
    )
