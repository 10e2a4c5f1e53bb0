"""The count of other arrivals a request shares its step with (``backlogchain``).

Checked against closed forms (Poisson: the Palm count is the stationary one, Slivnyak's
theorem; a renewal process with gap CV ``c`` over a long window: ``m + c² − 1`` others on
average, Cox 1962 §7.2) and against a Monte Carlo of a gamma renewal process drawn here.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from servesize.core.steptime.backlogchain import _others_seen_by_an_arrival

COUNTS = np.arange(80)


def test_poisson_arrivals_see_the_stationary_count() -> None:
    law = _others_seen_by_an_arrival(np.array([[0.6, 4.0]]), COUNTS, 1.0)
    for i, m in enumerate((0.6, 4.0)):
        assert np.allclose(law[0, i], stats.poisson.pmf(COUNTS, m), atol=1e-12)


def test_long_steps_see_c_squared_minus_one_more() -> None:
    m = 30.0
    law = _others_seen_by_an_arrival(np.array([[m]]), COUNTS, 2.0)[0, 0]
    assert abs(float(np.sum(law * COUNTS)) - (m + 4.0 - 1.0)) < 0.05


def test_gamma_renewal_monte_carlo() -> None:
    # Gamma gaps of CV 2 (shape 1/4) at 10 arrivals/s; a step of 0.06 s centred on each
    # arrival (the tagged request at its mean position) counts the others inside it.
    rng = np.random.default_rng(7)
    rate, cv, step = 10.0, 2.0, 0.06
    shape = 1.0 / cv**2
    times = np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), size=400_000))
    tags = times[1000:-1000]
    lo = np.searchsorted(times, tags - step / 2, side="left")
    hi = np.searchsorted(times, tags + step / 2, side="right")
    others = hi - lo - 1
    simulated = np.bincount(others, minlength=COUNTS.size)[: COUNTS.size] / others.size
    law = _others_seen_by_an_arrival(np.array([[rate * step]]), COUNTS, cv)[0, 0]
    assert abs(float(np.sum(law * COUNTS)) - float(others.mean())) < 0.05
    assert np.max(np.abs(law[:10] - simulated[:10])) < 0.01
    # Far more than the 0.6 others a Poisson stream of the same rate would put there.
    assert others.mean() > 1.5
