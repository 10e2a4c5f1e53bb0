"""Token-length distributions for prompts and outputs.

Every distribution samples integer token counts ``>= 1`` with an explicit
``np.random.Generator`` (the caller owns the seed) and reports its exact mean, so tests and the
analytic tier can use the same object.

=======================  ==================================================================
``FixedLength``          always ``tokens``
``UniformLength``        integers uniform on ``[low_tokens, high_tokens]``
``NormalLength``         ``round(N(mean, std))`` clipped to ``[min_tokens, max_tokens]``
``LogNormalLength``      ``round(LogNormal)`` with a given mean and CV, clipped
``HistogramLength``      a bin by its count, then an integer uniform within the bin
``GeometricLength``      ``P(n) = p (1 - p)^(n - 1)``, ``n >= 1``, ``p = 1 / mean``
=======================  ==================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class LengthDistribution(Protocol):
    """A distribution of token counts (integers ``>= 1``)."""

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``size`` token counts as an ``int64`` array."""
        ...

    @property
    def mean_tokens(self) -> float:
        """Exact mean of the (clipped, rounded) distribution, or a close numerical value."""
        ...


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _check_size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
        raise ValueError(f"size must be an integer >= 0, got {size!r}")
    return int(size)


@dataclass(frozen=True, slots=True)
class FixedLength:
    """Every request has exactly ``tokens`` tokens."""

    tokens: int

    def __post_init__(self) -> None:
        _positive_int("tokens", self.tokens)

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` copies of ``tokens`` (the generator is not advanced)."""
        return np.full(_check_size(size), self.tokens, dtype=np.int64)

    @property
    def mean_tokens(self) -> float:
        """``tokens``."""
        return float(self.tokens)


@dataclass(frozen=True, slots=True)
class UniformLength:
    """Integers uniform on ``[low_tokens, high_tokens]`` (both ends included)."""

    low_tokens: int
    high_tokens: int

    def __post_init__(self) -> None:
        _positive_int("low_tokens", self.low_tokens)
        _positive_int("high_tokens", self.high_tokens)
        if self.high_tokens < self.low_tokens:
            raise ValueError(
                f"high_tokens ({self.high_tokens}) must be >= low_tokens ({self.low_tokens})"
            )

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Uniform integers via ``rng.integers(low, high, endpoint=True)``."""
        return rng.integers(
            self.low_tokens, self.high_tokens, size=_check_size(size), endpoint=True
        ).astype(np.int64)

    @property
    def mean_tokens(self) -> float:
        """``(low + high) / 2``."""
        return (self.low_tokens + self.high_tokens) / 2.0


def _clipped_round(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.asarray(np.clip(np.rint(values), lo, hi), dtype=np.int64)


def _check_bounds(min_tokens: int, max_tokens: int) -> None:
    _positive_int("min_tokens", min_tokens)
    _positive_int("max_tokens", max_tokens)
    if max_tokens < min_tokens:
        raise ValueError(f"max_tokens ({max_tokens}) < min_tokens ({min_tokens})")


def _clipped_rounded_mean(
    cdf: Callable[[np.ndarray], np.ndarray], lo: int, hi: int, *, first: int, last: int
) -> float:
    """``E[clip(round(X), lo, hi)]`` summed over ``k = first..last`` (``lo <= first``,
    ``last <= hi``); mass outside ``[first, last]`` is folded onto the nearer bound, which is
    exact when ``first = lo`` and ``last = hi`` and otherwise off by ``P(X ∉ window) * hi``."""
    support = np.arange(first, last + 1, dtype=np.float64)
    upper = cdf(support + 0.5)
    lower = cdf(support - 0.5)
    prob = upper - lower
    below = float(cdf(np.array([first - 0.5]))[0])
    above = 1.0 - float(upper[-1])
    return float(np.dot(prob, support)) + below * lo + above * hi


@dataclass(frozen=True, slots=True, kw_only=True)
class NormalLength:
    """``round(X)``, ``X ~ N(mean_unclipped_tokens, std_tokens²)``, clipped to
    ``[min_tokens, max_tokens]``.

    Clipping moves probability mass onto the bounds, so :attr:`mean_tokens` is the mean of the
    clipped, rounded variable, not ``mean_unclipped_tokens``.
    """

    mean_unclipped_tokens: float
    std_tokens: float
    min_tokens: int = 1
    max_tokens: int = 1_000_000

    def __post_init__(self) -> None:
        if not math.isfinite(self.mean_unclipped_tokens):
            raise ValueError(
                f"mean_unclipped_tokens must be finite, got {self.mean_unclipped_tokens}"
            )
        if not (math.isfinite(self.std_tokens) and self.std_tokens >= 0):
            raise ValueError(f"std_tokens must be finite and >= 0, got {self.std_tokens}")
        _check_bounds(self.min_tokens, self.max_tokens)

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Normal draws, rounded half to even and clipped."""
        raw = rng.normal(self.mean_unclipped_tokens, self.std_tokens, size=_check_size(size))
        return _clipped_round(raw, self.min_tokens, self.max_tokens)

    @property
    def mean_tokens(self) -> float:
        """Mean of the clipped, rounded variable (sum over ``μ ± 40 σ``)."""
        m, s = self.mean_unclipped_tokens, self.std_tokens
        lo, hi = self.min_tokens, self.max_tokens
        if s == 0:
            return float(np.clip(np.rint(m), lo, hi))
        from scipy.stats import norm

        first = int(min(max(lo, math.floor(m - 40 * s)), hi))
        last = int(max(min(hi, math.ceil(m + 40 * s)), first))
        return _clipped_rounded_mean(
            lambda x: np.asarray(norm.cdf(x, m, s)), lo, hi, first=first, last=last
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LogNormalLength:
    """``round(X)`` with ``X`` log-normal of mean ``mean_unclipped_tokens`` and coefficient of
    variation ``cv``, clipped to ``[min_tokens, max_tokens]``.

    Notes
    -----
    ``σ² = ln(1 + cv²)`` and ``μ = ln(mean) - σ²/2`` give ``E[X] = mean`` and
    ``sd(X) / E[X] = cv`` before rounding and clipping.
    """

    mean_unclipped_tokens: float
    cv: float
    min_tokens: int = 1
    max_tokens: int = 1_000_000

    def __post_init__(self) -> None:
        m = self.mean_unclipped_tokens
        if not (math.isfinite(m) and m > 0):
            raise ValueError(f"mean_unclipped_tokens must be finite and > 0, got {m}")
        if not (math.isfinite(self.cv) and self.cv >= 0):
            raise ValueError(f"cv must be finite and >= 0, got {self.cv}")
        _check_bounds(self.min_tokens, self.max_tokens)

    @property
    def sigma(self) -> float:
        """Shape ``σ = sqrt(ln(1 + cv²))`` of the underlying normal."""
        return math.sqrt(math.log1p(self.cv * self.cv))

    @property
    def mu(self) -> float:
        """Location ``μ = ln(mean) - σ²/2`` of the underlying normal."""
        return math.log(self.mean_unclipped_tokens) - 0.5 * self.sigma**2

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Log-normal draws, rounded and clipped."""
        raw = rng.lognormal(self.mu, self.sigma, size=_check_size(size))
        return _clipped_round(raw, self.min_tokens, self.max_tokens)

    @property
    def mean_tokens(self) -> float:
        """Mean of the clipped, rounded variable (sum up to the ``1 - 1e-13`` quantile)."""
        lo, hi = self.min_tokens, self.max_tokens
        if self.cv == 0:
            return float(np.clip(np.rint(self.mean_unclipped_tokens), lo, hi))
        from scipy.stats import lognorm

        dist = lognorm(s=self.sigma, scale=math.exp(self.mu))
        last = int(max(min(hi, math.ceil(float(dist.isf(1e-13)))), lo))
        return _clipped_rounded_mean(lambda x: np.asarray(dist.cdf(x)), lo, hi, first=lo, last=last)


@dataclass(frozen=True, slots=True, kw_only=True)
class HistogramLength:
    """An empirical histogram: pick bin ``k`` with probability ``counts[k] / Σ counts``, then an
    integer uniformly in ``[bin_edges_tokens[k], bin_edges_tokens[k + 1])``.

    Unit-width bins (``edges = values ∪ {max + 1}``) reproduce a list of observed lengths with
    their frequencies exactly.
    """

    bin_edges_tokens: tuple[int, ...]
    counts: tuple[float, ...]

    def __post_init__(self) -> None:
        edges = np.asarray(self.bin_edges_tokens, dtype=np.int64)
        counts = np.asarray(self.counts, dtype=np.float64)
        if edges.ndim != 1 or edges.size < 2:
            raise ValueError("bin_edges_tokens needs at least two edges")
        if counts.shape != (edges.size - 1,):
            raise ValueError(
                f"counts needs {edges.size - 1} entries (one per bin), got {counts.size}"
            )
        if edges[0] < 1 or np.any(np.diff(edges) < 1):
            raise ValueError("bin_edges_tokens must start at >= 1 and increase strictly")
        if np.any(counts < 0) or not np.all(np.isfinite(counts)) or counts.sum() <= 0:
            raise ValueError("counts must be finite, >= 0, with a positive total")

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Bin by weight, then uniform within the bin."""
        size = _check_size(size)
        edges = np.asarray(self.bin_edges_tokens, dtype=np.int64)
        counts = np.asarray(self.counts, dtype=np.float64)
        bins = rng.choice(counts.size, size=size, p=counts / counts.sum())
        lo, hi = edges[bins], edges[bins + 1]
        return (lo + np.floor(rng.random(size) * (hi - lo))).astype(np.int64)

    @classmethod
    def from_values(
        cls, tokens: Sequence[int], weights: Sequence[float] | None = None
    ) -> HistogramLength:
        """Observed lengths ``tokens`` with relative frequencies ``weights`` (default equal):
        unit-width bins at each distinct value, zero-count bins over the gaps, so a draw is
        ``tokens[k]`` with probability ``weights[k] / Σ weights`` (repeated values add up).

        Examples
        --------
        >>> h = HistogramLength.from_values([100, 300], [3.0, 1.0])
        >>> h.bin_edges_tokens, h.counts, h.mean_tokens
        ((100, 101, 300, 301), (3.0, 0.0, 1.0), 150.0)
        """
        values = np.asarray(tokens)
        w = np.ones(values.size) if weights is None else np.asarray(weights, dtype=np.float64)
        if values.ndim != 1 or values.size == 0 or w.shape != values.shape:
            raise ValueError("tokens must be non-empty and weights must match it in length")
        if not np.issubdtype(values.dtype, np.integer):
            raise ValueError("tokens must be integers")
        distinct, where = np.unique(values.astype(np.int64), return_inverse=True)
        summed = np.bincount(where, weights=w, minlength=distinct.size)
        edges: list[int] = [int(distinct[0])]
        counts: list[float] = []
        for value, count in zip(distinct.tolist(), summed.tolist(), strict=True):
            if edges[-1] != value:
                edges.append(value)
                counts.append(0.0)
            edges.append(value + 1)
            counts.append(float(count))
        return cls(bin_edges_tokens=tuple(edges), counts=tuple(counts))

    @property
    def mean_tokens(self) -> float:
        """``Σ_k w_k (lo_k + hi_k - 1) / 2``."""
        edges = np.asarray(self.bin_edges_tokens, dtype=np.float64)
        counts = np.asarray(self.counts, dtype=np.float64)
        mids = (edges[:-1] + edges[1:] - 1.0) / 2.0
        return float(np.dot(counts / counts.sum(), mids))


@dataclass(frozen=True, slots=True)
class GeometricLength:
    """``P(n) = p (1 - p)^(n - 1)`` on ``n = 1, 2, ...`` with ``p = 1 / mean_tokens``.

    The discrete analogue of an exponential: with a constant step time ``τ`` an output of
    geometric length is a service time ``S = n τ`` with ``E[S²] = τ² (2 - p) / p²``.
    """

    mean_tokens: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean_tokens) and self.mean_tokens >= 1.0):
            raise ValueError(f"mean_tokens must be finite and >= 1, got {self.mean_tokens}")

    @property
    def success_probability(self) -> float:
        """``p = 1 / mean``."""
        return 1.0 / self.mean_tokens

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``rng.geometric(p)``."""
        return rng.geometric(self.success_probability, size=_check_size(size)).astype(np.int64)

    @property
    def second_moment_tokens2(self) -> float:
        """``E[n²] = (2 - p) / p²``."""
        p = self.success_probability
        return (2.0 - p) / (p * p)
