"""The compact SLO grammar of the command line: ``ttft_p95=1s,tpot_p95=50ms,max_failure_rate=0.01``.

=======================  ==========================================================================
item                     meaning
=======================  ==========================================================================
``<metric>_<stat>=<d>``  ``stat(metric) <= d``; metric ``ttft``, ``itl``, ``tpot`` or ``e2e``, stat
                         ``mean``, ``p50``, ``p90``, ``p95`` or ``p99``; ``d`` a number with a unit
                         ``s``, ``ms`` or ``us`` (``1s``, ``50ms``, ``0.5ms``, ``200us``)
``max_failure_rate=f``   ``(timed out + rejected + failed) / measured <= f``, a plain number in
                         ``[0, 1)``
=======================  ==========================================================================

Items are separated by commas; each key may appear once. Anything else is an error naming the
item and what was expected.
"""

from __future__ import annotations

import math
import re

from servesize.core.slo.spec import METRICS, STATISTICS, LatencyTarget, ServiceLevelObjective

__all__ = ["DURATION_UNITS_S", "parse_duration_s", "parse_slo"]

DURATION_UNITS_S = {"s": 1, "ms": 1000, "us": 1_000_000}
"""Divisor from a duration in each unit to seconds (division keeps ``50ms`` exactly ``0.05``)."""
_DURATION = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<unit>s|ms|us)")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def parse_duration_s(text: str) -> float:
    """Seconds in ``text``, a non-negative decimal number with a unit ``s``, ``ms`` or ``us``.

    >>> parse_duration_s("50ms"), parse_duration_s("1.5s"), parse_duration_s("200us")
    (0.05, 1.5, 0.0002)
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"{text!r} is not a duration: give a number with a unit s, ms or us (e.g. 1s, 50ms)"
        )
    return float(match["number"]) / DURATION_UNITS_S[match["unit"]]


def _failure_rate(text: str) -> float:
    if _NUMBER.fullmatch(text.strip()) is None:
        raise ValueError(f"max_failure_rate: {text!r} is not a number in [0, 1) (e.g. 0.01)")
    rate = float(text)
    if not (math.isfinite(rate) and 0.0 <= rate < 1.0):
        raise ValueError(f"max_failure_rate: {text!r} is not a number in [0, 1) (e.g. 0.01)")
    return rate


def _target(key: str, value: str) -> LatencyTarget:
    metric, sep, stat = key.rpartition("_")
    if not sep or metric not in METRICS:
        raise ValueError(
            f"{key!r}: unknown metric {metric or key!r}; use <metric>_<stat> with metric one of "
            f"{', '.join(METRICS)} (or max_failure_rate)"
        )
    if stat not in STATISTICS:
        raise ValueError(f"{key!r}: unknown statistic {stat!r}; use one of {', '.join(STATISTICS)}")
    limit_s = parse_duration_s(value)
    if limit_s <= 0:
        raise ValueError(f"{key}: the limit must be > 0, got {value!r}")
    return LatencyTarget(metric=metric, statistic=stat, limit_s=limit_s)


def parse_slo(text: str) -> ServiceLevelObjective:
    """The objective written as ``key=value`` items separated by commas (module docstring).

    >>> slo = parse_slo("ttft_p95=1s,tpot_p95=50ms,max_failure_rate=0.01")
    >>> [(t.name, t.limit_s) for t in slo.targets], slo.max_failure_rate
    ([('ttft_s.p95', 1.0), ('tpot_s.p95', 0.05)], 0.01)

    Raises
    ------
    ValueError
        Naming the offending item and what was expected.
    """
    targets: list[LatencyTarget] = []
    failure_rate = 0.0
    seen: set[str] = set()
    items = text.split(",")
    for item in items:
        key, sep, value = (part.strip() for part in item.partition("="))
        if not item.strip():
            raise ValueError(f"{text!r}: empty item; separate key=value items with single commas")
        if not sep or not key or not value:
            raise ValueError(f"{item.strip()!r}: expected key=value (e.g. ttft_p95=1s)")
        if key in seen:
            raise ValueError(f"{key!r} is given twice")
        seen.add(key)
        if key == "max_failure_rate":
            failure_rate = _failure_rate(value)
        else:
            targets.append(_target(key, value))
    if not targets:
        raise ValueError("give at least one latency target (e.g. ttft_p95=1s)")
    return ServiceLevelObjective(targets=tuple(targets), max_failure_rate=failure_rate)
