"""M/M/c: Poisson arrivals, exponential service, ``c`` identical FCFS servers (Erlang C)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import brentq

from servesize.core.queueing._inputs import (
    finite_nonnegative,
    finite_positive,
    probability_level,
    server_count,
    stable_utilization,
)
from servesize.core.queueing.validity import ModelValidity

_ASSUMPTIONS = (
    "Poisson arrivals at a constant rate",
    "i.i.d. exponential service times",
    "c identical servers sharing one unbounded FCFS queue",
    "steady state (utilisation < 1)",
)

# Relative tolerance of the brentq inversion of the sojourn-time distribution (c > 1).
_RESPONSE_PERCENTILE_RTOL = 1e-12


def erlang_b(servers: int, offered_load: float) -> float:
    """Blocking probability of an M/M/c/c loss system (Erlang B).

    Parameters
    ----------
    servers : int
        Number of servers ``c >= 1``.
    offered_load : float
        ``a = λ E[S]`` in Erlangs, finite and >= 0 (any value: a loss system is always stable).

    Returns
    -------
    float
        ``B(c, a) = (a^c / c!) / sum_{k=0..c} a^k / k!``.

    Notes
    -----
    Uses the recurrence ``B(0) = 1``, ``B(k) = a B(k-1) / (k + a B(k-1))``: every step is a
    ratio in [0, 1], so there are no factorials and no overflow for thousands of servers.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Vol. 1: Theory*, Wiley, 1975, ch. 3 (M/M/m/m loss system).

    Examples
    --------
    >>> round(erlang_b(1, 1.0), 6)  # a / (1 + a)
    0.5
    """
    servers = server_count(servers)
    offered_load = finite_nonnegative("offered_load", offered_load)
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered_load * blocking / (k + offered_load * blocking)
    return blocking


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival has to wait in an M/M/c queue (Erlang C).

    Parameters
    ----------
    servers : int
        Number of identical servers ``c >= 1``.
    offered_load : float
        ``a = λ E[S]`` in Erlangs, finite, >= 0 and < ``c``.

    Returns
    -------
    float
        ``C(c, a) = [a^c/c! · c/(c-a)] / [sum_{k<c} a^k/k! + a^c/c! · c/(c-a)]``.

    Raises
    ------
    UnstableQueueError
        If ``a >= c`` (utilisation ``a / c >= 1``).

    Notes
    -----
    Computed from Erlang B as ``C = c B / (c - a (1 - B))``, which avoids factorials.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Vol. 1: Theory*, Wiley, 1975, ch. 3 (M/M/m).

    Examples
    --------
    >>> round(erlang_c(1, 0.5), 6)  # M/M/1: P(wait) = rho
    0.5
    """
    servers = server_count(servers)
    offered_load = finite_nonnegative("offered_load", offered_load)
    stable_utilization(offered_load, servers)
    blocking = erlang_b(servers, offered_load)
    return servers * blocking / (servers - offered_load * (1.0 - blocking))


