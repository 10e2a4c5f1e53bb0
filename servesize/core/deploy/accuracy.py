"""Accuracy of stored plan verifications: per engine and hardware, how far the predicted
latencies were from the measured ones.

For each metric with ``n`` pairs ``(predicted F_i, measured A_i)`` (both finite and > 0):

- ``median_ratio`` = median of ``A_i / F_i`` (1 is exact; > 1 the plan was optimistic);
- ``mape_percent`` = ``100 / n · Σ |A_i − F_i| / A_i`` (mean absolute percentage error, the
  measured value as the denominator, Hyndman & Koehler 2006).

Nothing here changes the engine constants: a refit stays ``python -m bench.accuracy --fit``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ACCURACY_METRICS", "AccuracyGroup", "MetricAccuracy", "accuracy_summary"]

ACCURACY_METRICS = ("ttft_s.p50", "ttft_s.p95", "tpot_s.p50", "tpot_s.p95")


@dataclass(frozen=True, slots=True)
class MetricAccuracy:
    metric: str
    count: int
    median_ratio: float | None
    """Median of measured / predicted; None without a usable pair."""
    mape_percent: float | None


@dataclass(frozen=True, slots=True)
class AccuracyGroup:
    engine: str
    hardware: str
    verifications: int
    metrics: tuple[MetricAccuracy, ...]


def _usable(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def accuracy_summary(
    rows: Iterable[tuple[str, str, Mapping[str, tuple[float | None, float | None]]]],
    metrics: tuple[str, ...] = ACCURACY_METRICS,
) -> list[AccuracyGroup]:
    """Groups sorted by (engine, hardware); ``rows`` are ``(engine, hardware, {metric:
    (predicted, measured)})``, one per stored verification."""
    groups: dict[tuple[str, str], list[Mapping[str, tuple[float | None, float | None]]]] = {}
    for engine, hardware, pairs in rows:
        groups.setdefault((engine, hardware), []).append(pairs)
    out = []
    for (engine, hardware), items in sorted(groups.items()):
        summaries = []
        for metric in metrics:
            usable: list[tuple[float, float]] = []
            for item in items:
                predicted, measured = item.get(metric, (None, None))
                if predicted is None or measured is None:
                    continue
                if _usable(predicted) and _usable(measured):
                    usable.append((predicted, measured))
            ratios = [m / p for p, m in usable]
            errors = [abs(m - p) / m for p, m in usable]
            summaries.append(
                MetricAccuracy(
                    metric=metric,
                    count=len(usable),
                    median_ratio=statistics.median(ratios) if ratios else None,
                    mape_percent=100 * statistics.fmean(errors) if errors else None,
                )
            )
        out.append(AccuracyGroup(engine, hardware, len(items), tuple(summaries)))
    return out
