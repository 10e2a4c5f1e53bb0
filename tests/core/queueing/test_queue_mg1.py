import math
import re

import pytest

from servesize.core.errors import UnstableQueueError
from servesize.core.queueing import mg1, service_scv_from_second_moment


def test_md1_mean_wait_is_half_of_mm1() -> None:
    # M/D/1, mu = 2/s (E[S] = 0.5 s), lambda = 1.6/s: rho = 0.8,
    # Wq = rho / (2 mu (1 - rho)) = 0.8 / (2 * 2 * 0.2) = 1.0 s
    result = mg1(arrival_rate_per_s=1.6, service_time_s=0.5, service_scv=0.0)

    assert result.utilization == pytest.approx(0.8)
    assert result.mean_wait_s == pytest.approx(1.0)
    assert result.mean_response_s == pytest.approx(1.5)


def test_md1_queue_lengths_follow_little() -> None:
    result = mg1(arrival_rate_per_s=1.6, service_time_s=0.5, service_scv=0.0)

    assert result.mean_queue_length == pytest.approx(1.6)  # 1.6/s x 1.0 s
    assert result.mean_in_system == pytest.approx(2.4)  # 1.6/s x 1.5 s


def test_exponential_service_reduces_to_mm1() -> None:
    # scv = 1, lambda = 0.7, mu = 1: Wq = rho / (mu - lambda) = 0.7 / 0.3
    result = mg1(arrival_rate_per_s=0.7, service_time_s=1.0, service_scv=1.0)

    assert result.mean_wait_s == pytest.approx(0.7 / 0.3)
    assert result.wait_probability == pytest.approx(0.7)


def test_mean_wait_from_second_moment() -> None:
    # lambda = 0.5, E[S] = 1, E[S^2] = 3 (scv = 2): Wq = lambda E[S^2] / (2 (1 - rho)) = 1.5
    scv = service_scv_from_second_moment(service_time_s=1.0, second_moment_s2=3.0)
    result = mg1(arrival_rate_per_s=0.5, service_time_s=1.0, service_scv=scv)

    assert scv == pytest.approx(2.0)
    assert result.mean_wait_s == pytest.approx(1.5)


def test_deterministic_second_moment_gives_zero_scv() -> None:
    assert service_scv_from_second_moment(service_time_s=0.1, second_moment_s2=0.1**2) == 0.0


def test_second_moment_below_mean_squared_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("got 0.5")):
        service_scv_from_second_moment(service_time_s=1.0, second_moment_s2=0.5)


def test_exponential_tail_approximation_is_exact_for_mm1() -> None:
    # M/M/1 at rho = 0.7: P(Wq > t) = 0.7 exp(-0.3 t); p95 = ln(14) / 0.3
    result = mg1(arrival_rate_per_s=0.7, service_time_s=1.0, service_scv=1.0)

    assert result.wait_exceedance(2.0) == pytest.approx(0.7 * math.exp(-0.6))
    assert result.wait_percentile_s(0.95) == pytest.approx(math.log(14) / 0.3)


def test_md1_percentile_uses_matched_exponential_tail() -> None:
    # rho = 0.8, E[Wq] = 1 s: conditional mean E[Wq]/rho = 1.25 s, p95 = 1.25 ln(0.8 / 0.05)
    result = mg1(arrival_rate_per_s=1.6, service_time_s=0.5, service_scv=0.0)

    assert result.wait_percentile_s(0.95) == pytest.approx(1.25 * math.log(16))
    assert result.wait_percentile_s(0.15) == 0.0  # 20 % wait, so the 15th percentile is 0


def test_result_states_percentiles_are_approximate() -> None:
    validity = mg1(arrival_rate_per_s=0.5, service_time_s=1.0, service_scv=0.0).validity

    assert validity.model == "M/G/1"
    assert validity.exact
    assert validity.percentiles == "approximate"
    assert any("exponential tail" in line for line in validity.assumptions)


def test_no_traffic_means_no_waiting() -> None:
    result = mg1(arrival_rate_per_s=0.0, service_time_s=1.0, service_scv=4.0)

    assert result.mean_wait_s == 0.0
    assert result.wait_exceedance(0.0) == 0.0
    assert result.wait_percentile_s(0.99) == 0.0


def test_full_utilization_is_unstable() -> None:
    with pytest.raises(UnstableQueueError):
        mg1(arrival_rate_per_s=2.0, service_time_s=0.5, service_scv=0.0)


@pytest.mark.parametrize("scv", [-0.5, math.nan, math.inf])
def test_invalid_scv_is_named(scv: float) -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"service_scv must be finite and >= 0, got {scv!r}")
    ):
        mg1(arrival_rate_per_s=0.5, service_time_s=1.0, service_scv=scv)
