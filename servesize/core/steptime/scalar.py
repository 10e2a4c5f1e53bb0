"""Token- and sequence-dependent step-time terms at one count, in Python floats.

:class:`ScalarCounts` is what :class:`~servesize.core.steptime.fast.FastStepTime` uses for a
count that is not an integer it has tabulated (the mean-field batch of the closed-loop fixed
point, ``docs/modeling.md`` §2.6): the same GEMM, element-wise and overhead terms as
``StepTimeModel.step_time`` (:func:`~servesize.core.steptime.gemm.gemm_cost`,
:meth:`~servesize.core.steptime.model.StepTimeModel.elementwise_bytes`,
:meth:`~servesize.core.steptime.model.StepTimeModel.overhead_s`), summed in the same order.
"""

from __future__ import annotations

import math
from bisect import bisect_left

import numpy as np

from servesize.core.steptime.gemm import GemmCurve
from servesize.core.steptime.model import StepTimeModel
from servesize.core.steptime.operators import GemmOp
from servesize.core.steptime.rates import DeviceRates

__all__ = ["ScalarCounts"]


class _ScalarGemm:
    """:func:`~servesize.core.steptime.gemm.gemm_cost` ``.time_s`` of one GEMM at one ``m``,
    in Python floats (roofline with floor, or the measured curve by log-log interpolation as
    :func:`~servesize.core.steptime.interpolation.loglog_interp`, scaled by the slowdown of
    the binding roofline term)."""

    __slots__ = (
        "_ab",
        "_cden",
        "_cs",
        "_curve",
        "_floor",
        "_fp",
        "_k",
        "_layers",
        "_lfp",
        "_lxp",
        "_mden",
        "_ms",
        "_n",
        "_nk",
        "_wb",
        "_xp",
    )

    def __init__(self, op: GemmOp, curve: GemmCurve | None, rates: DeviceRates, ab: float):
        dtype = op.compute_dtype
        self._n, self._k = float(op.n), float(op.k)
        self._nk = float(op.n) * float(op.k)
        self._wb, self._ab = float(op.weight_bytes_per_element), float(ab)
        self._cs, self._ms = rates.compute_slowdown, rates.memory_slowdown
        self._cden = rates.peak(dtype) * rates.gemm_efficiency[dtype]
        self._mden = rates.memory_bandwidth_bytes_per_s * rates.bandwidth_efficiency
        self._floor = rates.kernel_floor_s
        self._layers = float(op.layers)
        self._curve = curve is not None
        self._xp: list[float] = [] if curve is None else curve.m.tolist()
        self._fp: list[float] = [] if curve is None else curve.latency_s.tolist()
        self._lxp: list[float] = [] if curve is None else np.log(curve.m).tolist()
        self._lfp: list[float] = [] if curve is None else np.log(curve.latency_s).tolist()

    def __call__(self, m: float) -> float:
        if not m > 0:
            return 0.0
        flops = 2.0 * m * self._n * self._k
        nbytes = self._nk * self._wb + m * (self._n + self._k) * self._ab
        tc = flops * self._cs / self._cden
        tm = nbytes * self._ms / self._mden
        if not self._curve:
            return ((tc if tc > tm else tm) + self._floor) * self._layers
        scale = self._cs if tc >= tm else self._ms
        return self._latency(m if m > 1.0 else 1.0) * scale * self._layers

    def _latency(self, x: float) -> float:
        xp, fp = self._xp, self._fp
        i = bisect_left(xp, x)
        if i < len(xp) and xp[i] == x:
            return fp[i]
        if x > xp[-1]:
            return fp[-1] * x / xp[-1]
        lxp, lfp = self._lxp, self._lfp
        if i == 0:
            return math.exp(lfp[0])
        lx = math.log(x)
        j = i - 1
        slope = (lfp[j + 1] - lfp[j]) / (lxp[j + 1] - lxp[j])
        return math.exp(slope * (lx - lxp[j]) + lfp[j])


class ScalarCounts:
    """The count-dependent part of ``fast._Vectorised`` for one count in Python floats: GEMMs,
    element-wise traffic and the engine's overheads, for models without routed experts on
    one GPU per data-parallel rank (no collectives). Other models return None from
    :meth:`build` and keep the vectorised call. The sum runs in ``_Vectorised``'s order;
    ``math.log``/``math.exp`` against numpy's differ by a few ulps."""

    __slots__ = (
        "_decode_only",
        "_dp",
        "_eager_s",
        "_ew",
        "_gemms",
        "_graph_max",
        "_graphs",
        "_mden",
        "_ms",
        "_part",
        "_step_s",
    )

    def __init__(self, model: StepTimeModel, part: str) -> None:
        inv, rates, eng = model.inventory, model.rates, model.engine
        per_sequence = part == "sequences"
        self._part = part
        self._dp = float(inv.data_parallel_size)
        self._gemms = tuple(
            _ScalarGemm(g, c, rates, inv.activation_bytes)
            for g, c in zip(inv.gemms, model.gemm_curves, strict=True)
            if g.per_sequence == per_sequence
        )
        self._ew = inv.elementwise_bytes_per_token
        self._ms = rates.memory_slowdown
        self._mden = rates.memory_bandwidth_bytes_per_s * rates.bandwidth_efficiency
        self._graphs = model.cuda_graphs
        self._graph_max = float(eng.cuda_graph_max_tokens)
        self._decode_only = eng.cuda_graph_decode_only
        self._step_s = eng.step_overhead_s
        self._eager_s = eng.eager_overhead_per_layer_s * inv.num_layers

    @classmethod
    def build(cls, model: StepTimeModel, part: str) -> ScalarCounts | None:
        inv = model.inventory
        if part != "sequences" and (
            inv.moe
            or inv.tensor_parallel_size > 1
            or inv.pipeline_parallel_size > 1
            or inv.all_to_alls_per_step
        ):
            return None
        return cls(model, part)

    def __call__(self, count: float) -> float:
        per_rank = count / self._dp
        total = 0.0
        for gemm in self._gemms:
            total = total + gemm(per_rank)
        if self._part == "sequences":
            return total
        total = total + per_rank * self._ew * self._ms / self._mden
        total = total + 0.0  # no collectives (see build)
        if not count > 0:
            return total
        eager = (not self._graphs) or per_rank > self._graph_max
        if self._decode_only and self._part == "tokens_prefill":
            eager = True
        return total + (self._step_s + (self._eager_s if eager else 0.0))
