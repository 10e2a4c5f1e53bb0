import math
import re

import pytest

from servesize.core.queueing import littles_law


def test_seed_example_ten_per_second_for_two_seconds_is_twenty_in_flight() -> None:
    result = littles_law(arrival_rate_per_s=10.0, residence_time_s=2.0)

    assert result.in_flight == pytest.approx(20.0)  # 10 req/s x 2 s
    assert result.solved_for == "in_flight"


def test_residence_time_from_in_flight_and_rate() -> None:
    result = littles_law(in_flight=20.0, arrival_rate_per_s=10.0)

    assert result.residence_time_s == pytest.approx(2.0)  # 20 / 10 req/s
    assert result.solved_for == "residence_time_s"


def test_arrival_rate_from_in_flight_and_residence_time() -> None:
    result = littles_law(in_flight=20.0, residence_time_s=2.0)

    assert result.arrival_rate_per_s == pytest.approx(10.0)  # 20 / 2 s
    assert result.solved_for == "arrival_rate_per_s"


def test_result_states_it_is_exact_for_means_only() -> None:
    validity = littles_law(arrival_rate_per_s=1.0, residence_time_s=1.0).validity

    assert validity.exact
    assert validity.percentiles == "unavailable"
    assert any("stable" in line for line in validity.assumptions)


@pytest.mark.parametrize(
    "given",
    [
        {},
        {"in_flight": 1.0},
        {"arrival_rate_per_s": 1.0, "residence_time_s": 1.0, "in_flight": 1.0},
    ],
)
def test_exactly_two_quantities_are_required(given: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="exactly two"):
        littles_law(**given)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_invalid_value_is_named_in_the_error(bad: float) -> None:
    with pytest.raises(
        ValueError, match=f"arrival_rate_per_s must be finite and >= 0, got {re.escape(repr(bad))}"
    ):
        littles_law(arrival_rate_per_s=bad, residence_time_s=1.0)


def test_zero_rate_cannot_give_a_residence_time() -> None:
    with pytest.raises(ValueError, match="arrival_rate_per_s must be > 0"):
        littles_law(arrival_rate_per_s=0.0, in_flight=3.0)


def test_zero_residence_time_cannot_give_a_rate() -> None:
    with pytest.raises(ValueError, match="residence_time_s must be > 0"):
        littles_law(residence_time_s=0.0, in_flight=3.0)
