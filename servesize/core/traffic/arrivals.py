"""Open-loop arrival processes as unit-rate skeletons (common random numbers).

An arrival stream at rate ``λ`` is ``U / λ`` where ``U`` is a *unit-rate skeleton*: the cumulative
sum of i.i.d. inter-arrival gaps with mean 1. Drawing ``U`` once per seed and rescaling it for
every probed rate makes simulated metrics (nearly) monotone in ``λ``, which keeps a bisection on
the rate stable (docs/modeling.md §3.6; Vidur and DistServe fix the seed for the same reason).

The first request is sent at ``t = 0`` and request ``k`` at ``Σ_{i<k} gap_i``, as a benchmark
client does (vLLM bench sends, then sleeps).

================  ====================================================================
``poisson``       exponential gaps, ``c_a² = 1``
``gamma``         gamma gaps with shape ``k = 1 / cv²`` (vLLM bench ``--burstiness k``)
``constant``      equal gaps, ``c_a² = 0``
================  ====================================================================
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

ArrivalProcess = Literal["poisson", "gamma", "constant"]


def unit_rate_arrival_times(
    size: int,
    *,
    process: ArrivalProcess,
    rng: np.random.Generator,
    cv: float = 1.0,
    match_total_duration: bool = False,
) -> np.ndarray:
    """Send times of ``size`` requests at mean rate 1 per unit time.

    Parameters
    ----------
    size : int
        Number of requests (``>= 0``).
    process : {"poisson", "gamma", "constant"}
        Inter-arrival distribution.
    rng : numpy.random.Generator
        Source of randomness (not used for ``"constant"``).
    cv : float
        Coefficient of variation of the gaps for ``"gamma"`` (``> 0``): shape ``k = 1/cv²``,
        scale ``1/k``, so ``c_a² = cv²``. Ignored otherwise.
    match_total_duration : bool
        Rescale the gaps so they sum to exactly ``size`` (unit mean), as vLLM bench does after
        drawing gamma delays (``vllm/benchmarks/serve.py: get_request``). This slightly lowers
        the variance of the stream.

    Returns
    -------
    numpy.ndarray
        Non-decreasing ``float64`` send times; the first is 0.

    Examples
    --------
    >>> unit_rate_arrival_times(4, process="constant", rng=np.random.default_rng(0))
    array([0., 1., 2., 3.])
    """
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
        raise ValueError(f"size must be an integer >= 0, got {size!r}")
    if size == 0:
        return np.zeros(0, dtype=np.float64)
    if process == "poisson":
        gaps = rng.exponential(1.0, size=size)
    elif process == "gamma":
        if not (math.isfinite(cv) and cv > 0):
            raise ValueError(f"cv must be finite and > 0 for gamma arrivals, got {cv}")
        shape = 1.0 / (cv * cv)
        gaps = rng.gamma(shape, 1.0 / shape, size=size)
    elif process == "constant":
        gaps = np.ones(size, dtype=np.float64)
    else:
        raise ValueError(f"unknown arrival process {process!r}")
    if match_total_duration:
        gaps = gaps * (size / float(gaps.sum()))
    times = np.empty(size, dtype=np.float64)
    times[0] = 0.0
    np.cumsum(gaps[:-1], out=times[1:])
    return times


def arrival_times_s(
    size: int,
    *,
    rate_per_s: float,
    process: ArrivalProcess,
    rng: np.random.Generator,
    cv: float = 1.0,
    match_total_duration: bool = False,
) -> np.ndarray:
    """Send times in seconds at ``rate_per_s``: the unit-rate skeleton divided by the rate."""
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ValueError(f"rate_per_s must be finite and > 0, got {rate_per_s}")
    unit = unit_rate_arrival_times(
        size, process=process, rng=rng, cv=cv, match_total_duration=match_total_duration
    )
    return unit / rate_per_s
