"""Invariants of the analytic queueing models, checked with hypothesis."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.core.queueing import allen_cunneen, erlang_b, erlang_c, kingman, mg1, mmc

utilizations = st.floats(0.0, 0.999)
service_times_s = st.floats(1e-3, 1e3)
scvs = st.floats(0.0, 20.0)
levels = st.floats(0.0, 0.999)
times_s = st.floats(0.0, 1e4)


def _at_most(smaller: float, larger: float) -> bool:
    """``smaller <= larger`` up to rounding in the last few bits."""
    return smaller <= larger + 1e-12 * max(1.0, abs(larger))


@settings(deadline=None)
@given(servers=st.integers(1, 5000), utilization=utilizations)
def test_erlang_c_is_a_probability_without_overflow(servers: int, utilization: float) -> None:
    p = erlang_c(servers, utilization * servers)

    assert math.isfinite(p)
    assert 0.0 <= p <= 1.0


@settings(deadline=None)
@given(servers=st.integers(1, 5000), offered_load=st.floats(0.0, 1e4))
def test_erlang_b_is_a_probability_at_any_load(servers: int, offered_load: float) -> None:
    p = erlang_b(servers, offered_load)

    assert 0.0 <= p <= 1.0


@settings(deadline=None)
@given(
    servers=st.integers(1, 5000),
    utilization=utilizations,
    service_time_s=service_times_s,
    p=levels,
    t_s=times_s,
)
def test_mmc_figures_are_finite_probabilities_and_non_negative_times(
    servers: int, utilization: float, service_time_s: float, p: float, t_s: float
) -> None:
    result = mmc(
        arrival_rate_per_s=utilization * servers / service_time_s,
        service_time_s=service_time_s,
        servers=servers,
    )

    for probability in (
        result.wait_probability,
        result.wait_exceedance(t_s),
        result.response_exceedance(t_s),
    ):
        assert 0.0 <= probability <= 1.0
    for time_s in (
        result.mean_wait_s,
        result.wait_percentile_s(p),
        result.response_percentile_s(p),
    ):
        assert math.isfinite(time_s)
        assert time_s >= 0.0
    assert result.mean_response_s >= service_time_s


@settings(deadline=None)
@given(servers=st.integers(1, 200), utilization=st.floats(0.01, 0.99), p=st.floats(0.01, 0.999))
def test_mmc_percentiles_invert_their_tails(servers: int, utilization: float, p: float) -> None:
    result = mmc(arrival_rate_per_s=utilization * servers, service_time_s=1.0, servers=servers)

    response_s = result.response_percentile_s(p)
    assert math.isclose(result.response_exceedance(response_s), 1.0 - p, rel_tol=1e-9)
    wait_s = result.wait_percentile_s(p)
    if wait_s > 0.0:
        assert math.isclose(result.wait_exceedance(wait_s), 1.0 - p, rel_tol=1e-9)


@given(
    servers=st.integers(1, 300),
    low=utilizations,
    high=utilizations,
    service_time_s=service_times_s,
    p=levels,
)
def test_mmc_waiting_is_monotone_in_arrival_rate(
    servers: int, low: float, high: float, service_time_s: float, p: float
) -> None:
    low, high = sorted((low, high))
    light, heavy = (
        mmc(
            arrival_rate_per_s=u * servers / service_time_s,
            service_time_s=service_time_s,
            servers=servers,
        )
        for u in (low, high)
    )

    assert _at_most(light.wait_probability, heavy.wait_probability)
    assert _at_most(light.mean_wait_s, heavy.mean_wait_s)
    assert _at_most(light.wait_percentile_s(p), heavy.wait_percentile_s(p))


@given(servers=st.integers(1, 300), utilization=utilizations, p=levels)
def test_adding_a_server_never_increases_waiting(
    servers: int, utilization: float, p: float
) -> None:
    arrival_rate_per_s = utilization * servers  # E[S] = 1 s
    fewer, more = (
        mmc(arrival_rate_per_s=arrival_rate_per_s, service_time_s=1.0, servers=c)
        for c in (servers, servers + 1)
    )

    assert _at_most(more.wait_probability, fewer.wait_probability)
    assert _at_most(more.mean_wait_s, fewer.mean_wait_s)
    assert _at_most(more.wait_percentile_s(p), fewer.wait_percentile_s(p))


@given(low=utilizations, high=utilizations, service_time_s=service_times_s, scv=scvs, p=levels)
def test_mg1_waiting_is_monotone_in_arrival_rate(
    low: float, high: float, service_time_s: float, scv: float, p: float
) -> None:
    low, high = sorted((low, high))
    light, heavy = (
        mg1(arrival_rate_per_s=u / service_time_s, service_time_s=service_time_s, service_scv=scv)
        for u in (low, high)
    )

    assert light.mean_wait_s >= 0.0
    assert _at_most(light.mean_wait_s, heavy.mean_wait_s)
    assert _at_most(light.wait_percentile_s(p), heavy.wait_percentile_s(p))
    assert 0.0 <= heavy.wait_exceedance(service_time_s) <= heavy.wait_probability <= 1.0


@given(low=utilizations, high=utilizations, arrival_scv=scvs, service_scv=scvs)
def test_kingman_wait_is_monotone_in_arrival_rate(
    low: float, high: float, arrival_scv: float, service_scv: float
) -> None:
    low, high = sorted((low, high))
    light, heavy = (
        kingman(
            arrival_rate_per_s=u,
            service_time_s=1.0,
            arrival_scv=arrival_scv,
            service_scv=service_scv,
        )
        for u in (low, high)
    )

    assert light.mean_wait_s >= 0.0
    assert _at_most(light.mean_wait_s, heavy.mean_wait_s)


@settings(deadline=None)
@given(servers=st.integers(1, 2000), utilization=utilizations, arrival_scv=scvs, service_scv=scvs)
def test_allen_cunneen_adding_a_server_never_increases_waiting(
    servers: int, utilization: float, arrival_scv: float, service_scv: float
) -> None:
    fewer, more = (
        allen_cunneen(
            arrival_rate_per_s=utilization * servers,
            service_time_s=1.0,
            servers=c,
            arrival_scv=arrival_scv,
            service_scv=service_scv,
        )
        for c in (servers, servers + 1)
    )

    assert math.isfinite(fewer.mean_wait_s)
    assert more.mean_wait_s >= 0.0
    assert _at_most(more.mean_wait_s, fewer.mean_wait_s)


@given(servers=st.integers(1, 300), utilization=utilizations, service_time_s=service_times_s)
def test_mmc_queue_lengths_obey_little(
    servers: int, utilization: float, service_time_s: float
) -> None:
    result = mmc(
        arrival_rate_per_s=utilization * servers / service_time_s,
        service_time_s=service_time_s,
        servers=servers,
    )

    # L - Lq = a: mean busy servers equals the offered load
    assert math.isclose(
        result.mean_in_system - result.mean_queue_length,
        result.offered_load_erlangs,
        rel_tol=1e-9,
        abs_tol=1e-12,
    )
