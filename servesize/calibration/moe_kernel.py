"""Fit of the grouped-GEMM MoE layer model on measured MoE layers (``moe.csv``).

:func:`~servesize.core.steptime.moe_layer_time_s` prices one layer with five constants
(:class:`~servesize.core.steptime.MoeKernelConstants`): a per-layer floor, the grouped GEMMs'
efficiency in bf16 and in fp8, and the activation elements moved per routed row (``c_h·h +
c_i·I``). :func:`fit_moe_kernel` fits them on the balanced-routing tables of the shapes given
(Nelder-Mead on the mean absolute log error; positive constants), with the GEMM tile and the
datasheet rates fixed; :func:`moe_kernel_errors` reports the absolute percentage errors on any
tables, e.g. the Mixtral-8x7B layers held out of the fit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize

from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import (
    DEFAULT_GEMM_EFFICIENCY_BY_DTYPE,
    DEFAULT_MOE_KERNEL,
    DeviceRates,
    MoeKernelConstants,
    MoeLayerShape,
    MoeTable,
    moe_layer_time_s,
)

__all__ = ["MoeKernelErrors", "datasheet_rates", "fit_moe_kernel", "moe_kernel_errors"]

FIT_START = MoeKernelConstants(
    floor_s=20e-6,
    gemm_efficiency={"bf16": 0.6, "fp16": 0.6, "fp32": 0.6, "fp8": 0.5, "fp4": 0.5},
    activation_hidden_factor=4.0,
    activation_intermediate_factor=6.0,
    tile_rows=DEFAULT_MOE_KERNEL.tile_rows,
)
"""Where the fit starts (the GEMM efficiency and the activation traffic trade off along a
shallow valley, so the start is fixed for a reproducible answer): the dense GEMM efficiencies
rounded down and the un-fused activation count ``4·h + 6·I`` (permute write, GEMM 1 read, GEMM 1
output ``2I`` written and read, activation ``I`` written and read by GEMM 2, GEMM 2 output and
the un-permute read)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeKernelErrors:
    """Absolute percentage errors of the model on ``count`` measured layers."""

    count: int
    mape: float
    median: float
    p90: float


def datasheet_rates(hardware: HardwareSpec) -> DeviceRates:
    """The datasheet peaks and HBM bandwidth of ``hardware`` with the default efficiencies and
    no engine slowdown (an isolated kernel, as the tables time it)."""
    peaks = {d: float(p) for d in ("bf16", "fp16", "fp8") if (p := hardware.peak_flop_per_s(d))}
    return DeviceRates(
        peak_flop_per_s=peaks,
        memory_bandwidth_bytes_per_s=float(hardware.memory_bandwidth_bytes_per_s),
        gemm_efficiency={d: DEFAULT_GEMM_EFFICIENCY_BY_DTYPE[d] for d in peaks},
    )


def _predict(table: MoeTable, rates: DeviceRates, constants: MoeKernelConstants) -> np.ndarray:
    shape = MoeLayerShape.of_table(table, "fp8" if table.dtype == "fp8" else "bf16")
    t, *_ = moe_layer_time_s(shape, table.tokens, rates=rates, constants=constants, balanced=True)
    return np.asarray(t)


def _ratios(
    tables: Sequence[MoeTable], rates: DeviceRates, constants: MoeKernelConstants
) -> np.ndarray:
    return np.concatenate([_predict(t, rates, constants) / t.latency_s for t in tables])


def moe_kernel_errors(
    tables: Iterable[MoeTable], rates: DeviceRates, constants: MoeKernelConstants
) -> MoeKernelErrors:
    """Errors of ``constants`` on every row of ``tables``."""
    chosen = list(tables)
    if not chosen:
        return MoeKernelErrors(count=0, mape=math.nan, median=math.nan, p90=math.nan)
    ape = 100.0 * np.abs(_ratios(chosen, rates, constants) - 1.0)
    return MoeKernelErrors(
        count=int(ape.size),
        mape=float(ape.mean()),
        median=float(np.median(ape)),
        p90=float(np.percentile(ape, 90)),
    )


def _constants(x: np.ndarray, base: MoeKernelConstants) -> MoeKernelConstants:
    floor, bf16, fp8, ch, ci = (float(v) for v in np.exp(x))
    efficiency = {"bf16": bf16, "fp16": bf16, "fp32": bf16, "fp8": fp8, "fp4": fp8}
    return replace(
        base,
        floor_s=floor,
        gemm_efficiency=efficiency,
        activation_hidden_factor=ch,
        activation_intermediate_factor=ci,
    )


def fit_moe_kernel(
    tables: Iterable[MoeTable],
    rates: DeviceRates,
    *,
    start: MoeKernelConstants = FIT_START,
    max_evaluations: int = 3000,
) -> MoeKernelConstants:
    """The constants minimising the mean ``|log(predicted / measured)|`` over the balanced
    tables among ``tables`` (the tile stays ``start.tile_rows``)."""
    chosen = [t for t in tables if t.distribution == "balanced"]
    if not chosen:
        raise ValueError("no balanced-routing MoE tables to fit on")
    x0 = np.log(
        [
            start.floor_s,
            start.gemm_efficiency["bf16"],
            start.gemm_efficiency["fp8"],
            start.activation_hidden_factor,
            start.activation_intermediate_factor,
        ]
    )

    def loss(x: np.ndarray) -> float:
        return float(np.mean(np.abs(np.log(_ratios(chosen, rates, _constants(x, start))))))

    result = minimize(
        loss,
        x0,
        method="Nelder-Mead",
        options={"maxfev": max_evaluations, "xatol": 1e-6, "fatol": 1e-9},
    )
    return _constants(np.asarray(result.x), start)
