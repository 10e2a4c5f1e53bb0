import math
import re

import pytest

from servesize.core.errors import UnstableQueueError
from servesize.core.queueing import allen_cunneen, ggc, kingman, mg1, mmc


def test_kingman_with_exponential_variability_is_mm1() -> None:
    # c_a^2 = c_s^2 = 1, lambda = 0.7, mu = 1: Wq = rho / (mu - lambda) = 0.7 / 0.3
    result = kingman(arrival_rate_per_s=0.7, service_time_s=1.0, arrival_scv=1.0, service_scv=1.0)

    assert result.mean_wait_s == pytest.approx(0.7 / 0.3)
    assert result.servers == 1


def test_kingman_hand_computed() -> None:
    # E[S] = 2 s, lambda = 0.25/s: rho = 0.5; Wq = 2 * 0.5/0.5 * (0.5 + 0) / 2 = 0.5 s
    result = kingman(arrival_rate_per_s=0.25, service_time_s=2.0, arrival_scv=0.5, service_scv=0.0)

    assert result.mean_wait_s == pytest.approx(0.5)
    assert result.mean_response_s == pytest.approx(2.5)
    assert result.mean_in_system == pytest.approx(0.625)  # 0.25/s x 2.5 s


def test_kingman_with_poisson_arrivals_is_pollaczek_khinchine() -> None:
    # M/D/1 at rho = 0.8, mu = 2: Wq = rho / (2 mu (1 - rho)) = 1.0 s
    result = kingman(arrival_rate_per_s=1.6, service_time_s=0.5, arrival_scv=1.0, service_scv=0.0)

    assert result.mean_wait_s == pytest.approx(1.0)
    pk = mg1(arrival_rate_per_s=1.6, service_time_s=0.5, service_scv=0.0)
    assert result.mean_wait_s == pytest.approx(pk.mean_wait_s)


def test_allen_cunneen_with_exponential_variability_is_erlang() -> None:
    # c = 10, a = 8 Erlangs, E[S] = 1 s: Wq = C / (c mu - lambda) = 0.4092 / 2 (published C)
    result = allen_cunneen(
        arrival_rate_per_s=8.0, service_time_s=1.0, servers=10, arrival_scv=1.0, service_scv=1.0
    )

    assert result.mean_wait_s == pytest.approx(0.4092 / 2, abs=5e-5)
    exact = mmc(arrival_rate_per_s=8.0, service_time_s=1.0, servers=10)
    assert result.mean_wait_s == pytest.approx(exact.mean_wait_s, rel=1e-12)


def test_allen_cunneen_for_deterministic_service_halves_mm2_wait() -> None:
    # M/M/2 at lambda = 1.5, mu = 1: Wq = 9/7 (hand-computed); M/D/2 factor (1 + 0) / 2
    result = allen_cunneen(
        arrival_rate_per_s=1.5, service_time_s=1.0, servers=2, arrival_scv=1.0, service_scv=0.0
    )

    assert result.mean_wait_s == pytest.approx(9 / 14)


def test_allen_cunneen_with_one_server_equals_kingman() -> None:
    common = {"arrival_rate_per_s": 0.6, "service_time_s": 1.0, "arrival_scv": 0.3}
    one = allen_cunneen(**common, servers=1, service_scv=2.0)
    single = kingman(**common, service_scv=2.0)

    assert one.mean_wait_s == pytest.approx(single.mean_wait_s)


def test_ggc_dispatches_on_server_count() -> None:
    one = ggc(arrival_rate_per_s=0.5, service_time_s=1.0, servers=1, arrival_scv=1, service_scv=1)
    many = ggc(arrival_rate_per_s=1.5, service_time_s=1.0, servers=2, arrival_scv=1, service_scv=1)

    assert one.validity.method.startswith("Kingman")
    assert many.validity.method.startswith("Allen–Cunneen")
    assert many.mean_wait_s == pytest.approx(9 / 7)  # M/M/2 by hand, as above


def test_result_states_approximation_and_low_load_caveat() -> None:
    result = kingman(arrival_rate_per_s=0.2, service_time_s=1.0, arrival_scv=1.0, service_scv=1.0)

    assert not result.validity.exact
    assert result.validity.percentiles == "unavailable"
    assert result.utilization == pytest.approx(0.2)
    assert any("0.200 < 0.5" in caveat for caveat in result.validity.caveats)


def test_heavy_traffic_has_no_low_load_caveat() -> None:
    result = kingman(arrival_rate_per_s=0.9, service_time_s=1.0, arrival_scv=1.0, service_scv=1.0)

    assert result.validity.caveats == ()


def test_overload_is_unstable() -> None:
    with pytest.raises(UnstableQueueError) as raised:
        allen_cunneen(
            arrival_rate_per_s=5.0, service_time_s=1.0, servers=4, arrival_scv=1.0, service_scv=1.0
        )

    assert raised.value.utilization == pytest.approx(1.25)


@pytest.mark.parametrize("scv", [-1.0, math.nan, math.inf])
def test_invalid_arrival_scv_is_named(scv: float) -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"arrival_scv must be finite and >= 0, got {scv!r}")
    ):
        kingman(arrival_rate_per_s=0.5, service_time_s=1.0, arrival_scv=scv, service_scv=1.0)


def test_invalid_server_count_is_named() -> None:
    with pytest.raises(ValueError, match=re.escape("servers must be an integer >= 1, got 0")):
        ggc(arrival_rate_per_s=0.5, service_time_s=1.0, servers=0, arrival_scv=1, service_scv=1)
