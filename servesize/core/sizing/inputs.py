"""The inputs of one sizing: the traffic forecast and everything the per-candidate steps read.

:class:`SizingInputs` is built once by :func:`~servesize.core.sizing.search.size` and never
changes; the steps that screen and verify candidates take it and return their results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from servesize.core.architecture import Architecture
from servesize.core.energy import PowerProfile
from servesize.core.hardware import HardwareSpec
from servesize.core.slo.spec import ServiceLevelObjective
from servesize.core.steptime import MeasuredProfile
from servesize.core.traffic import (
    ArrivalProcess,
    FixedLength,
    HistogramLength,
    LengthDistribution,
    LogNormalLength,
    NormalLength,
    PrefixTraffic,
    SessionTraffic,
    UniformLength,
    session_means,
)

__all__ = ["DEFAULT_HEADROOM", "SizingInputs", "SizingTraffic"]

DEFAULT_HEADROOM = 0.85


@dataclass(frozen=True, slots=True, kw_only=True)
class SizingTraffic:
    """The forecast: open-loop arrivals at ``rate_per_s`` with these lengths."""

    rate_per_s: float
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    process: ArrivalProcess = "poisson"
    cv: float = 1.0
    timeout_s: float = math.inf
    seed: int = 0
    longest_request_tokens: int | None = None
    """Prompt + output tokens of the longest request a plan's ``max_model_len`` must hold;
    ``None``: the largest prompt plus the largest output the distributions draw."""
    prefix: PrefixTraffic | None = None
    """Prompt heads the requests share (docs/modeling.md §3.14): a prefix cache skips their
    prefill in both tiers."""
    sessions: SessionTraffic | None = None
    """Multi-turn sessions (§3.16) this forecast stands for (:meth:`of_sessions`): Tier A
    screens their per-request means, verification simulates the sessions themselves."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_per_s) and self.rate_per_s > 0):
            raise ValueError(f"rate_per_s must be > 0, got {self.rate_per_s}")

    @classmethod
    def of_sessions(
        cls,
        sessions: SessionTraffic,
        *,
        timeout_s: float = math.inf,
        seed: int = 0,
        longest_request_tokens: int | None = None,
    ) -> SizingTraffic:
        """The forecast of ``sessions``: requests at ``λ_sess·E[T]``, prompts of the mean ISL
        ``(ū E[T(T+1)] + ō E[T(T−1)]) / (2 E[T])`` with the history share as a measured hit
        rate, outputs as the sessions' (:func:`~servesize.core.traffic.session_means`)."""
        means = session_means(sessions)
        return cls(
            rate_per_s=means.requests_per_s,
            input_tokens=FixedLength(max(round(means.input_tokens), 1)),
            output_tokens=sessions.output_tokens,
            timeout_s=timeout_s,
            seed=seed,
            longest_request_tokens=longest_request_tokens,
            prefix=PrefixTraffic(cache_hit_rate=min(means.history_share, 1.0))
            if means.history_tokens > 0
            else None,
            sessions=sessions,
        )

    @property
    def longest_tokens(self) -> int | None:
        """:attr:`longest_request_tokens`, or the sum of the distributions' largest draws
        (``None`` for an unbounded one, e.g. geometric)."""
        if self.longest_request_tokens is not None:
            return self.longest_request_tokens
        a, b = _largest_draw(self.input_tokens), _largest_draw(self.output_tokens)
        return a + b if a is not None and b is not None else None


def _largest_draw(dist: LengthDistribution) -> int | None:
    if isinstance(dist, FixedLength):
        return dist.tokens
    if isinstance(dist, UniformLength):
        return dist.high_tokens
    if isinstance(dist, NormalLength | LogNormalLength):
        return dist.max_tokens
    if isinstance(dist, HistogramLength):
        return dist.bin_edges_tokens[-1] - 1
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class SizingInputs:
    """One sizing's fixed inputs: the model, the GPUs by id, their measured kernel tables and
    prices, the objective and traffic, and the values derived from them once."""

    arch: Architecture
    hardware: Mapping[str, HardwareSpec]
    measured: Mapping[str, MeasuredProfile]
    prices: Mapping[str, float]
    objective: ServiceLevelObjective
    traffic: SizingTraffic
    target_rate_per_s: float
    """``max(forecast rate, min_throughput_requests_per_s)``."""
    headroom: float
    calibrated: bool
    input_tokens: float
    """Mean prompt tokens."""
    output_tokens: float
    """Mean output tokens."""
    max_gpus: int | None
    power: Mapping[str, PowerProfile] = field(default_factory=dict)
    """Board power by hardware id (the plans' energy; none: no energy figures)."""
