"""Service-level objectives: percentile targets, failure budget, throughput floor, attainment.

An SLO (docs/modeling.md §4.4) is a set of targets that all must hold:

* percentile or mean targets on TTFT, ITL, TPOT and E2E (``LatencyTarget``: p95 TTFT <= 1 s);
* a maximum failure rate: ``(timed out + rejected) / measured`` (failures also stay in every
  latency denominator as ``+inf``);
* optionally a minimum request throughput;
* optionally the DistServe attainment form (Zhong et al., OSDI 2024, §2): at least ``goal`` of
  the requests meet the given TTFT/TPOT/E2E limits *jointly*.

Goodput counts the requests that meet every per-request limit; :meth:`request_slo` gives those
limits (the tightest TTFT, TPOT and E2E limit among the targets and the attainment form).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from servesize.core.simulation import SLO

Metric = Literal["ttft", "itl", "tpot", "e2e"]
Statistic = Literal["mean", "p50", "p90", "p95", "p99"]
METRICS: tuple[Metric, ...] = get_args(Metric)
STATISTICS: tuple[Statistic, ...] = get_args(Statistic)


def _positive_finite(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyTarget:
    """``statistic(metric) <= limit_s``, e.g. p95 TTFT <= 1.0 s.

    >>> LatencyTarget(metric="ttft", statistic="p95", limit_s=1.0).name
    'ttft_s.p95'
    """

    metric: Metric
    statistic: Statistic
    limit_s: float

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if self.statistic not in STATISTICS:
            raise ValueError(
                f"statistic must be one of {', '.join(STATISTICS)}, got {self.statistic!r}"
            )
        _positive_finite("limit_s", self.limit_s)

    @property
    def name(self) -> str:
        """``"<metric>_s.<statistic>"``, also the check's name."""
        return f"{self.metric}_s.{self.statistic}"


@dataclass(frozen=True, slots=True, kw_only=True)
class AttainmentTarget:
    """DistServe goodput form: at least ``goal`` of the requests meet every given limit jointly.

    TPOT applies only to requests with at least two output tokens (as in ``SLO``).
    """

    goal: float
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.goal) and 0.0 < self.goal <= 1.0):
            raise ValueError(f"goal must be in (0, 1], got {self.goal}")
        limits = {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s}
        if all(v is None for v in limits.values()):
            raise ValueError("ttft_s, tpot_s or e2e_s: an attainment target needs a limit")
        for name, value in limits.items():
            if value is not None:
                _positive_finite(name, value)

    def request_slo(self) -> SLO:
        """The attainment's own per-request limits."""
        return SLO(ttft_s=self.ttft_s, tpot_s=self.tpot_s, e2e_s=self.e2e_s)


def _tightest(*values: float | None) -> float | None:
    given = [v for v in values if v is not None]
    return min(given) if given else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceLevelObjective:
    """Every target must hold. At least one latency target, throughput floor or attainment
    target is required (a failure budget alone says nothing about latency)."""

    targets: tuple[LatencyTarget, ...] = ()
    max_failure_rate: float = 0.0
    """``(timed out + rejected + failed) / measured`` must not exceed this."""
    min_throughput_requests_per_s: float | None = None
    attainment: AttainmentTarget | None = None

    def __post_init__(self) -> None:
        if (
            not self.targets
            and self.attainment is None
            and (self.min_throughput_requests_per_s is None)
        ):
            raise ValueError(
                "targets: an SLO needs at least one latency target, a minimum throughput or "
                "an attainment target"
            )
        seen: set[str] = set()
        for target in self.targets:
            if target.name in seen:
                raise ValueError(f"targets: {target.name} is given twice")
            seen.add(target.name)
        if not (math.isfinite(self.max_failure_rate) and 0.0 <= self.max_failure_rate < 1.0):
            raise ValueError(f"max_failure_rate must be in [0, 1), got {self.max_failure_rate}")
        if self.min_throughput_requests_per_s is not None:
            _positive_finite("min_throughput_requests_per_s", self.min_throughput_requests_per_s)

    def limit_s(self, metric: Metric) -> float | None:
        """The tightest limit on ``metric`` among the latency targets (any statistic)."""
        return _tightest(*(t.limit_s for t in self.targets if t.metric == metric))

    def request_slo(self) -> SLO | None:
        """Per-request limits for goodput: the tightest TTFT, TPOT and E2E limit among the
        targets and the attainment form (``None`` when there is none; ITL is per token, not per
        request, and does not enter)."""
        a = self.attainment
        ttft = _tightest(self.limit_s("ttft"), a.ttft_s if a else None)
        tpot = _tightest(self.limit_s("tpot"), a.tpot_s if a else None)
        e2e = _tightest(self.limit_s("e2e"), a.e2e_s if a else None)
        if ttft is None and tpot is None and e2e is None:
            return None
        return SLO(ttft_s=ttft, tpot_s=tpot, e2e_s=e2e)
