"""Arrival skeletons, common random numbers, open/closed/trace workloads."""

import math

import numpy as np
import pytest

from servesize.core.traffic import (
    ClosedLoopWorkload,
    FixedLength,
    GeometricLength,
    OpenLoopWorkload,
    UniformLength,
    arrival_times_s,
    closed_loop_workload,
    open_loop_workload,
    trace_workload,
    unit_rate_arrival_times,
)

SEED = 7


def test_constant_arrivals_are_evenly_spaced_from_zero() -> None:
    times = arrival_times_s(4, rate_per_s=4.0, process="constant", rng=np.random.default_rng(0))
    assert times.tolist() == [0.0, 0.25, 0.5, 0.75]


def test_poisson_gaps_have_unit_mean_and_unit_scv() -> None:
    times = unit_rate_arrival_times(200_001, process="poisson", rng=np.random.default_rng(SEED))
    gaps = np.diff(times)
    assert gaps.mean() == pytest.approx(1.0, abs=0.01)
    assert gaps.var() / gaps.mean() ** 2 == pytest.approx(1.0, abs=0.02)


def test_gamma_gaps_have_the_requested_cv() -> None:
    # shape k = 1/cv^2 = 0.25, scale 1/k: mean 1, scv = cv^2 = 4
    times = unit_rate_arrival_times(
        200_001, process="gamma", cv=2.0, rng=np.random.default_rng(SEED)
    )
    gaps = np.diff(times)
    assert gaps.mean() == pytest.approx(1.0, abs=0.03)
    assert gaps.var() / gaps.mean() ** 2 == pytest.approx(4.0, rel=0.05)


def test_match_total_duration_rescales_gaps_to_sum_to_n() -> None:
    # The same generator state gives the same gamma gaps g; matching multiplies them by n / Σg.
    n, cv = 1000, 1.5
    shape = 1.0 / cv**2
    gaps = np.random.default_rng(SEED).gamma(shape, 1.0 / shape, size=n)
    times = unit_rate_arrival_times(
        n, process="gamma", cv=cv, rng=np.random.default_rng(SEED), match_total_duration=True
    )
    expected = np.concatenate(([0.0], np.cumsum(gaps[:-1] * (n / gaps.sum()))))
    np.testing.assert_allclose(times, expected, rtol=1e-12)


def test_common_random_numbers_scale_the_same_skeleton() -> None:
    kwargs = {
        "num_requests": 500,
        "input_tokens": UniformLength(1, 100),
        "output_tokens": GeometricLength(30.0),
    }
    slow = open_loop_workload(rate_per_s=2.0, rng=np.random.default_rng(SEED), **kwargs)  # type: ignore[arg-type]
    fast = open_loop_workload(rate_per_s=8.0, rng=np.random.default_rng(SEED), **kwargs)  # type: ignore[arg-type]
    np.testing.assert_allclose(fast.arrival_s * 4.0, slow.arrival_s, rtol=1e-12)
    assert np.array_equal(fast.prompt_tokens, slow.prompt_tokens)
    assert np.array_equal(fast.output_tokens, slow.output_tokens)
    rescaled = slow.with_rate(8.0)
    np.testing.assert_allclose(rescaled.arrival_s, fast.arrival_s, rtol=1e-12)
    assert rescaled.nominal_rate_per_s == 8.0


def test_lengths_do_not_depend_on_the_arrival_process() -> None:
    def draw(process: str) -> OpenLoopWorkload:
        return open_loop_workload(
            num_requests=50,
            rate_per_s=1.0,
            process=process,  # type: ignore[arg-type]
            cv=3.0,
            input_tokens=UniformLength(1, 1000),
            output_tokens=UniformLength(1, 1000),
            rng=np.random.default_rng(SEED),
        )

    assert np.array_equal(draw("poisson").prompt_tokens, draw("gamma").prompt_tokens)
    assert np.array_equal(draw("poisson").output_tokens, draw("constant").output_tokens)


def test_same_seed_same_workload() -> None:
    def draw() -> OpenLoopWorkload:
        return open_loop_workload(
            num_requests=100,
            rate_per_s=3.0,
            input_tokens=GeometricLength(10.0),
            output_tokens=GeometricLength(10.0),
            rng=np.random.default_rng(SEED),
            timeout_s=5.0,
        )

    a, b = draw(), draw()
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert np.array_equal(a.timeout_s, np.full(100, 5.0))


def test_trace_is_sorted_and_its_rate_is_inferred() -> None:
    w = trace_workload(
        arrival_s=np.array([2.0, 0.0, 1.0]),
        prompt_tokens=np.array([30, 10, 20]),
        output_tokens=np.array([3, 1, 2]),
    )
    assert w.arrival_s.tolist() == [0.0, 1.0, 2.0]
    assert w.prompt_tokens.tolist() == [10, 20, 30]
    assert w.output_tokens.tolist() == [1, 2, 3]
    assert w.nominal_rate_per_s == 1.0  # (3 - 1) / 2 s


def test_closed_loop_think_times() -> None:
    constant = closed_loop_workload(
        clients=3,
        num_requests=10,
        input_tokens=FixedLength(5),
        output_tokens=FixedLength(5),
        rng=np.random.default_rng(SEED),
        think_time_s=0.5,
    )
    assert isinstance(constant, ClosedLoopWorkload)
    assert constant.think_time_s.tolist() == [0.5] * 10
    expo = closed_loop_workload(
        clients=3,
        num_requests=100_000,
        input_tokens=FixedLength(5),
        output_tokens=FixedLength(5),
        rng=np.random.default_rng(SEED),
        think_time_s=0.5,
        think_process="exponential",
    )
    assert expo.think_time_s.mean() == pytest.approx(0.5, rel=0.02)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"arrival_s": np.array([1.0, 0.0])}, "non-decreasing"),
        ({"prompt_tokens": np.array([0, 1])}, "prompt_tokens"),
        ({"timeout_s": np.array([0.0, 1.0])}, "timeout_s"),
        ({"warmup_requests": 2}, "no request left"),
        ({"output_tokens": np.array([1.5, 2.0])}, "integers"),
    ],
)
def test_open_loop_validation(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {
        "arrival_s": np.array([0.0, 1.0]),
        "prompt_tokens": np.array([1, 1]),
        "output_tokens": np.array([1, 1]),
        "timeout_s": np.array([math.inf, math.inf]),
        "nominal_rate_per_s": 1.0,
    }
    base.update(kwargs)
    with pytest.raises(ValueError, match=message):
        OpenLoopWorkload(**base)  # type: ignore[arg-type]


def test_closed_loop_needs_a_client() -> None:
    with pytest.raises(ValueError, match="clients"):
        ClosedLoopWorkload(
            clients=0,
            think_time_s=np.zeros(1),
            prompt_tokens=np.ones(1, dtype=np.int64),
            output_tokens=np.ones(1, dtype=np.int64),
            timeout_s=np.full(1, math.inf),
        )


def test_gamma_needs_a_positive_cv() -> None:
    with pytest.raises(ValueError, match="cv"):
        unit_rate_arrival_times(3, process="gamma", cv=0.0, rng=np.random.default_rng(0))
