"""TTFT under Poisson arrivals when each step prefills every prompt that arrived during the
previous one (the open-loop Tier A percentile model when the token budget holds several prompts).

A step that carries ``k`` prompts (and the steady decode batch) lasts ``T_k``; the prompts
that arrive meanwhile, ``A ~ Poisson(λ·T_k)``, are all prefilled in the next step, which carries
``min(A, K)`` of them (``K``: the prompts the budget holds; more are counted as ``K``). The
number of prompts per step is then a Markov chain whose stationary law ``π`` is solved exactly.
A request arrives in a step of ``k`` prompts with the length-biased probability
``w_k = π_k·T_k / Σ π·T``, waits a uniform part ``U·T_k`` of it, then the whole next step, which
carries it and the ``j ~ Poisson(λ·T_k)`` other arrivals of that step:

    TTFT = Z + U·T_k + T_{min(1 + j, K)}

with ``Z`` the request overhead. Long steps beget long steps (more arrivals, more prompts), which
is what makes the tail heavier than a FIFO queue of prompts predicts. For ``T_k = d + s·k`` (no
cap) the chain has closed forms (:func:`linear_chain_mean_ttft_s`), used to check the solver.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = [
    "BatchChain",
    "batch_chain",
    "linear_chain_mean_ttft_s",
]

BISECTIONS = 60


class BatchChain:
    """The stationary chain at each of ``P`` operating points (arrays of leading size ``P``)."""

    def __init__(
        self, step_s: np.ndarray, weight: np.ndarray, others: np.ndarray, cap: np.ndarray
    ) -> None:
        self.step_s = step_s
        """``T_k``, shape ``(P, K + 1)``."""
        self.weight = weight
        """Length-biased ``w_k``, shape ``(P, K + 1)``."""
        self.others = others
        """``P(j others | k)``, shape ``(P, K + 1, K + 1)``; column ``cap`` holds ``j >= cap``."""
        self.cap = cap
        """Most prompts one step holds, shape ``(P,)``."""
        nxt = np.minimum(np.arange(step_s.shape[1])[None, :] + 1, cap[:, None])
        self.next_step_s = np.take_along_axis(step_s, nxt, axis=1)
        """``T_{min(1 + j, cap)}``, shape ``(P, K + 1)``."""

    def take(self, index: np.ndarray) -> BatchChain:
        return BatchChain(
            self.step_s[index], self.weight[index], self.others[index], self.cap[index]
        )

    def mean_s(self) -> np.ndarray:
        """``E[U·T_k + T_next]`` at each point (without the request overhead)."""
        after = np.einsum("pkj,pj->pk", self.others, self.next_step_s)
        return np.asarray(np.sum(self.weight * (0.5 * self.step_s + after), axis=1))

    def cdf(self, t_s: np.ndarray) -> np.ndarray:
        """``P(U·T_k + T_next <= t)`` at each point (``t_s`` of shape ``(P,)``)."""
        t = np.asarray(t_s, dtype=np.float64)[:, None, None]
        room = t - self.next_step_s[:, None, :]
        step = self.step_s[:, :, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            inside = np.where(step > 0, np.clip(room / step, 0.0, 1.0), (room >= 0) * 1.0)
        return np.asarray(np.einsum("pk,pkj,pkj->p", self.weight, self.others, inside))

    def quantile_s(self, q: float) -> np.ndarray:
        """The ``q``-quantile of ``U·T_k + T_next`` by bisection on :meth:`cdf`."""
        low = np.zeros(self.step_s.shape[0])
        high = 2.0 * np.max(self.step_s, axis=1) + 1e-12
        for _ in range(BISECTIONS):
            mid = 0.5 * (low + high)
            below = self.cdf(mid) < q
            low = np.where(below, mid, low)
            high = np.where(below, high, mid)
        return np.asarray(high)


def arrivals_pmf(j: np.ndarray, mean: np.ndarray, arrival_cv: float = 1.0) -> np.ndarray:
    """``P(j arrivals)`` in an interval that expects ``mean`` of them: Poisson for Poisson
    arrivals (``arrival_cv ≤ 1``), else negative binomial with the variance ``c²·mean`` of a
    renewal process of squared gap CV ``c²`` over a long interval (Cox & Lewis 1966, the
    asymptotic index of dispersion of a renewal count equals ``c²``): ``n = mean/(c² − 1)``,
    ``p = 1/c²``.

    >>> float(arrivals_pmf(np.array([0]), np.array([1.0]))[0])  # e^-1
    0.36787944117144233
    >>> round(float(arrivals_pmf(np.array([0]), np.array([1.0]), 2.0)[0]), 6)  # (1/4)^(1/3)
    0.629961
    """
    c2 = arrival_cv * arrival_cv
    if c2 <= 1.0:
        return np.asarray(stats.poisson.pmf(j, mean), dtype=np.float64)
    size = np.maximum(mean / (c2 - 1.0), 1e-300)
    return np.asarray(stats.nbinom.pmf(j, size, 1.0 / c2), dtype=np.float64)


def batch_chain(
    step_s: np.ndarray,
    rate_per_s: np.ndarray,
    cap: np.ndarray | None = None,
    arrival_cv: float = 1.0,
) -> BatchChain:
    """The stationary chain for step durations ``step_s`` (``(P, K + 1)``: ``T_0..T_K``) and
    arrival rates ``rate_per_s`` (``(P,)``); ``cap`` (``(P,)``, at most ``K``) is the most
    prompts a step holds at each point (``K`` when omitted); ``arrival_cv`` the CV of the gaps
    between arrivals (:func:`arrivals_pmf`; 1 is Poisson)."""
    step = np.asarray(step_s, dtype=np.float64)
    rate = np.asarray(rate_per_s, dtype=np.float64)
    points, size = step.shape
    limit = np.full(points, size - 1) if cap is None else np.asarray(cap, dtype=np.int64)
    j = np.arange(size)
    others = arrivals_pmf(j[None, None, :], rate[:, None, None] * step[:, :, None], arrival_cv)
    # Arrivals beyond the cap still ride in a full step: fold their mass into j = cap.
    beyond = j[None, None, :] > limit[:, None, None]
    folded = np.clip(1.0 - np.sum(np.where(beyond, 0.0, others), axis=2), 0.0, 1.0)
    others = np.where(beyond, 0.0, others)
    np.put_along_axis(
        others,
        np.broadcast_to(limit[:, None, None], (points, size, 1)),
        np.take_along_axis(others, np.broadcast_to(limit[:, None, None], (points, size, 1)), 2)
        + folded[:, :, None],
        axis=2,
    )
    # π = π·M with Σπ = 1: (Mᵀ − I)·π = 0, last equation replaced by the normalisation.
    system = np.transpose(others, (0, 2, 1)) - np.eye(size)[None, :, :]
    system[:, -1, :] = 1.0
    rhs = np.zeros((points, size))
    rhs[:, -1] = 1.0
    pi = np.clip(np.linalg.solve(system, rhs[:, :, None])[:, :, 0], 0.0, None)
    busy_time = pi * step
    total = np.sum(busy_time, axis=1, keepdims=True)
    weight = np.where(total > 0, busy_time / np.where(total > 0, total, 1.0), pi)
    return BatchChain(step, weight, others, limit)


def linear_chain_mean_ttft_s(decode_s: float, prefill_s: float, rate_per_s: float) -> float:
    """Mean of ``U·T + T_next`` for ``T_k = d + s·k`` without a cap: the step law has mean
    ``m = d / (1 − λs)`` and variance ``v = s²λm / (1 − λ²s²)``; the length-biased step has
    mean ``E[T*] = m + v/m``, so ``E = E[T*]/2 + d + s + s·λ·E[T*]``.

    >>> round(linear_chain_mean_ttft_s(0.01, 0.02, 10.0), 6)  # m = 0.0125, v = 5.208e-5
    0.041667
    """
    d, s, lam = decode_s, prefill_s, rate_per_s
    m = d / (1.0 - lam * s)
    v = s * s * lam * m / (1.0 - lam * lam * s * s)
    biased = m + v / m
    return biased / 2.0 + d + s + s * lam * biased
