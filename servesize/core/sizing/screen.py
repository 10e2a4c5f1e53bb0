"""Tier A screen: the largest per-replica arrival rate at which the mean-field model meets an SLO.

Each target becomes a curve over the load axis of :func:`open_loop_curve` (one vectorised pass):

- TTFT: the mean, or a quantile ``q``, which holds where ``P(TTFT <= limit) >= q`` (the exact CDF
  of the Tier A TTFT distribution, so no quantile is searched for at points that clearly pass);
- TPOT: ``τ̄`` for every statistic (mean-field: every request sees the same mean step);
- ITL: the mean ``τ̄``; a quantile is ``τ_mix`` once mixed steps exceed ``1 − q`` of the gaps;
- E2E: ``TTFT + (n − 1)·TPOT``, so ``P(E2E <= z) = P(TTFT <= z − (n − 1)·TPOT)``;
- attainment: ``1[TPOT <= y] · P(TTFT <= min(x, z − (n − 1)·TPOT))`` against the goal.

The rate where the first target fails is found by linear interpolation between the two grid
points around it; the answer is also capped at :data:`UTILIZATION_CAP` of the saturation rate,
where the mean-field model stops being accurate (the simulator verifies the chosen plans).
Failures (timeouts, rejections) do not exist in Tier A, so the failure budget always holds here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from servesize.core.slo.spec import LatencyTarget, ServiceLevelObjective
from servesize.core.steptime.openloop import OpenLoopCurve

__all__ = [
    "UTILIZATION_CAP",
    "Miss",
    "ScreenResult",
    "TargetCurve",
    "screen_curve",
    "target_curves",
]

UTILIZATION_CAP = 0.9
"""Tier A is accurate below about 90 % of the saturation rate (openloop.py)."""
SATURATION = "saturation"
_QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetCurve:
    """One SLO check along a curve: ``values`` gives the predicted value at chosen points,
    ``holds`` whether it is met at every point."""

    name: str
    limit: float
    direction: str
    values: Callable[[OpenLoopCurve], np.ndarray]
    holds: Callable[[OpenLoopCurve], np.ndarray]


@dataclass(frozen=True, slots=True, kw_only=True)
class Miss:
    """A target missed at the lowest load: ``predicted`` against ``limit``."""

    name: str
    predicted: float
    limit: float
    direction: str

    @property
    def relative_miss(self) -> float:
        """How far past the limit, as a fraction of it."""
        gap = (
            self.predicted - self.limit if self.direction == "max" else self.limit - self.predicted
        )
        return gap / self.limit


@dataclass(frozen=True, slots=True, kw_only=True)
class ScreenResult:
    """The Tier A answer for one replica."""

    max_rate_per_s: float
    """0 when the SLO is missed even at zero load."""
    saturation_rate_per_s: float
    binding: str
    """The target that limits the rate, or ``"saturation"``."""
    misses: tuple[Miss, ...] = ()
    """Targets missed at the lowest load (only when ``max_rate_per_s`` is 0)."""
    zero_load: tuple[Miss, ...] = ()
    """Every target's value at the lowest load, met or not (only when ``max_rate_per_s`` is 0;
    a met target has ``relative_miss <= 0``)."""


def _latency(target: LatencyTarget, n: float) -> TargetCurve:
    metric, stat, limit = target.metric, target.statistic, target.limit_s
    decode_steps = max(n - 1.0, 0.0)
    values: Callable[[OpenLoopCurve], np.ndarray]
    if metric == "tpot" or (metric == "itl" and stat == "mean"):

        def values(c: OpenLoopCurve) -> np.ndarray:
            return c.tpot_s if metric == "tpot" else c.mean_step_s

    elif metric == "itl":
        q = _QUANTILES[stat]

        def values(c: OpenLoopCurve) -> np.ndarray:
            return c.itl_quantile(q)

    elif stat == "mean":
        shift = decode_steps if metric == "e2e" else 0.0

        def values(c: OpenLoopCurve) -> np.ndarray:
            return np.asarray(c.ttft_mean_s + shift * c.tpot_s)

    else:
        q = _QUANTILES[stat]
        shift = decode_steps if metric == "e2e" else 0.0

        def values(c: OpenLoopCurve) -> np.ndarray:
            return np.asarray(c.ttft_quantile(q) + shift * c.tpot_s)

        def cdf_holds(c: OpenLoopCurve) -> np.ndarray:
            return c.ttft_cdf(limit - shift * c.tpot_s) >= q

        return TargetCurve(
            name=target.name, limit=limit, direction="max", values=values, holds=cdf_holds
        )

    def below_limit(c: OpenLoopCurve) -> np.ndarray:
        return values(c) <= limit

    return TargetCurve(
        name=target.name, limit=limit, direction="max", values=values, holds=below_limit
    )


def target_curves(objective: ServiceLevelObjective, output_tokens: float) -> list[TargetCurve]:
    """The objective's latency and attainment targets as :class:`TargetCurve`s."""
    out = [_latency(t, output_tokens) for t in objective.targets]
    a = objective.attainment
    if a is not None:
        decode_steps = max(output_tokens - 1.0, 0.0)
        ttft_limit = a.ttft_s if a.ttft_s is not None else math.inf
        tpot_limit = a.tpot_s if a.tpot_s is not None else math.inf
        e2e_limit = a.e2e_s if a.e2e_s is not None else math.inf

        def attained(c: OpenLoopCurve) -> np.ndarray:
            limit = np.minimum(ttft_limit, e2e_limit - decode_steps * c.tpot_s)
            ok_tpot = (c.tpot_s <= tpot_limit) | (output_tokens < 2)
            return np.asarray(np.where(ok_tpot, c.ttft_cdf(limit), 0.0))

        goal = a.goal
        out.append(
            TargetCurve(
                name="attainment",
                limit=goal,
                direction="min",
                values=attained,
                holds=lambda c: attained(c) >= goal,
            )
        )
    return out


