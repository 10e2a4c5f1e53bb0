"""M/G/1: Poisson arrivals, general i.i.d. service, one FCFS server (Pollaczek–Khinchine)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from servesize.core.queueing._inputs import (
    finite_nonnegative,
    finite_positive,
    probability_level,
    stable_utilization,
)
from servesize.core.queueing.validity import ModelValidity

_ASSUMPTIONS = (
    "Poisson arrivals at a constant rate",
    "i.i.d. service times with finite second moment, independent of arrivals",
    "one server, unbounded FCFS queue",
    "steady state (utilisation < 1)",
    "means and P(wait) = utilisation are exact (Pollaczek–Khinchine)",
    "wait percentiles assume an exponential tail above the atom at zero, matched to "
    "P(wait) and the mean wait; exact only for exponential service",
)


def service_scv_from_second_moment(*, service_time_s: float, second_moment_s2: float) -> float:
    """Squared coefficient of variation of service, ``c_s² = E[S²] / E[S]² - 1``.

    Parameters
    ----------
    service_time_s : float
        Mean service time ``E[S]`` (finite, > 0).
    second_moment_s2 : float
        ``E[S²]`` in s² (finite, and at least ``E[S]²``, as every distribution has).

    Examples
    --------
    >>> service_scv_from_second_moment(service_time_s=2.0, second_moment_s2=8.0)  # exponential
    1.0
    """
    service_time_s = finite_positive("service_time_s", service_time_s)
    second_moment_s2 = finite_positive("second_moment_s2", second_moment_s2)
    mean_squared = service_time_s * service_time_s
    # A relative slack of a few ulps lets E[S²] = E[S]² (deterministic service) through.
    if second_moment_s2 < mean_squared * (1.0 - 4.0 * math.ulp(1.0)):
        raise ValueError(
            f"second_moment_s2 must be >= service_time_s**2 = {mean_squared!r}, "
            f"got {second_moment_s2!r}"
        )
    return max(0.0, second_moment_s2 / mean_squared - 1.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class MG1Result:
    """Steady-state figures of an M/G/1 queue, with approximate wait percentiles.

    Attributes
    ----------
    arrival_rate_per_s, service_time_s, service_scv : float
        The inputs ``λ``, ``E[S]`` and ``c_s² = Var S / E[S]²``.
    utilization : float
        ``ρ = λ E[S]`` (always < 1 here).
    stable : bool
        Always True: an unstable queue raises ``UnstableQueueError`` instead of a result.
    saturation_rate_per_s : float
        ``1 / E[S]``, the arrival rate at which ``ρ`` reaches 1.
    wait_probability : float
        ``P(Wq > 0) = ρ`` (exact for M/G/1).
    mean_wait_s : float
        Pollaczek–Khinchine ``E[Wq] = ρ E[S] (1 + c_s²) / (2 (1 - ρ))``.
    mean_response_s : float
        ``E[T] = E[Wq] + E[S]``.
    mean_queue_length : float
        ``Lq = λ E[Wq]`` (Little).
    mean_in_system : float
        ``L = λ E[T]`` (Little).
    validity : ModelValidity
        Model, method and assumptions (percentiles are approximate).
    """

    arrival_rate_per_s: float
    service_time_s: float
    service_scv: float
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
    def _conditional_mean_wait_s(self) -> float:
        # E[Wq | Wq > 0] = E[Wq] / ρ, written without the division so ρ = 0 is harmless.
        return self.service_time_s * (1.0 + self.service_scv) / (2.0 * (1.0 - self.utilization))

    def wait_exceedance(self, t_s: float) -> float:
        """Approximate ``P(Wq > t) ≈ ρ exp(-t ρ / E[Wq])`` for ``t >= 0``.

        An exponential tail above the atom ``P(Wq = 0) = 1 - ρ``, matched to the exact
        ``P(wait) = ρ`` and the exact P-K mean. Exact for exponential service (M/M/1); for
        other service distributions the true tail has another shape, and for heavy-tailed
        service it is heavier than this exponential one.

        Examples
        --------
        >>> q = mg1(arrival_rate_per_s=0.5, service_time_s=1.0, service_scv=1.0)
        >>> round(q.wait_exceedance(2.0), 6)  # M/M/1: 0.5 exp(-(1 - 0.5) 2)
        0.18394
        """
        t_s = finite_nonnegative("t_s", t_s)
        return self.utilization * math.exp(-t_s / self._conditional_mean_wait_s)

    def wait_percentile_s(self, p: float) -> float:
        """Approximate ``p``-quantile of the wait (``p`` a fraction: 0.95 for p95).

        From :meth:`wait_exceedance`: ``t_p = (E[Wq] / ρ) ln(ρ / (1 - p))`` when
        ``1 - p < ρ``, else 0.

        Examples
        --------
        >>> q = mg1(arrival_rate_per_s=0.5, service_time_s=1.0, service_scv=1.0)
        >>> round(q.wait_percentile_s(0.9), 6)  # M/M/1: ln(0.5 / 0.1) / 0.5
        3.218876
        """
        p = probability_level(p)
        tail = 1.0 - p
        if tail >= self.utilization:
            return 0.0
        return self._conditional_mean_wait_s * math.log(self.utilization / tail)


def mg1(*, arrival_rate_per_s: float, service_time_s: float, service_scv: float) -> MG1Result:
    """Steady state of an M/G/1 queue by the Pollaczek–Khinchine mean-value formula.

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate ``λ`` (finite, >= 0).
    service_time_s : float
        Mean service time ``E[S]`` (finite, > 0).
    service_scv : float
        Squared coefficient of variation ``c_s² = Var S / E[S]²`` (finite, >= 0): 0 for
        deterministic, 1 for exponential service. Use :func:`service_scv_from_second_moment`
        when ``E[S²]`` is what you have.

    Returns
    -------
    MG1Result
        Utilisation, exact means and P(wait), approximate wait percentiles.

    Raises
    ------
    ValueError
        If an input is not finite or out of range.
    UnstableQueueError
        If ``ρ = λ E[S] >= 1``.

    Notes
    -----
    ``E[Wq] = λ E[S²] / (2 (1 - ρ)) = ρ E[S] (1 + c_s²) / (2 (1 - ρ))``. Deterministic service
    (M/D/1) gives ``ρ / (2 μ (1 - ρ))``, half the M/M/1 wait.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Vol. 1: Theory*, Wiley, 1975, ch. 5 (the queue M/G/1).
    D. Gross, C. M. Harris, *Fundamentals of Queueing Theory*, 3rd ed., Wiley, 1998, the M/G/1
    model in the chapter on general arrival or service patterns.

    Examples
    --------
    >>> round(mg1(arrival_rate_per_s=1.6, service_time_s=0.5, service_scv=0.0).mean_wait_s, 6)
    1.0
    """
    arrival_rate_per_s = finite_nonnegative("arrival_rate_per_s", arrival_rate_per_s)
    service_time_s = finite_positive("service_time_s", service_time_s)
    service_scv = finite_nonnegative("service_scv", service_scv)
    utilization = stable_utilization(arrival_rate_per_s * service_time_s, 1)

    mean_wait_s = utilization * service_time_s * (1.0 + service_scv) / (2.0 * (1.0 - utilization))
    mean_response_s = mean_wait_s + service_time_s
    return MG1Result(
        arrival_rate_per_s=arrival_rate_per_s,
        service_time_s=service_time_s,
        service_scv=service_scv,
        utilization=utilization,
        stable=True,
        saturation_rate_per_s=1.0 / service_time_s,
        wait_probability=utilization,
        mean_wait_s=mean_wait_s,
        mean_response_s=mean_response_s,
        mean_queue_length=arrival_rate_per_s * mean_wait_s,
        mean_in_system=arrival_rate_per_s * mean_response_s,
        validity=ModelValidity(
            model="M/G/1",
            method="Pollaczek–Khinchine mean-value formula",
            exact=True,
            percentiles="approximate",
            assumptions=_ASSUMPTIONS,
        ),
    )
