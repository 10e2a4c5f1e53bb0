"""The batch chain: prompts arriving during a step are prefilled together in the next one."""

import numpy as np
import pytest

from servesize.core.steptime.batchchain import batch_chain, linear_chain_mean_ttft_s


@pytest.mark.parametrize(
    ("decode_s", "prefill_s", "rate_per_s"),
    [(0.01, 0.02, 10.0), (0.008, 0.0185, 30.0), (0.03, 0.002, 100.0), (0.005, 0.03, 1.0)],
)
def test_solved_chain_matches_the_closed_form_for_linear_steps(
    decode_s: float, prefill_s: float, rate_per_s: float
) -> None:
    # T_k = d + s·k with room for 120 prompts: the cap is never reached, and the stationary
    # law has mean d/(1 − λs) and variance s²λm/(1 − λ²s²) (worked out in the docstring).
    k = np.arange(121.0)
    chain = batch_chain((decode_s + prefill_s * k)[None, :], np.array([rate_per_s]))
    expected = linear_chain_mean_ttft_s(decode_s, prefill_s, rate_per_s)
    assert float(chain.mean_s()[0]) == pytest.approx(expected, rel=1e-9)
    assert float(np.sum(chain.weight)) == pytest.approx(1.0, abs=1e-12)


def test_a_lone_arrival_waits_a_uniform_part_of_a_decode_step_then_its_own_step() -> None:
    # λ → 0: every step is decode-only (T_0 = 10 ms) and the next one carries the request
    # alone (T_1 = 30 ms): TTFT = U·T_0 + T_1, so its q-quantile is T_1 + q·T_0.
    step = np.array([[0.010, 0.030, 0.050, 0.070]])
    chain = batch_chain(step, np.array([1e-9]))
    assert float(chain.mean_s()[0]) == pytest.approx(0.030 + 0.005, rel=1e-6)
    for q in (0.25, 0.5, 0.95):
        assert float(chain.quantile_s(q)[0]) == pytest.approx(0.030 + q * 0.010, rel=1e-6)


def test_the_cap_bounds_the_next_step() -> None:
    # A budget of two prompts: however many arrive, the next step carries at most two, so
    # TTFT <= T_2 + the longest step a request can land in (T_2).
    step = np.array([[0.01, 0.03, 0.05, 0.07, 0.09]])
    chain = batch_chain(step, np.array([200.0]), cap=np.array([2]))
    assert float(np.sum(chain.weight[0, 3:])) == pytest.approx(0.0, abs=1e-12)
    assert float(chain.quantile_s(0.9999)[0]) <= 0.05 + 0.05 + 1e-9
    assert float(chain.cdf(np.array([0.05 + 0.05]))[0]) == pytest.approx(1.0, abs=1e-9)


def test_the_tail_grows_faster_than_the_mean_with_load() -> None:
    # Long steps draw more prompts into the next step: p95 − mean widens with the rate.
    k = np.arange(41.0)
    step = (0.008 + 0.0185 * k)[None, :].repeat(3, axis=0)
    chain = batch_chain(step, np.array([5.0, 20.0, 40.0]))
    spread = chain.quantile_s(0.95) - chain.mean_s()
    assert spread[0] < spread[1] < spread[2]