@dataclass(frozen=True, slots=True, kw_only=True)
class MMcResult:
    """Steady-state figures of an M/M/c queue, with exact tail and percentile helpers.

    Attributes
    ----------
    arrival_rate_per_s, service_time_s : float
        The inputs ``λ`` and ``E[S] = 1/μ``.
    servers : int
        The input ``c``.
    offered_load_erlangs : float
        ``a = λ E[S]``.
    utilization : float
        ``ρ = a / c`` (always < 1 here).
    stable : bool
        Always True: an unstable queue raises ``UnstableQueueError`` instead of a result.
    saturation_rate_per_s : float
        ``c / E[S]``, the arrival rate at which ``ρ`` reaches 1.
    wait_probability : float
        ``P(Wq > 0)``, the Erlang C probability.
    mean_wait_s : float
        ``E[Wq] = C / (cμ - λ)``.
    mean_response_s : float
        ``E[T] = E[Wq] + E[S]``.
    mean_queue_length : float
        ``Lq = λ E[Wq]`` (Little).
    mean_in_system : float
        ``L = λ E[T]`` (Little).
    validity : ModelValidity
        Model, method and assumptions.
    """

    arrival_rate_per_s: float
    service_time_s: float
    servers: int
    offered_load_erlangs: float
    utilization: float
    stable: bool
    saturation_rate_per_s: float
    wait_probability: float
    mean_wait_s: float
    mean_response_s: float
    mean_queue_length: float
    mean_in_system: float
    validity: ModelValidity

    @property
    def _service_rate_per_s(self) -> float:
        return 1.0 / self.service_time_s

    @property
    def _wait_decay_rate_per_s(self) -> float:
        # θ = cμ - λ, written as (c - a) / E[S] so it stays positive whenever a < c.
        return (self.servers - self.offered_load_erlangs) / self.service_time_s

    def wait_exceedance(self, t_s: float) -> float:
        """Exact ``P(Wq > t) = C exp(-(cμ - λ) t)`` for ``t >= 0``.

        Examples
        --------
        >>> q = mmc(arrival_rate_per_s=0.5, service_time_s=1.0, servers=1)
        >>> round(q.wait_exceedance(0.0), 6)  # P(wait) = rho
        0.5
        """
        t_s = finite_nonnegative("t_s", t_s)
        return self.wait_probability * math.exp(-self._wait_decay_rate_per_s * t_s)

    def wait_percentile_s(self, p: float) -> float:
        """Exact ``p``-quantile of the wait (``p`` a fraction: 0.95 for p95).

        ``t_p = ln(C / (1 - p)) / (cμ - λ)`` when ``1 - p < C``, else 0 (the atom at zero).

        Examples
        --------
        >>> q = mmc(arrival_rate_per_s=0.5, service_time_s=1.0, servers=1)
        >>> round(q.wait_percentile_s(0.9), 6)  # ln(0.5 / 0.1) / 0.5
        3.218876
        >>> q.wait_percentile_s(0.5)  # half the arrivals do not wait
        0.0
        """
        p = probability_level(p)
        tail = 1.0 - p
        if tail >= self.wait_probability:
            return 0.0
        return math.log(self.wait_probability / tail) / self._wait_decay_rate_per_s

    def response_exceedance(self, t_s: float) -> float:
        """Exact ``P(T > t)`` for the sojourn time ``T = Wq + S``.

        With ``θ = cμ - λ`` and ``S`` exponential(μ) independent of ``Wq``::

            P(T > t) = (1 - C) e^{-μt} + C (θ e^{-μt} - μ e^{-θt}) / (θ - μ)   (θ ≠ μ)
                     = e^{-μt} (1 + C μ t)                                   (θ = μ)

        evaluated as ``e^{-μt} + C μ e^{-min(μ,θ) t} (1 - e^{-|θ-μ| t}) / |θ-μ|``, which has
        no cancellation when ``θ`` is close to ``μ``. For ``c = 1`` it is ``e^{-(μ-λ)t}``.

        Examples
        --------
        >>> q = mmc(arrival_rate_per_s=0.5, service_time_s=1.0, servers=1)
        >>> round(q.response_exceedance(2.0), 6)  # exp(-(1 - 0.5) * 2)
        0.367879
        """
        t_s = finite_nonnegative("t_s", t_s)
        mu = self._service_rate_per_s
        theta = self._wait_decay_rate_per_s
        gap = abs(theta - mu)
        # (e^{-min t} - e^{-max t}) / |θ - μ|, which tends to t e^{-μt} as θ -> μ.
        if gap == 0.0:
            mixed = t_s * math.exp(-mu * t_s)
        else:
            mixed = math.exp(-min(mu, theta) * t_s) * -math.expm1(-gap * t_s) / gap
        return math.exp(-mu * t_s) + self.wait_probability * mu * mixed

    def response_percentile_s(self, p: float) -> float:
        """``p``-quantile of the sojourn time ``T = Wq + S`` (``p`` a fraction).

        For ``c = 1``, ``T`` is exponential with rate ``μ - λ``, so ``t_p = -ln(1 - p) / (μ - λ)``.
        For ``c > 1`` the exact distribution (:meth:`response_exceedance`) is inverted
        numerically with ``scipy.optimize.brentq`` to a relative tolerance of 1e-12, on the
        bracket ``[0, 2 ln(2 / (1 - p)) / min(μ, θ)]`` (a union bound on ``Wq`` and ``S``).

        Examples
        --------
        >>> q = mmc(arrival_rate_per_s=0.5, service_time_s=1.0, servers=1)
        >>> round(q.response_percentile_s(0.95), 6)  # ln(20) / 0.5
        5.991465
        """
        p = probability_level(p)
        if p == 0.0:
            return 0.0
        tail = 1.0 - p
        theta = self._wait_decay_rate_per_s
        if self.servers == 1:
            return -math.log(tail) / theta
        upper_s = 2.0 * math.log(2.0 / tail) / min(self._service_rate_per_s, theta)
        root: float = brentq(
            lambda t: self.response_exceedance(t) - tail,
            0.0,
            upper_s,
            xtol=1e-300,
            rtol=_RESPONSE_PERCENTILE_RTOL,
        )
        return root


