"""Input checks shared by the queueing models; each raises ``ValueError`` naming the bad value."""

from __future__ import annotations

import math
import operator

from servesize.core.errors import UnstableQueueError


def finite_nonnegative(name: str, value: float) -> float:
    """Return ``value`` as a float if it is finite and >= 0."""
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return float(value)


def finite_positive(name: str, value: float) -> float:
    """Return ``value`` as a float if it is finite and > 0."""
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return float(value)


def server_count(value: int) -> int:
    """Return ``value`` as an int if it is an integer >= 1 (bools and floats are refused)."""
    if isinstance(value, bool):
        raise ValueError(f"servers must be an integer >= 1, got {value!r}")
    try:
        servers = operator.index(value)
    except TypeError:
        raise ValueError(f"servers must be an integer >= 1, got {value!r}") from None
    if servers < 1:
        raise ValueError(f"servers must be an integer >= 1, got {value!r}")
    return servers


def probability_level(p: float) -> float:
    """Return ``p`` as a float if it is a fraction in ``[0, 1)`` (0.95 for the 95th percentile)."""
    if not math.isfinite(p) or not 0.0 <= p < 1.0:
        raise ValueError(f"p must be a fraction in [0, 1) (0.95 for p95), got {p!r}")
    return float(p)


def stable_utilization(offered_load: float, servers: int) -> float:
    """Return ``rho = a / c``, raising ``UnstableQueueError`` when ``rho >= 1``."""
    utilization = offered_load / servers
    if utilization >= 1.0:
        raise UnstableQueueError(utilization)
    return utilization
