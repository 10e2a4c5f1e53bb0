import math
import re
from fractions import Fraction

import pytest
from scipy.stats import poisson

from servesize.core.errors import UnstableQueueError
from servesize.core.queueing import erlang_b, erlang_c


def _erlang_c_by_definition(servers: int, offered_load: Fraction) -> Fraction:
    """The textbook sum with factorials, in exact rational arithmetic."""
    head = sum(offered_load**k / math.factorial(k) for k in range(servers))
    tail = offered_load**servers / math.factorial(servers) * servers / (servers - offered_load)
    return tail / (head + tail)


def test_matches_published_erlang_c_table() -> None:
    # c = 10, a = 8 Erlangs: P(wait) = 0.4092 in standard Erlang C tables
    assert erlang_c(10, 8.0) == pytest.approx(0.4092, abs=5e-5)


def test_single_server_wait_probability_is_utilization() -> None:
    # M/M/1: P(wait) = rho
    assert erlang_c(1, 0.7) == pytest.approx(0.7)


def test_two_servers_match_closed_form() -> None:
    # c = 2: C = 2 rho^2 / (1 + rho); a = 1.5, rho = 0.75 -> 1.125 / 1.75 = 9/14
    assert erlang_c(2, 1.5) == pytest.approx(9 / 14, rel=1e-12)


@pytest.mark.parametrize(
    ("servers", "offered_load"),
    [(1, Fraction(1, 3)), (3, Fraction(5, 2)), (7, Fraction(6)), (20, Fraction(37, 2))],
)
def test_matches_factorial_definition_exactly(servers: int, offered_load: Fraction) -> None:
    expected = float(_erlang_c_by_definition(servers, offered_load))

    assert erlang_c(servers, float(offered_load)) == pytest.approx(expected, rel=1e-12)


def test_erlang_b_matches_single_server_loss_formula() -> None:
    # M/M/1/1: B = a / (1 + a); a = 3 -> 0.75
    assert erlang_b(1, 3.0) == pytest.approx(0.75)


@pytest.mark.parametrize(("servers", "offered_load"), [(10, 8.0), (200, 180.0), (3000, 2950.0)])
def test_erlang_b_matches_poisson_ratio(servers: int, offered_load: float) -> None:
    # B(c, a) = P(N = c) / P(N <= c) for N ~ Poisson(a), computed in logs by scipy
    expected = math.exp(
        poisson.logpmf(servers, offered_load) - poisson.logcdf(servers, offered_load)
    )

    assert erlang_b(servers, offered_load) == pytest.approx(expected, rel=1e-9)


def test_erlang_b_accepts_overload() -> None:
    # a loss system has no queue, so a > c is a valid input: B(1, 9) = 9 / 10
    assert erlang_b(1, 9.0) == pytest.approx(0.9)


def test_no_load_means_no_waiting() -> None:
    assert erlang_c(4, 0.0) == 0.0


def test_overloaded_queue_is_unstable() -> None:
    with pytest.raises(UnstableQueueError) as raised:
        erlang_c(4, 4.0)

    assert raised.value.utilization == pytest.approx(1.0)


@pytest.mark.parametrize("servers", [0, -3])
def test_servers_must_be_positive(servers: int) -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"servers must be an integer >= 1, got {servers}")
    ):
        erlang_c(servers, 0.5)


def test_servers_must_be_an_integer() -> None:
    with pytest.raises(ValueError, match=r"got 2\.0"):
        erlang_c(2.0, 0.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("load", [-0.1, math.nan, math.inf])
def test_offered_load_must_be_finite_and_non_negative(load: float) -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"offered_load must be finite and >= 0, got {load!r}")
    ):
        erlang_c(3, load)
