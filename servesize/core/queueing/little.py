"""Little's law, L = λW, solved for whichever of the three quantities is missing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from servesize.core.queueing._inputs import finite_nonnegative
from servesize.core.queueing.validity import ModelValidity

LittleQuantity = Literal["arrival_rate_per_s", "residence_time_s", "in_flight"]

_VALIDITY = ModelValidity(
    model="Little's law",
    method="L = λW",
    exact=True,
    percentiles="unavailable",
    assumptions=(
        "long-run averages of a stable, stationary system (throughput equals arrival rate)",
        "any arrival process, service distribution, number of servers and discipline",
        "relates means only: it says nothing about percentiles",
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LittlesLawResult:
    """The three quantities of Little's law, one of them solved from the other two.

    Attributes
    ----------
    arrival_rate_per_s : float
        Throughput ``λ`` (requests per second entering, and in steady state leaving).
    residence_time_s : float
        Mean time ``W`` a request spends inside the boundary.
    in_flight : float
        Mean number ``L`` of requests inside the boundary.
    solved_for : str
        Which of the three was computed.
    validity : ModelValidity
        Assumptions (stability and stationarity; no utilisation is defined without a service rate).
    """

    arrival_rate_per_s: float
    residence_time_s: float
    in_flight: float
    solved_for: LittleQuantity
    validity: ModelValidity


def littles_law(
    *,
    arrival_rate_per_s: float | None = None,
    residence_time_s: float | None = None,
    in_flight: float | None = None,
) -> LittlesLawResult:
    """Solve Little's law ``L = λW`` for the one quantity left out.

    Parameters
    ----------
    arrival_rate_per_s : float, optional
        ``λ``, requests per second (finite, >= 0; > 0 when solving for ``residence_time_s``).
    residence_time_s : float, optional
        ``W``, mean seconds in the system (finite, >= 0; > 0 when solving for the rate).
    in_flight : float, optional
        ``L``, mean number of requests in the system (finite, >= 0).

    Exactly two must be given.

    Returns
    -------
    LittlesLawResult
        All three quantities and which one was solved for.

    Raises
    ------
    ValueError
        If not exactly two are given, one is negative or not finite, or the divisor is zero.

    Notes
    -----
    ``L = λW`` holds for the long-run averages of any stable system, whatever the arrival
    process, service distribution or discipline, and for any boundary drawn around part of it.

    References
    ----------
    J. D. C. Little, "A proof for the queuing formula L = λW", Operations Research 9(3), 1961.
    L. Kleinrock, *Queueing Systems, Vol. 1: Theory*, Wiley, 1975, ch. 2 (Little's result).

    Examples
    --------
    >>> littles_law(arrival_rate_per_s=10.0, residence_time_s=2.0).in_flight
    20.0
    >>> littles_law(in_flight=20.0, arrival_rate_per_s=10.0).residence_time_s
    2.0
    """
    given = {
        name: value
        for name, value in (
            ("arrival_rate_per_s", arrival_rate_per_s),
            ("residence_time_s", residence_time_s),
            ("in_flight", in_flight),
        )
        if value is not None
    }
    if len(given) != 2:
        raise ValueError(
            "give exactly two of arrival_rate_per_s, residence_time_s and in_flight, "
            f"got {sorted(given) or 'none'}"
        )
    for name, value in given.items():
        finite_nonnegative(name, value)

    if in_flight is None:
        assert arrival_rate_per_s is not None
        assert residence_time_s is not None
        return LittlesLawResult(
            arrival_rate_per_s=float(arrival_rate_per_s),
            residence_time_s=float(residence_time_s),
            in_flight=arrival_rate_per_s * residence_time_s,
            solved_for="in_flight",
            validity=_VALIDITY,
        )
    if residence_time_s is None:
        assert arrival_rate_per_s is not None
        if arrival_rate_per_s == 0:
            raise ValueError(
                f"arrival_rate_per_s must be > 0 to solve for residence_time_s, "
                f"got {arrival_rate_per_s!r}"
            )
        return LittlesLawResult(
            arrival_rate_per_s=float(arrival_rate_per_s),
            residence_time_s=in_flight / arrival_rate_per_s,
            in_flight=float(in_flight),
            solved_for="residence_time_s",
            validity=_VALIDITY,
        )
    if residence_time_s == 0:
        raise ValueError(
            f"residence_time_s must be > 0 to solve for arrival_rate_per_s, "
            f"got {residence_time_s!r}"
        )
    return LittlesLawResult(
        arrival_rate_per_s=in_flight / residence_time_s,
        residence_time_s=float(residence_time_s),
        in_flight=float(in_flight),
        solved_for="arrival_rate_per_s",
        validity=_VALIDITY,
    )
