import math
import re

import pytest

from servesize.core.errors import UnstableQueueError
from servesize.core.queueing import MMcResult, mmc


def mm1() -> MMcResult:
    """lambda = 0.7/s, E[S] = 1 s (mu = 1/s): rho = 0.7, mu - lambda = 0.3/s."""
    return mmc(arrival_rate_per_s=0.7, service_time_s=1.0, servers=1)


def mm2() -> MMcResult:
    """lambda = 1.5/s, E[S] = 1 s, c = 2: a = 1.5, rho = 0.75, theta = c mu - lambda = 0.5/s."""
    return mmc(arrival_rate_per_s=1.5, service_time_s=1.0, servers=2)


def test_mm1_wait_probability_is_utilization() -> None:
    result = mm1()

    assert result.utilization == pytest.approx(0.7)
    assert result.wait_probability == pytest.approx(0.7)


def test_mm1_mean_wait_and_response() -> None:
    result = mm1()

    assert result.mean_wait_s == pytest.approx(0.7 / 0.3)  # rho / (mu - lambda)
    assert result.mean_response_s == pytest.approx(1 / 0.3)  # 1 / (mu - lambda)


def test_mm1_queue_lengths() -> None:
    result = mm1()

    assert result.mean_queue_length == pytest.approx(0.49 / 0.3)  # rho^2 / (1 - rho)
    assert result.mean_in_system == pytest.approx(0.7 / 0.3)  # rho / (1 - rho)


def test_mm1_response_percentile_is_exponential_quantile() -> None:
    # T ~ Exp(mu - lambda): t_95 = ln(20) / 0.3
    assert mm1().response_percentile_s(0.95) == pytest.approx(math.log(20) / 0.3)


def test_mm1_wait_percentile() -> None:
    # P(Wq > t) = 0.7 exp(-0.3 t) = 0.05  ->  t = ln(14) / 0.3
    assert mm1().wait_percentile_s(0.95) == pytest.approx(math.log(14) / 0.3)


def test_wait_percentile_is_zero_inside_the_atom() -> None:
    # 30 % of M/M/1 arrivals at rho = 0.7 do not wait, so p <= 0.3 gives 0
    assert mm1().wait_percentile_s(0.3) == 0.0
    assert mm1().wait_percentile_s(0.2) == 0.0


def test_mm2_matches_hand_computed_closed_form() -> None:
    result = mm2()

    # C = [a^2/2 * 2/(2 - a)] / [1 + a + a^2/2 * 2/(2 - a)] = 4.5 / 7 = 9/14
    assert result.wait_probability == pytest.approx(9 / 14)
    # E[Wq] = C / theta = 9/7; also rho^2 / (mu (1 - rho^2)) = 0.5625 / 0.4375
    assert result.mean_wait_s == pytest.approx(9 / 7)
    assert result.mean_response_s == pytest.approx(16 / 7)
    assert result.mean_queue_length == pytest.approx(1.5 * 9 / 7)


def test_mm2_wait_percentile() -> None:
    # (9/14) exp(-0.5 t) = 0.05  ->  t = 2 ln(9 / 0.7)
    assert mm2().wait_percentile_s(0.95) == pytest.approx(2 * math.log(9 / 0.7))


def test_mm2_response_tail_matches_hand_derivation() -> None:
    # P(T > t) = (1 - C) e^{-t} + C (theta e^{-t} - mu e^{-theta t}) / (theta - mu)
    #          = -(2/7) e^{-t} + (9/7) e^{-t/2}   with C = 9/14, theta = 0.5, mu = 1
    t = 3.0
    expected = -(2 / 7) * math.exp(-t) + (9 / 7) * math.exp(-t / 2)

    assert mm2().response_exceedance(t) == pytest.approx(expected, rel=1e-12)


def test_mm2_response_percentile_by_quadratic() -> None:
    # With x = e^{-t/2}: (9/7) x - (2/7) x^2 = 0.05  ->  2x^2 - 9x + 0.35 = 0,
    # smaller root x = (9 - sqrt(78.2)) / 4, t = -2 ln x
    expected = -2 * math.log((9 - math.sqrt(78.2)) / 4)

    assert mm2().response_percentile_s(0.95) == pytest.approx(expected, rel=1e-9)


def test_response_tail_when_wait_rate_equals_service_rate() -> None:
    # c = 2, lambda = mu = 1: theta = 2 - 1 = mu, rho = 0.5, C = 2 rho^2 / (1 + rho) = 1/3;
    # T = S + Wq is then Erlang-2 with probability C: P(T > t) = e^{-t} (1 + C t)
    result = mmc(arrival_rate_per_s=1.0, service_time_s=1.0, servers=2)

    assert result.response_exceedance(2.0) == pytest.approx(math.exp(-2.0) * (1 + 2 / 3))


def test_response_tail_is_continuous_across_equal_rates() -> None:
    at = mmc(arrival_rate_per_s=1.0, service_time_s=1.0, servers=2).response_exceedance(2.0)
    near = mmc(arrival_rate_per_s=1.0 + 1e-9, service_time_s=1.0, servers=2)

    assert near.response_exceedance(2.0) == pytest.approx(at, rel=1e-7)


def test_response_tail_starts_at_one() -> None:
    assert mm2().response_exceedance(0.0) == pytest.approx(1.0)


def test_zero_percentile_is_zero() -> None:
    assert mm2().response_percentile_s(0.0) == 0.0


def test_saturation_rate_is_servers_over_service_time() -> None:
    result = mmc(arrival_rate_per_s=1.0, service_time_s=0.25, servers=3)

    assert result.saturation_rate_per_s == pytest.approx(12.0)  # 3 / 0.25 s
    assert result.stable


def test_result_states_exact_model_and_assumptions() -> None:
    validity = mm2().validity

    assert validity.model == "M/M/c"
    assert validity.exact
    assert validity.percentiles == "exact"
    assert any("Poisson" in line for line in validity.assumptions)


def test_no_traffic_means_no_waiting() -> None:
    result = mmc(arrival_rate_per_s=0.0, service_time_s=1.0, servers=3)

    assert result.mean_wait_s == 0.0
    assert result.mean_response_s == 1.0
    assert result.wait_percentile_s(0.99) == 0.0


def test_full_utilization_is_unstable() -> None:
    with pytest.raises(UnstableQueueError) as raised:
        mmc(arrival_rate_per_s=2.0, service_time_s=1.0, servers=2)

    assert raised.value.utilization == pytest.approx(1.0)


@pytest.mark.parametrize("rate", [-1.0, math.nan, math.inf])
def test_invalid_arrival_rate_is_named(rate: float) -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"arrival_rate_per_s must be finite and >= 0, got {rate!r}")
    ):
        mmc(arrival_rate_per_s=rate, service_time_s=1.0, servers=2)


@pytest.mark.parametrize("service", [0.0, -2.0, math.nan, math.inf])
def test_invalid_service_time_is_named(service: float) -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"service_time_s must be finite and > 0, got {service!r}")
    ):
        mmc(arrival_rate_per_s=1.0, service_time_s=service, servers=2)


@pytest.mark.parametrize("p", [1.0, 95.0, -0.1, math.nan])
def test_percentile_must_be_a_fraction(p: float) -> None:
    with pytest.raises(ValueError, match=re.escape(f"got {p!r}")):
        mm2().wait_percentile_s(p)


def test_negative_time_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("t_s must be finite and >= 0, got -1.0")):
        mm2().response_exceedance(-1.0)
