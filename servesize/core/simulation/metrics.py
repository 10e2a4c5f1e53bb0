"""Percentiles that keep failures in the denominator, and latency summaries (docs/modeling.md §4.3).

Percentiles use numpy's default ``linear`` method (Hyndman–Fan type 7, what vLLM bench reports),
extended to ``+inf`` values: a failed request counts as an infinitely slow one, so with 2 % failures
the all-requests p99 is ``inf``. ITL percentiles are *weighted*: a step of duration ``d`` in which
``w`` requests streamed a token contributes ``w`` samples of ``d``, and the weighted percentile is
exactly ``np.percentile(np.repeat(values, weights), q)`` without materialising the repeat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PERCENTILES = (50.0, 90.0, 95.0, 99.0)


def _lerp(a: float, b: float, gamma: float) -> float:
    """numpy's ``_lerp`` (``a + (b - a) γ``, mirrored for ``γ >= 0.5``), made safe for ``inf``."""
    if gamma == 0.0 or a == b:
        return a
    if math.isinf(a) or math.isinf(b):
        return b if math.isinf(b) else a
    diff = b - a
    if gamma >= 0.5:
        return b - diff * (1.0 - gamma)
    return a + diff * gamma


def percentile(values: np.ndarray, q: float) -> float:
    """Linear-interpolation percentile that tolerates ``+inf`` (NaN if ``values`` is empty).

    Examples
    --------
    >>> percentile(np.array([1.0, 2.0, 3.0, 4.0]), 50)
    2.5
    >>> percentile(np.array([1.0, 2.0, np.inf]), 99)
    inf
    """
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size
    if n == 0:
        return math.nan
    h = (n - 1) * (q / 100.0)
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    return _lerp(float(v[lo]), float(v[hi]), h - lo)


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """Percentile of ``values`` each repeated ``weights`` times (integer weights, ``>= 0``).

    Equals ``np.percentile(np.repeat(values, weights), q)`` for finite values.

    Examples
    --------
    >>> weighted_percentile(np.array([0.01, 0.05]), np.array([3, 1]), 50)
    0.01
    """
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.int64)
    keep = w > 0
    v, w = v[keep], w[keep]
    if v.size == 0:
        return math.nan
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    total = int(cum[-1])
    h = (total - 1) * (q / 100.0)
    lo = math.floor(h)
    hi = min(lo + 1, total - 1)
    a = float(v[np.searchsorted(cum, lo, side="right")])
    b = float(v[np.searchsorted(cum, hi, side="right")])
    return _lerp(a, b, h - lo)


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    """``Σ w v / Σ w`` (NaN when the weights sum to 0)."""
    w = np.asarray(weights, dtype=np.float64)
    total = float(w.sum())
    if total == 0:
        return math.nan
    return float(np.dot(np.asarray(values, dtype=np.float64), w) / total)


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyStats:
    """Mean and percentiles of one latency metric, in seconds (``inf`` when failures dominate).

    Attributes
    ----------
    count : int
        Samples (requests, or tokens for ITL), failures included as ``inf``.
    mean, p50, p90, p95, p99 : float
        NaN when there are no samples.
    """

    count: int
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: np.ndarray) -> LatencyStats:
        """Stats of unweighted samples (``inf`` allowed)."""
        v = np.asarray(values, dtype=np.float64)
        if v.size == 0:
            nan = math.nan
            return cls(count=0, mean=nan, p50=nan, p90=nan, p95=nan, p99=nan)
        p50, p90, p95, p99 = (percentile(v, q) for q in PERCENTILES)
        return cls(count=int(v.size), mean=float(v.mean()), p50=p50, p90=p90, p95=p95, p99=p99)

    @classmethod
    def of_weighted(cls, values: np.ndarray, weights: np.ndarray) -> LatencyStats:
        """Stats of ``values`` repeated ``weights`` times."""
        w = np.asarray(weights, dtype=np.int64)
        count = int(w.sum())
        if count == 0:
            return cls.of(np.zeros(0))
        p50, p90, p95, p99 = (weighted_percentile(values, w, q) for q in PERCENTILES)
        mean = weighted_mean(values, w)
        return cls(count=count, mean=mean, p50=p50, p90=p90, p95=p95, p99=p99)


@dataclass(frozen=True, slots=True, kw_only=True)
class SLO:
    """Per-request latency targets; a request is *good* when it completed and meets all given.

    TPOT is checked only for requests with at least two output tokens (vLLM bench counts the
    others with TPOT = 0 for goodput).
    """

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
