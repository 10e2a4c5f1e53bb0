"""G/G/c mean-wait approximations: Kingman (one server) and Allen–Cunneen (c servers)."""

from __future__ import annotations

from dataclasses import dataclass

from servesize.core.queueing._inputs import (
    finite_nonnegative,
    finite_positive,
    server_count,
    stable_utilization,
)
from servesize.core.queueing.queue_mmc import erlang_c
from servesize.core.queueing.validity import ModelValidity

# Both formulas are heavy-traffic approximations; below this utilisation their error grows.
_HEAVY_TRAFFIC_UTILIZATION = 0.5

_ASSUMPTIONS = (
    "renewal arrivals: i.i.d. inter-arrival times with the given SCV",
    "i.i.d. service times with the given SCV, independent of arrivals",
    "identical servers sharing one unbounded FCFS queue",
    "steady state (utilisation < 1)",
    "approximation of the mean wait only; accurate for utilisation >= 0.5, weaker at low load "
    "and for very small or very large SCVs",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GGcResult:
    """Approximate steady-state means of a G/G/c queue.

    Attributes
    ----------
    arrival_rate_per_s, service_time_s : float
        The inputs ``λ`` and ``E[S]``.
    servers : int
        The input ``c`` (1 for Kingman).
    arrival_scv, service_scv : float
        The inputs ``c_a²`` and ``c_s²``.
    offered_load_erlangs : float
        ``a = λ E[S]``.
    utilization : float
        ``ρ = a / c`` (always < 1 here).
    stable : bool
        Always True: an unstable queue raises ``UnstableQueueError`` instead of a result.
    saturation_rate_per_s : float
        ``c / E[S]``, the arrival rate at which ``ρ`` reaches 1.
    mean_wait_s : float
        Approximate ``E[Wq]``.
    mean_response_s : float
        ``E[T] = E[Wq] + E[S]``.
    mean_queue_length : float
        ``Lq = λ E[Wq]`` (Little).
    mean_in_system : float
        ``L = λ E[T]`` (Little).
    validity : ModelValidity
        Model, method, assumptions and input-specific caveats (no percentiles).
    """

    arrival_rate_per_s: float
    service_time_s: float
    servers: int
    arrival_scv: float
    service_scv: float
    offered_load_erlangs: float
    utilization: float
    stable: bool
    saturation_rate_per_s: float
    mean_wait_s: float
    mean_response_s: float
    mean_queue_length: float
    mean_in_system: float
    validity: ModelValidity


def kingman(
    *,
    arrival_rate_per_s: float,
    service_time_s: float,
    arrival_scv: float,
    service_scv: float,
) -> GGcResult:
    """Kingman's approximation of the mean wait in a G/G/1 queue.

    Parameters
    ----------
    arrival_rate_per_s : float
        Arrival rate ``λ`` (finite, >= 0).
    service_time_s : float
        Mean service time ``E[S]`` (finite, > 0).
    arrival_scv : float
        ``c_a²``, squared coefficient of variation of inter-arrival times (finite, >= 0):
        1 for Poisson, ``1/k`` for gamma with shape ``k``, 0 for constant spacing.
    service_scv : float
        ``c_s²``, squared coefficient of variation of service times (finite, >= 0).

    Returns
    -------
    GGcResult
        Utilisation and approximate means, with ``servers = 1``.

    Raises
    ------
    ValueError
        If an input is not finite or out of range.
    UnstableQueueError
        If ``ρ = λ E[S] >= 1``.

    Notes
    -----
    ``E[Wq] ≈ E[S] · ρ / (1 - ρ) · (c_a² + c_s²) / 2``. Exact in heavy traffic (ρ -> 1); with
    Poisson arrivals (``c_a² = 1``) it equals the exact Pollaczek–Khinchine M/G/1 mean, and with
    both SCVs 1 the M/M/1 mean ``ρ / (μ - λ)``.

    References
    ----------
    J. F. C. Kingman, "The single server queue in heavy traffic", Proc. Cambridge
    Philosophical Society 57(4), 1961.
    W. Whitt, "Approximations for the GI/G/m queue", Production and Operations Management
    2(2), 1993 (the same two-moment form, and where it errs).

    Examples
    --------
    >>> q = kingman(arrival_rate_per_s=0.25, service_time_s=2.0, arrival_scv=0.5, service_scv=0.0)
    >>> round(q.mean_wait_s, 6)  # 2 * (0.5 / 0.5) * (0.5 + 0) / 2
    0.5
    """
    arrival_rate_per_s = finite_nonnegative("arrival_rate_per_s", arrival_rate_per_s)
    service_time_s = finite_positive("service_time_s", service_time_s)
    arrival_scv = finite_nonnegative("arrival_scv", arrival_scv)
    service_scv = finite_nonnegative("service_scv", service_scv)
    utilization = stable_utilization(arrival_rate_per_s * service_time_s, 1)

    variability = (arrival_scv + service_scv) / 2.0
    mean_wait_s = service_time_s * utilization / (1.0 - utilization) * variability
    return _result(
        arrival_rate_per_s=arrival_rate_per_s,
        service_time_s=service_time_s,
        servers=1,
        arrival_scv=arrival_scv,
        service_scv=service_scv,
        utilization=utilization,
        mean_wait_s=mean_wait_s,
        model="G/G/1",
        method="Kingman heavy-traffic approximation",
    )


def allen_cunneen(
    *,
    arrival_rate_per_s: float,
    service_time_s: float,
    servers: int,
    arrival_scv: float,
    service_scv: float,
) -> GGcResult:
    """Allen–Cunneen approximation of the mean wait in a G/G/c queue.

    Parameters
    ----------
    arrival_rate_per_s : float
        Arrival rate ``λ`` (finite, >= 0).
    service_time_s : float
        Mean service time ``E[S] = 1/μ`` (finite, > 0).
    servers : int
        Number of identical servers ``c >= 1``.
    arrival_scv : float
        ``c_a²`` of inter-arrival times (finite, >= 0).
    service_scv : float
        ``c_s²`` of service times (finite, >= 0).

    Returns
    -------
    GGcResult
        Utilisation and approximate means.

    Raises
    ------
    ValueError
        If an input is not finite or out of range.
    UnstableQueueError
        If ``ρ = λ E[S] / c >= 1``.

    Notes
    -----
    ``E[Wq] ≈ C(c, a) / (cμ - λ) · (c_a² + c_s²) / 2``: the exact M/M/c mean wait (Erlang C,
    :func:`~servesize.core.queueing.queue_mmc.erlang_c`) scaled by the variability factor. With both
    SCVs 1 it is the M/M/c mean; with ``c = 1`` it is Kingman's formula. For deterministic
    service and few servers it tends to underestimate a little (no Cosmetatos correction).

    References
    ----------
    A. O. Allen, *Probability, Statistics, and Queueing Theory with Computer Science
    Applications*, 2nd ed., Academic Press, 1990.
    W. Whitt, "Approximations for the GI/G/m queue", Production and Operations Management
    2(2), 1993.

    Examples
    --------
    >>> q = allen_cunneen(
    ...     arrival_rate_per_s=1.5, service_time_s=1.0, servers=2, arrival_scv=1.0, service_scv=0.0
    ... )
    >>> round(q.mean_wait_s, 6)  # half the M/M/2 wait 9/7
    0.642857
    """
    arrival_rate_per_s = finite_nonnegative("arrival_rate_per_s", arrival_rate_per_s)
    service_time_s = finite_positive("service_time_s", service_time_s)
    servers = server_count(servers)
    arrival_scv = finite_nonnegative("arrival_scv", arrival_scv)
    service_scv = finite_nonnegative("service_scv", service_scv)
    offered_load = arrival_rate_per_s * service_time_s
    utilization = stable_utilization(offered_load, servers)

    variability = (arrival_scv + service_scv) / 2.0
    mmc_mean_wait_s = erlang_c(servers, offered_load) * service_time_s / (servers - offered_load)
    return _result(
        arrival_rate_per_s=arrival_rate_per_s,
        service_time_s=service_time_s,
        servers=servers,
        arrival_scv=arrival_scv,
        service_scv=service_scv,
        utilization=utilization,
        mean_wait_s=mmc_mean_wait_s * variability,
        model="G/G/c",
        method="Allen–Cunneen approximation (Erlang C times (c_a² + c_s²) / 2)",
    )


def ggc(
    *,
    arrival_rate_per_s: float,
    service_time_s: float,
    servers: int,
    arrival_scv: float,
    service_scv: float,
) -> GGcResult:
    """Approximate G/G/c mean wait: :func:`kingman` for ``c = 1``, :func:`allen_cunneen` above.

    Examples
    --------
    >>> q = ggc(
    ...     arrival_rate_per_s=0.7, service_time_s=1.0, servers=1, arrival_scv=1.0, service_scv=1.0
    ... )
    >>> round(q.mean_wait_s, 6), q.validity.method  # M/M/1: 0.7 / 0.3
    (2.333333, 'Kingman heavy-traffic approximation')
    """
    if server_count(servers) == 1:
        return kingman(
            arrival_rate_per_s=arrival_rate_per_s,
            service_time_s=service_time_s,
            arrival_scv=arrival_scv,
            service_scv=service_scv,
        )
    return allen_cunneen(
        arrival_rate_per_s=arrival_rate_per_s,
        service_time_s=service_time_s,
        servers=servers,
        arrival_scv=arrival_scv,
        service_scv=service_scv,
    )


def _result(
    *,
    arrival_rate_per_s: float,
    service_time_s: float,
    servers: int,
    arrival_scv: float,
    service_scv: float,
    utilization: float,
    mean_wait_s: float,
    model: str,
    method: str,
) -> GGcResult:
    caveats: list[str] = []
    if utilization < _HEAVY_TRAFFIC_UTILIZATION:
        caveats.append(
            f"utilisation {utilization:.3f} < {_HEAVY_TRAFFIC_UTILIZATION}: the approximation "
            "is built for heavy traffic; expect errors of 10-30 % here"
        )
    if servers > 1 and service_scv < 1.0:
        caveats.append(
            f"service SCV {service_scv:g} < 1 with {servers} servers: Allen–Cunneen tends to "
            "underestimate the wait for few servers"
        )
    mean_response_s = mean_wait_s + service_time_s
    return GGcResult(
        arrival_rate_per_s=arrival_rate_per_s,
        service_time_s=service_time_s,
        servers=servers,
        arrival_scv=arrival_scv,
        service_scv=service_scv,
        offered_load_erlangs=arrival_rate_per_s * service_time_s,
        utilization=utilization,
        stable=True,
        saturation_rate_per_s=servers / service_time_s,
        mean_wait_s=mean_wait_s,
        mean_response_s=mean_response_s,
        mean_queue_length=arrival_rate_per_s * mean_wait_s,
        mean_in_system=arrival_rate_per_s * mean_response_s,
        validity=ModelValidity(
            model=model,
            method=method,
            exact=False,
            percentiles="unavailable",
            assumptions=_ASSUMPTIONS,
            caveats=tuple(caveats),
        ),
    )
