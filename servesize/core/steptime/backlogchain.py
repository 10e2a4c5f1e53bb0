"""TTFT under bursty arrivals: the batch chain with a backlog (docs/modeling.md §2.8).

The batch chain (:mod:`servesize.core.steptime.batchchain`) lets every prompt that arrives
during a step ride in the next one, folding arrivals beyond the ``K`` prompts a step holds into
a full step. Under Poisson arrivals at the loads Tier A is trusted at, that overflow is rare.
Bursty arrivals (gamma gaps with a CV above 1, what ``/v1/simulate``'s ``process="gamma"``
draws) overflow often, and the prompts beyond ``K`` wait for the steps after. Here the state is
the number ``Q`` of prompts waiting when a step starts (prefill-first within the budget, FCFS,
as every engine's scheduler admits): the step carries ``k = min(Q, K)`` prompts, lasts ``T_k``,
and ``A`` prompts arrive meanwhile (:func:`~servesize.core.steptime.batchchain.arrivals_pmf`),
so ``Q' = Q − k + A`` (truncated at :data:`BACKLOG_STEPS`·``K`` waiting prompts). The
stationary law ``π`` is solved exactly.

A request arrives in a step of state ``Q`` with the length-biased probability
``∝ π_Q·T_{k(Q)}``, a uniform part ``U·T_{k(Q)}`` before its end, among ``j`` other arrivals of
that step (about half of them ahead of it), ``j`` drawn from the arrival-biased (Palm) count of
the step, which under bursty arrivals exceeds the stationary one. With ``r = Q − k`` left
over, it is ``m = r + ⌊j/2⌋ + 1``-th in the queue at the next step, waits ``s = ⌈m/K⌉ − 1``
full steps ``T_K`` and is
prefilled in a step of ``min(K, r + j + 1 − s·K)`` prompts (full when ``s ≥ 1``: arrivals
during the full steps fill it):

    TTFT = Z + U·T_{k(Q)} + s·T_K + T_own

a mixture of uniforms, whose mean, CDF and quantiles are exact for the mixture. Approximations:
``j`` is drawn independently of ``U`` and the tagged request sits at the mean position among
them.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from servesize.core.steptime.batchchain import arrivals_pmf

__all__ = ["BACKLOG_STEPS", "BacklogChain", "backlog_chain"]

BACKLOG_STEPS = 12
"""Waiting prompts are counted up to this many full steps (``12·K``); more fold into the last
state."""
_MAX_STATES = 200
BISECTIONS = 60


class BacklogChain:
    """TTFT (without the request overhead) as a mixture of ``U·a + b`` components per point."""

    def __init__(self, weight: np.ndarray, span_s: np.ndarray, offset_s: np.ndarray) -> None:
        self.weight = weight
        """Component weights, shape ``(P, C)``, each row summing to 1."""
        self.span_s = span_s
        """Uniform part ``a`` (the step of arrival)."""
        self.offset_s = offset_s
        """Fixed part ``b`` (full steps waited and the request's own step)."""

    def take(self, index: np.ndarray) -> BacklogChain:
        return BacklogChain(self.weight[index], self.span_s[index], self.offset_s[index])

    def mean_s(self) -> np.ndarray:
        """``E[U·a + b]`` at each point."""
        return np.asarray(np.sum(self.weight * (0.5 * self.span_s + self.offset_s), axis=1))

    def cdf(self, t_s: np.ndarray) -> np.ndarray:
        """``P(U·a + b <= t)`` at each point (``t_s`` of shape ``(P,)``)."""
        t = np.asarray(t_s, dtype=np.float64)[:, None]
        room = t - self.offset_s
        with np.errstate(divide="ignore", invalid="ignore"):
            inside = np.where(
                self.span_s > 0, np.clip(room / self.span_s, 0.0, 1.0), (room >= 0) * 1.0
            )
        return np.asarray(np.sum(self.weight * inside, axis=1))

    def quantile_s(self, q: float) -> np.ndarray:
        """The ``q``-quantile by bisection on :meth:`cdf`."""
        low = np.zeros(self.weight.shape[0])
        high = np.max(self.span_s + self.offset_s, axis=1) + 1e-12
        for _ in range(BISECTIONS):
            mid = 0.5 * (low + high)
            below = self.cdf(mid) < q
            low = np.where(below, mid, low)
            high = np.where(below, high, mid)
        return np.asarray(high)


def _others_seen_by_an_arrival(
    mean: np.ndarray, counts: np.ndarray, arrival_cv: float
) -> np.ndarray:
    """Law of the number ``j`` of *other* arrivals in the step a tagged request arrives in.

    Seen from an arrival (the Palm distribution of the process), the gaps before and after it
    are iid gamma of shape ``κ = 1/c²`` and mean ``1/λ`` (a stationary renewal process is
    reversible), so the arrivals within ``τ`` after it number ``N`` with
    ``P(N ≥ n) = P(Γ(n·κ, 1) ≤ λ·τ·κ)`` (the regularised incomplete gamma function), and as many
    independently before it. At the tagged request's mean position in a step of ``T`` that
    expects ``m = λ·T`` arrivals, ``j = N_before(T/2) + N_after(T/2)``. Poisson (``κ = 1``) gives
    back ``Poisson(m)``; gamma gaps of CV 2 put a burst's requests in one step
    (``E[j] → m + c² − 1`` for long steps). Cox, *Renewal Theory* (1962), §7.2, and
    Daley & Vere-Jones, *An Introduction to the Theory of Point Processes* (2003), §3.4.
    """
    shape = 1.0 / max(arrival_cv * arrival_cv, 1e-12)
    half = np.asarray(mean, dtype=np.float64)[..., None] * 0.5  # λ·T/2, (P, S, 1)
    size = int(np.asarray(counts).size)
    orders = np.arange(1, size + 1, dtype=np.float64) * shape
    at_least = np.ones((*half.shape[:-1], size + 1))  # P(N >= n), n = 0..size
    at_least[..., 1:] = special.gammainc(orders[None, None, :], half * shape)
    one_side = np.clip(at_least[..., :-1] - at_least[..., 1:], 0.0, 1.0)  # P(N = n), (P, S, A)
    spectrum = np.fft.rfft(one_side, n=2 * size, axis=-1)
    both = np.fft.irfft(spectrum * spectrum, n=2 * size, axis=-1)[..., :size]
    both = np.clip(both, 0.0, None)
    both[..., -1] += np.clip(1.0 - both.sum(axis=-1), 0.0, 1.0)  # the tail rides in the last
    return np.asarray(both)


def backlog_chain(
    step_s: np.ndarray, rate_per_s: np.ndarray, cap: int, arrival_cv: float = 1.0
) -> BacklogChain:
    """The chain for step durations ``step_s`` (``(P, cap + 1)``: ``T_0..T_K``), arrival rates
    ``rate_per_s`` (``(P,)``) and gap CV ``arrival_cv`` (module docstring)."""
    step = np.asarray(step_s, dtype=np.float64)[:, : cap + 1]
    rate = np.asarray(rate_per_s, dtype=np.float64)
    points = step.shape[0]
    k_cap = int(cap)
    size = min(k_cap * (BACKLOG_STEPS + 1), _MAX_STATES) + 1
    q = np.arange(size)
    k = np.minimum(q, k_cap)
    t_q = step[:, k]  # (P, S): the step a state runs
    a = np.arange(size)
    pmf = arrivals_pmf(a[None, None, :], rate[:, None, None] * t_q[:, :, None], arrival_cv)
    pmf[:, :, -1] += np.clip(1.0 - pmf.sum(axis=2), 0.0, 1.0)  # the tail rides in the last
    nxt = np.minimum(q[:, None] - k[:, None] + a[None, :], size - 1)  # (S, A)
    trans = np.zeros((points, size, size))
    for s in range(size):
        # Arrival counts that overflow the last state all land on it: accumulate by column.
        for col in np.unique(nxt[s]).tolist():
            trans[:, s, col] = pmf[:, s, nxt[s] == col].sum(axis=1)
    system = np.transpose(trans, (0, 2, 1)) - np.eye(size)[None, :, :]
    system[:, -1, :] = 1.0
    rhs = np.zeros((points, size, 1))
    rhs[:, -1, 0] = 1.0
    pi = np.clip(np.linalg.solve(system, rhs)[:, :, 0], 0.0, None)
    busy = pi * t_q
    total = np.sum(busy, axis=1, keepdims=True)
    biased = np.where(total > 0, busy / np.where(total > 0, total, 1.0), pi)
    # Components (Q, j): arrival in a step of state Q among j other arrivals.
    left = (q - k)[:, None]  # r, (S, 1)
    j = a[None, :]  # (1, A)
    position = left + j // 2 + 1
    ahead = np.ceil(position / k_cap).astype(np.int64) - 1
    own = np.where(ahead > 0, k_cap, np.minimum(k_cap, left + j + 1 - ahead * k_cap))
    own = np.clip(own, 1, k_cap)
    full = step[:, k_cap][:, None, None]
    offset = ahead[None, :, :] * full + step[:, own]  # (P, S, A)
    span = np.broadcast_to(t_q[:, :, None], offset.shape)
    others = (
        pmf if arrival_cv <= 1.0 else _others_seen_by_an_arrival(rate[:, None] * t_q, a, arrival_cv)
    )
    weight = biased[:, :, None] * others
    weight = weight / np.maximum(weight.sum(axis=(1, 2), keepdims=True), 1e-300)
    flat = (points, size * size)
    return BacklogChain(
        weight.reshape(flat), np.ascontiguousarray(span).reshape(flat), offset.reshape(flat)
    )
