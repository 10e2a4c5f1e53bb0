"""Prediction intervals from out-of-sample residuals (docs/modeling.md §5.7).

A held-out residual is ``r = ln(measured / predicted)`` of one serving row whose model (or
engine) the constants were not fitted on. For a coverage ``c`` the interval of a prediction
``p`` is the multiplicative band

    [p · exp(q_lo), p · exp(q_hi)],   q_lo = Q((1 − c)/2),  q_hi = Q((1 + c)/2)

with ``Q`` the empirical quantile of the residuals of the prediction's group: engine × model
family (the engine's pooled residuals, then every residual, when a group has fewer than
``min_rows``) for a model with held-out rows in the group, every residual for a model
without. A rate ``x = k / T`` that is inversely proportional to a latency ``T`` (closed-loop
throughput ``C / E2E``, a replica's saturation rate) takes the latency's band inverted:
``[x · exp(−q_hi), x · exp(−q_lo)]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "METRICS",
    "Interval",
    "PredictionIntervals",
    "ResidualGroup",
    "empirical_quantile",
    "group_key",
    "residual_group",
]

METRICS: tuple[str, ...] = ("ttft_s", "tpot_s", "e2e_s")
"""Metrics with residual quantiles: mean TTFT, mean TPOT, mean end-to-end latency."""

ANY = "*"
"""Wildcard of a group key (``"vllm/*"``: every family of vLLM; ``"*/*"``: every row)."""


def group_key(engine: str, family: str) -> str:
    """``"<engine>/<family>"``, the key of a residual group."""
    return f"{engine}/{family}"


def empirical_quantile(values: Sequence[float], q: float) -> float:
    """Quantile ``q`` of ``values`` by linear interpolation between order statistics.

    Hyndman & Fan (1996) type 7 (numpy's default): with ``x`` sorted and ``h = (n − 1) q``,
    ``Q(q) = x[⌊h⌋] + (h − ⌊h⌋)(x[⌊h⌋ + 1] − x[⌊h⌋])``.

    >>> empirical_quantile([3.0, 1.0, 2.0, 4.0], 0.5)
    2.5
    """
    if not values:
        raise ValueError("no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside [0, 1]")
    x = sorted(values)
    h = (len(x) - 1) * q
    i = math.floor(h)
    if i + 1 >= len(x):
        return x[-1]
    return x[i] + (h - i) * (x[i + 1] - x[i])


@dataclass(frozen=True, slots=True, kw_only=True)
class ResidualGroup:
    """Log-residual quantiles of one group: ``bands[metric][coverage] = (q_lo, q_hi)``."""

    key: str
    rows: int
    models: tuple[str, ...]
    bands: Mapping[str, Mapping[float, tuple[float, float]]]


def residual_group(
    key: str,
    residuals: Mapping[str, Sequence[float]],
    coverages: Sequence[float],
    models: Sequence[str] = (),
) -> ResidualGroup:
    """The quantile bands of ``residuals`` (``{metric: [ln(measured/predicted), ...]}``) at each
    coverage ``c``: ``(Q((1 − c)/2), Q((1 + c)/2))``."""
    rows = {len(v) for v in residuals.values()}
    if len(rows) != 1:
        raise ValueError("every metric needs the same residual rows")
    bands = {
        metric: {
            c: (empirical_quantile(values, (1 - c) / 2), empirical_quantile(values, (1 + c) / 2))
            for c in coverages
        }
        for metric, values in residuals.items()
    }
    return ResidualGroup(key=key, rows=rows.pop(), models=tuple(sorted(models)), bands=bands)


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """``[low, high]`` holds the measurement with probability ``coverage`` (out of sample)."""

    low: float
    high: float
    coverage: float
    basis: str
    """Which residuals gave it: the group key and its number of held-out rows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictionIntervals:
    """Residual groups keyed ``"<engine>/<family>"``, ``"<engine>/*"`` and ``"*/*"``."""

    groups: Mapping[str, ResidualGroup]
    coverages: tuple[float, ...]
    min_rows: int
    """Fewest rows a group needs before its own quantiles are used."""

    def group(self, engine: str, family: str, model: str | None = None) -> ResidualGroup | None:
        """The most specific group with at least :attr:`min_rows` rows, else the largest
        available (None when there are no groups). With ``model`` given, a group other than
        ``"*/*"`` qualifies only if it holds that model's residuals: a model without
        held-out rows takes the band of every row, which is what covers models left out of
        the residuals best (docs/modeling.md §5.7)."""
        keys = (group_key(engine, family), group_key(engine, ANY), group_key(ANY, ANY))
        found = [
            self.groups[k]
            for k in keys
            if k in self.groups
            and (model is None or k == group_key(ANY, ANY) or model in self.groups[k].models)
        ]
        for g in found:
            if g.rows >= self.min_rows:
                return g
        return max(found, key=lambda g: g.rows, default=None)

    def latency(
        self,
        metric: str,
        value: float,
        *,
        engine: str,
        family: str,
        coverage: float,
        model: str | None = None,
    ) -> Interval | None:
        """The band of a latency prediction ``value`` (s), or None without residuals or for a
        non-finite or non-positive value."""
        found = self._band(metric, engine, family, coverage, model)
        if found is None or not (math.isfinite(value) and value > 0):
            return None
        (lo, hi), basis = found
        return Interval(
            low=value * math.exp(lo), high=value * math.exp(hi), coverage=coverage, basis=basis
        )

    def rate(
        self,
        metric: str,
        value: float,
        *,
        engine: str,
        family: str,
        coverage: float,
        model: str | None = None,
    ) -> Interval | None:
        """The band of a rate inversely proportional to the latency ``metric``."""
        found = self._band(metric, engine, family, coverage, model)
        if found is None or not (math.isfinite(value) and value > 0):
            return None
        (lo, hi), basis = found
        return Interval(
            low=value * math.exp(-hi), high=value * math.exp(-lo), coverage=coverage, basis=basis
        )

    def _band(
        self, metric: str, engine: str, family: str, coverage: float, model: str | None
    ) -> tuple[tuple[float, float], str] | None:
        g = self.group(engine, family, model)
        if g is None or metric not in g.bands or coverage not in g.bands[metric]:
            return None
        return g.bands[metric][coverage], f"{g.key} ({g.rows} held-out rows)"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> PredictionIntervals:
        """Parse the ``prediction_intervals.json`` layout (``coverages``, ``min_rows``,
        ``groups: {key: {rows, models, bands: {metric: {"0.8": [lo, hi]}}}}``)."""
        coverages = tuple(float(c) for c in data["coverages"])
        groups = {
            key: ResidualGroup(
                key=key,
                rows=int(g["rows"]),
                models=tuple(g.get("models", ())),
                bands={
                    metric: {float(c): (float(b[0]), float(b[1])) for c, b in by_cov.items()}
                    for metric, by_cov in g["bands"].items()
                },
            )
            for key, g in data["groups"].items()
        }
        return cls(groups=groups, coverages=coverages, min_rows=int(data["min_rows"]))
