"""Plan against measurement: one predicted figure beside its measured value, and the SLO
checked on the measured statistics.

A latency target ``metric.statistic <= limit`` holds when the measured statistic is at most the
limit; the failure budget holds when ``(failed + timed out) / requests <= max_failure_rate``
(docs/modeling.md §4.5: failures stay in every denominator); the throughput floor when the
measured completed requests per second reach it. An attainment target needs per-request data,
so from summary statistics it is neither met nor missed (``held = None``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from servesize.core.slo import ServiceLevelObjective

__all__ = ["MetricComparison", "SloCheck", "TargetCheck", "check_slo", "compare_metric"]


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """``predicted`` (with its interval ``[low, high]``) against ``measured``."""

    name: str
    predicted: float | None
    measured: float | None
    low: float | None = None
    high: float | None = None

    @property
    def ratio(self) -> float | None:
        """``measured / predicted``; ``None`` when either is missing or the prediction is 0."""
        if self.predicted is None or self.measured is None or self.predicted == 0:
            return None
        return self.measured / self.predicted

    @property
    def within_interval(self) -> bool | None:
        """Whether ``low <= measured <= high``; ``None`` without an interval or a measurement."""
        if self.low is None or self.high is None or self.measured is None:
            return None
        return self.low <= self.measured <= self.high


def compare_metric(
    name: str,
    predicted: float | None,
    measured: float | None,
    interval: tuple[float, float] | None = None,
) -> MetricComparison:
    """A comparison; non-finite figures count as missing."""

    def finite(value: float | None) -> float | None:
        return value if value is not None and math.isfinite(value) else None

    low, high = interval if interval is not None else (None, None)
    return MetricComparison(name, finite(predicted), finite(measured), low, high)


@dataclass(frozen=True, slots=True)
class TargetCheck:
    name: str
    """``ttft_s.p95``, ``max_failure_rate``, ``min_throughput_requests_per_s``, ``attainment``."""
    limit: float
    measured: float | None
    held: bool | None


@dataclass(frozen=True, slots=True)
class SloCheck:
    checks: tuple[TargetCheck, ...]

    @property
    def held(self) -> bool | None:
        """False if any target missed; None if none missed but one could not be checked."""
        verdicts = [c.held for c in self.checks]
        if False in verdicts:
            return False
        return None if None in verdicts else True


def check_slo(
    objective: ServiceLevelObjective,
    stats: Mapping[str, Mapping[str, float] | None],
    *,
    requests: int,
    failed: int,
    throughput_requests_per_s: float,
) -> SloCheck:
    """The SLO on measured ``stats`` (``{"ttft_s": {"mean": …, "p50": …, …}, …}``, seconds)."""
    checks: list[TargetCheck] = []
    for target in objective.targets:
        values = stats.get(f"{target.metric}_s")
        value = None if values is None else values.get(target.statistic)
        held = None if value is None else value <= target.limit_s
        checks.append(TargetCheck(target.name, target.limit_s, value, held))
    rate = failed / requests if requests > 0 else None
    checks.append(
        TargetCheck(
            "max_failure_rate",
            objective.max_failure_rate,
            rate,
            None if rate is None else rate <= objective.max_failure_rate,
        )
    )
    floor = objective.min_throughput_requests_per_s
    if floor is not None:
        checks.append(
            TargetCheck(
                "min_throughput_requests_per_s",
                floor,
                throughput_requests_per_s,
                throughput_requests_per_s >= floor,
            )
        )
    if objective.attainment is not None:
        checks.append(TargetCheck("attainment", objective.attainment.goal, None, None))
    return SloCheck(tuple(checks))
