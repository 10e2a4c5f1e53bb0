"""Session traffic: turn prompts grow by the history, and the analytic means, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from servesize.core.traffic import FixedLength, GeometricLength, HistogramLength, UniformLength
from servesize.core.traffic.sessions import (
    SessionTraffic,
    session_means,
    session_workload,
    turns_second_moment,
)


def _traffic(turns: object, *, think: float = 2.0) -> SessionTraffic:
    return SessionTraffic(
        sessions_per_s=0.5,
        turns=turns,  # type: ignore[arg-type]
        new_tokens=FixedLength(100),
        output_tokens=FixedLength(50),
        think_time_s=think,
    )


def test_turn_t_prompt_is_the_history_plus_its_new_tokens() -> None:
    # P_t = 100 t + 50 (t - 1): 100, 250, 400, 550.
    w = session_workload(_traffic(FixedLength(4)), num_sessions=3, rng=np.random.default_rng(1))
    assert w.prompt_tokens.tolist() == [100, 250, 400, 550] * 3
    assert w.turn.tolist() == [0, 1, 2, 3] * 3
    assert w.session.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    # The next turn's history (prompt + output) is what each turn leaves cached.
    assert w.prefix is not None
    assert w.prefix.shared_tokens.tolist() == [150, 300, 450, 600] * 3
    assert w.prefix.group.tolist() == w.session.tolist()
    assert w.think_time_s[w.turn == 0].tolist() == [0.0, 0.0, 0.0]
    assert w.next_turn(3) == -1
    assert w.next_turn(4) == 5


def test_history_sums_the_drawn_lengths_of_earlier_turns() -> None:
    t = SessionTraffic(
        sessions_per_s=1.0,
        turns=UniformLength(1, 5),
        new_tokens=UniformLength(1, 90),
        output_tokens=UniformLength(1, 70),
    )
    w = session_workload(t, num_sessions=50, rng=np.random.default_rng(7))
    assert w.prefix is not None
    for s in range(50):
        ids = np.flatnonzero(w.session == s)
        prompts = w.prompt_tokens[ids]
        outputs = w.output_tokens[ids]
        # P_{t+1} - (P_t + o_t) = u_{t+1} >= 1: each prompt starts with the whole history.
        assert np.all(prompts[1:] > prompts[:-1] + outputs[:-1])


def test_mean_isl_of_fixed_turns_by_hand() -> None:
    # Three turns: (100 + 250 + 400) / 3 = 250; history (0 + 150 + 300) / 3 = 150.
    m = session_means(_traffic(FixedLength(3)))
    assert m.input_tokens == pytest.approx(250.0)
    assert m.history_tokens == pytest.approx(150.0)
    assert m.output_tokens == 50.0
    assert m.requests_per_s == pytest.approx(1.5)
    assert m.history_share == pytest.approx(0.6)


def test_mean_isl_of_random_turns_by_hand() -> None:
    # T uniform on {1, 2, 3}: the sessions' prompt sums are 100, 350, 750 (mean 400) over
    # E[T] = 2 requests: 200. History sums 0, 150, 450 → 200 / 2 = 100.
    m = session_means(_traffic(UniformLength(1, 3)))
    assert m.input_tokens == pytest.approx(200.0)
    assert m.history_tokens == pytest.approx(100.0)
    # The drawn workload agrees within sampling error (20,000 sessions).
    w = session_workload(
        _traffic(UniformLength(1, 3)), num_sessions=20_000, rng=np.random.default_rng(3)
    )
    assert float(np.mean(w.prompt_tokens)) == pytest.approx(200.0, rel=0.01)


def test_second_moments() -> None:
    assert turns_second_moment(FixedLength(3)) == 9.0
    assert turns_second_moment(UniformLength(1, 3)) == pytest.approx(14 / 3)
    assert turns_second_moment(HistogramLength.from_values([1, 4], [3.0, 1.0])) == pytest.approx(
        (3 * 1 + 16) / 4
    )
    # Geometric with mean 2 (p = 1/2): E[T²] = (2 - p) / p² = 6.
    assert turns_second_moment(GeometricLength(2.0)) == pytest.approx(6.0)


def test_sessions_start_at_the_session_rate() -> None:
    w = session_workload(_traffic(FixedLength(1)), num_sessions=4000, rng=np.random.default_rng(5))
    gaps = np.diff(w.session_start_s)
    assert float(np.mean(gaps)) == pytest.approx(2.0, rel=0.05)  # 1 / 0.5 sessions per second
    assert w.nominal_rate_per_s == pytest.approx(0.5)


def test_refuses_bad_traffic() -> None:
    with pytest.raises(ValueError, match="sessions_per_s"):
        SessionTraffic(
            sessions_per_s=0.0,
            turns=FixedLength(1),
            new_tokens=FixedLength(1),
            output_tokens=FixedLength(1),
        )
    with pytest.raises(ValueError, match="think_time_s"):
        _traffic(FixedLength(1), think=-1.0)