def screen_curve(curve: OpenLoopCurve, targets: list[TargetCurve]) -> ScreenResult:
    """Largest rate on ``curve`` meeting every target (see the module docstring)."""
    cap = UTILIZATION_CAP * curve.saturation_rate_per_s
    if not targets:
        return ScreenResult(
            max_rate_per_s=cap,
            saturation_rate_per_s=curve.saturation_rate_per_s,
            binding=SATURATION,
        )
    ok = np.vstack([t.holds(curve) for t in targets])
    every = np.all(ok, axis=0)
    if every.all():
        return ScreenResult(
            max_rate_per_s=cap,
            saturation_rate_per_s=curve.saturation_rate_per_s,
            binding=SATURATION,
        )
    k = int(np.argmin(every))
    if k == 0:
        first = curve.take([0])
        values = [
            Miss(
                name=t.name,
                predicted=float(t.values(first)[0]),
                limit=t.limit,
                direction=t.direction,
            )
            for t in targets
        ]
        misses = tuple(m for m, good in zip(values, ok[:, 0], strict=True) if not good)
        return ScreenResult(
            max_rate_per_s=0.0,
            saturation_rate_per_s=curve.saturation_rate_per_s,
            binding=min(misses, key=lambda m: -m.relative_miss).name,
            misses=misses,
            zero_load=tuple(values),
        )
    pair = curve.take([k - 1, k])
    low, high = float(pair.rate_per_s[0]), float(pair.rate_per_s[1])
    best, binding = math.inf, SATURATION
    for t, good in zip(targets, ok[:, k], strict=True):
        if good:
            continue
        v0, v1 = (float(v) for v in t.values(pair))
        fraction = (t.limit - v0) / (v1 - v0) if v1 != v0 else 0.0
        rate = low + min(max(fraction, 0.0), 1.0) * (high - low)
        if rate < best:
            best, binding = rate, t.name
    if cap < best:
        best, binding = cap, SATURATION
    return ScreenResult(
        max_rate_per_s=best, saturation_rate_per_s=curve.saturation_rate_per_s, binding=binding
    )