def mmc(*, arrival_rate_per_s: float, service_time_s: float, servers: int) -> MMcResult:
    """Exact steady state of an M/M/c queue.

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate ``λ`` (finite, >= 0).
    service_time_s : float
        Mean exponential service time ``E[S] = 1/μ`` (finite, > 0).
    servers : int
        Number of identical servers ``c >= 1``.

    Returns
    -------
    MMcResult
        Utilisation, Erlang C, mean wait and response, queue lengths, and exact tail helpers.

    Raises
    ------
    ValueError
        If an input is not finite, out of range, or ``servers`` is not an integer.
    UnstableQueueError
        If ``ρ = λ E[S] / c >= 1``.

    Notes
    -----
    ``a = λ/μ``, ``ρ = a/c``, ``C = C(c, a)`` (:func:`erlang_c`), ``θ = cμ - λ``:
    ``P(Wq > t) = C e^{-θt}``, ``E[Wq] = C/θ``, ``E[T] = E[Wq] + 1/μ``, ``Lq = λE[Wq]``,
    ``L = λE[T]``.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Vol. 1: Theory*, Wiley, 1975, ch. 3 (M/M/m).
    D. Gross, C. M. Harris, *Fundamentals of Queueing Theory*, 3rd ed., Wiley, 1998, the M/M/c
    model in the chapter on Markovian birth-death queues (waiting and sojourn distributions).

    Examples
    --------
    >>> q = mmc(arrival_rate_per_s=1.5, service_time_s=1.0, servers=2)
    >>> round(q.wait_probability, 6)  # 2 rho^2 / (1 + rho) with rho = 0.75
    0.642857
    >>> round(q.mean_wait_s, 6)  # C / (2 - 1.5)
    1.285714
    """
    arrival_rate_per_s = finite_nonnegative("arrival_rate_per_s", arrival_rate_per_s)
    service_time_s = finite_positive("service_time_s", service_time_s)
    servers = server_count(servers)
    offered_load = arrival_rate_per_s * service_time_s
    utilization = stable_utilization(offered_load, servers)

    wait_probability = erlang_c(servers, offered_load)
    mean_wait_s = wait_probability * service_time_s / (servers - offered_load)
    mean_response_s = mean_wait_s + service_time_s
    return MMcResult(
        arrival_rate_per_s=arrival_rate_per_s,
        service_time_s=service_time_s,
        servers=servers,
        offered_load_erlangs=offered_load,
        utilization=utilization,
        stable=True,
        saturation_rate_per_s=servers / service_time_s,
        wait_probability=wait_probability,
        mean_wait_s=mean_wait_s,
        mean_response_s=mean_response_s,
        mean_queue_length=arrival_rate_per_s * mean_wait_s,
        mean_in_system=arrival_rate_per_s * mean_response_s,
        validity=ModelValidity(
            model="M/M/c",
            method="Erlang C via the Erlang-B recurrence",
            exact=True,
            percentiles="exact",
            assumptions=_ASSUMPTIONS,
        ),
    )
