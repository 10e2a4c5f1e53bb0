"""Efficiency curves (achieved / peak) from measurements, with datasheet defaults.

Defaults, used only when a profile has no measurement of its own:

* ``DEFAULT_GEMM_EFFICIENCY = 0.78``: the median bf16 GEMM on an H100 SXM at M ≥ 1024 runs at
  770–790 TFLOP/s of 989 (``servesize/data/h100/gemm.csv``, the aiconfigurator-core 0.12.0 table);
  ml-engineering's MAMF table puts large-GEMM efficiency of current GPUs at 0.7–0.8 too.
* ``DEFAULT_BANDWIDTH_EFFICIENCY = 0.85``: device-to-device copies reach 0.8–0.9 of the HBM peak
  (aiconfigurator's system files carry ``mem_bw_empirical_scaling_factor: 0.8``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DEFAULT_GEMM_EFFICIENCY = 0.78
DEFAULT_BANDWIDTH_EFFICIENCY = 0.85


@dataclass(frozen=True, slots=True, kw_only=True)
class EfficiencyPoint:
    """Efficiency of GEMMs with ``m`` rows: median and best over the measured (N, K) shapes."""

    m: int
    median_efficiency: float
    best_efficiency: float
    samples: int


def gemm_efficiency_curves(
    rows: Iterable[tuple[str, int, float]], peaks_tflop_per_s: Mapping[str, float | None]
) -> dict[str, list[EfficiencyPoint]]:
    """Group ``(dtype, m, achieved_tflop_per_s)`` rows into achieved/peak curves over M.

    >>> curves = gemm_efficiency_curves(
    ...     [("bf16", 1, 2.0), ("bf16", 1, 4.0), ("bf16", 4096, 800.0)], {"bf16": 1000.0})
    >>> [(p.m, p.median_efficiency, p.best_efficiency) for p in curves["bf16"]]
    [(1, 0.003, 0.004), (4096, 0.8, 0.8)]
    """
    grouped: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for dtype, m, achieved in rows:
        peak = peaks_tflop_per_s.get(dtype)
        if peak:
            grouped[dtype][m].append(achieved / peak)
    return {
        dtype: [
            EfficiencyPoint(
                m=m,
                median_efficiency=statistics.median(values),
                best_efficiency=max(values),
                samples=len(values),
            )
            for m, values in sorted(by_m.items())
        ]
        for dtype, by_m in sorted(grouped.items())
    }


def bandwidth_efficiency(achieved_bytes_per_s: Iterable[float], peak_bytes_per_s: int) -> float:
    """Best achieved bandwidth over the datasheet peak (copies are limited by HBM, so the best
    of several runs is the sustainable figure).

    >>> bandwidth_efficiency([2.8e12, 2.9e12], 3_350_000_000_000)
    0.8656716417910447
    """
    return max(achieved_bytes_per_s) / peak_bytes_per_s
