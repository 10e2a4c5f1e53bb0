"""Workloads: who sends which request when, for the simulator.

Two shapes, both plain arrays indexed by request id (ids are assigned in send order):

* :class:`OpenLoopWorkload` — send times are fixed in advance (Poisson, gamma, constant or a
  replayed trace). Offered load does not react to the service.
* :class:`ClosedLoopWorkload` — ``clients`` users each wait for their previous request to end,
  think, then send the next one (``think_time_s[j]`` precedes request ``j``). By the response
  time law ``X = N / (R + Z)`` the offered load *falls* as the service slows, so a closed loop
  can hide overload (Schroeder, Wierman, Harchol-Balter, NSDI'06).

Both carry the measurement window as request counts: the first ``warmup_requests`` and the last
``cooldown_requests`` (in send order) keep the system loaded but are not measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from servesize.core.traffic.arrivals import ArrivalProcess, unit_rate_arrival_times
from servesize.core.traffic.lengths import LengthDistribution
from servesize.core.traffic.prefix import PrefixAssignment, PrefixTraffic, assign_prefixes
from servesize.core.traffic.sessions import SessionWorkload

ThinkProcess = Literal["constant", "exponential"]

CLOSED_LOOP_WARNING = (
    "closed loop: each client waits for its previous request, so the offered load falls as the "
    "service slows (X = N / (R + Z)); overload shows up as latency, not as a growing queue. "
    "Compare with an open-loop run at the measured throughput."
)


def _as_lengths(name: str, values: np.ndarray) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if (
        arr.size
        and not np.issubdtype(arr.dtype, np.integer)
        and (not np.all(np.isfinite(arr)) or np.any(arr != np.rint(arr)))
    ):
        raise ValueError(f"{name} must hold integers")
    out = arr.astype(np.int64)
    if out.size and out.min() < 1:
        raise ValueError(f"{name} must be >= 1 token, got min {int(out.min())}")
    return out


def _as_timeouts(timeout_s: float | np.ndarray, size: int) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(timeout_s, dtype=np.float64), (size,)).copy()
    if np.any(np.isnan(arr)) or np.any(arr <= 0):
        raise ValueError("timeout_s must be > 0 (use inf for no timeout)")
    return arr


def _check_window(size: int, warmup: int, cooldown: int) -> None:
    for name, value in (("warmup_requests", warmup), ("cooldown_requests", cooldown)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if size - warmup - cooldown < 1:
        raise ValueError(
            f"no request left to measure: {size} requests, {warmup} warm-up, {cooldown} cool-down"
        )


def _check_prefix(prefix: PrefixAssignment | None, size: int) -> None:
    if prefix is not None and (prefix.group.size != size or prefix.shared_tokens.size != size):
        raise ValueError(f"the prefix assignment must cover the {size} requests")


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenLoopWorkload:
    """Requests with fixed send times.

    Attributes
    ----------
    arrival_s : numpy.ndarray
        Send times, non-decreasing, ``float64``.
    prompt_tokens, output_tokens : numpy.ndarray
        Lengths per request (``int64``, ``>= 1``).
    timeout_s : numpy.ndarray
        Client timeout per request, measured from the send time (``inf`` for none).
    nominal_rate_per_s : float
        The rate the send times were generated at (for a trace, ``(n - 1) / span``).
    warmup_requests, cooldown_requests : int
        Requests at the start and end (send order) that load the system but are not measured.
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    timeout_s: np.ndarray
    nominal_rate_per_s: float
    warmup_requests: int = 0
    cooldown_requests: int = 0
    prefix: PrefixAssignment | None = None
    """Shared prefixes per request (:mod:`servesize.core.traffic.prefix`); None: none shared."""

    def __post_init__(self) -> None:
        arrival = np.asarray(self.arrival_s, dtype=np.float64)
        size = arrival.size
        if arrival.ndim != 1 or size == 0:
            raise ValueError("arrival_s must be a non-empty one-dimensional array")
        if not np.all(np.isfinite(arrival)) or np.any(np.diff(arrival) < 0):
            raise ValueError("arrival_s must be finite and non-decreasing")
        prompt = _as_lengths("prompt_tokens", self.prompt_tokens)
        output = _as_lengths("output_tokens", self.output_tokens)
        if prompt.size != size or output.size != size:
            raise ValueError(
                f"lengths must match arrival_s ({size}): prompt {prompt.size}, output {output.size}"
            )
        if not (math.isfinite(self.nominal_rate_per_s) and self.nominal_rate_per_s > 0):
            raise ValueError(f"nominal_rate_per_s must be > 0, got {self.nominal_rate_per_s}")
        _check_window(size, self.warmup_requests, self.cooldown_requests)
        _check_prefix(self.prefix, size)
        object.__setattr__(self, "arrival_s", arrival)
        object.__setattr__(self, "prompt_tokens", prompt)
        object.__setattr__(self, "output_tokens", output)
        object.__setattr__(self, "timeout_s", _as_timeouts(self.timeout_s, size))

    @property
    def num_requests(self) -> int:
        """Total number of requests, warm-up and cool-down included."""
        return int(self.arrival_s.size)

    def with_rate(self, rate_per_s: float) -> OpenLoopWorkload:
        """The same requests with every send time scaled by ``nominal_rate / rate_per_s``.

        This is the common-random-numbers rescaling: lengths, timeouts and the window are kept.
        """
        if not (math.isfinite(rate_per_s) and rate_per_s > 0):
            raise ValueError(f"rate_per_s must be finite and > 0, got {rate_per_s}")
        factor = self.nominal_rate_per_s / rate_per_s
        return replace(self, arrival_s=self.arrival_s * factor, nominal_rate_per_s=rate_per_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedLoopWorkload:
    """``clients`` users who send request ``j`` ``think_time_s[j]`` after their previous one ends.

    The first ``clients`` requests are sent at ``think_time_s[j]`` (from ``t = 0``); after that
    request ids go to whichever user frees up next. A request *ends* for its user when the last
    token arrives, when it is rejected, or at its timeout.

    Attributes
    ----------
    clients : int
        Number of concurrent users ``N``.
    think_time_s : numpy.ndarray
        Think time ``Z`` before each request (``>= 0``).
    prompt_tokens, output_tokens, timeout_s : numpy.ndarray
        As for :class:`OpenLoopWorkload`.
    warmup_requests, cooldown_requests : int
        Unmeasured requests at the start and end (send order).
    """

    clients: int
    think_time_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    timeout_s: np.ndarray
    warmup_requests: int = 0
    cooldown_requests: int = 0
    prefix: PrefixAssignment | None = None
    """Shared prefixes per request (:mod:`servesize.core.traffic.prefix`); None: none shared."""

    def __post_init__(self) -> None:
        if isinstance(self.clients, bool) or not isinstance(self.clients, int) or self.clients < 1:
            raise ValueError(f"clients must be an integer >= 1, got {self.clients!r}")
        prompt = _as_lengths("prompt_tokens", self.prompt_tokens)
        output = _as_lengths("output_tokens", self.output_tokens)
        size = prompt.size
        if size == 0 or output.size != size:
            raise ValueError(
                f"prompt_tokens and output_tokens must be non-empty and equal in length "
                f"({prompt.size} vs {output.size})"
            )
        think = np.broadcast_to(np.asarray(self.think_time_s, dtype=np.float64), (size,)).copy()
        if not np.all(np.isfinite(think)) or np.any(think < 0):
            raise ValueError("think_time_s must be finite and >= 0")
        _check_window(size, self.warmup_requests, self.cooldown_requests)
        _check_prefix(self.prefix, size)
        object.__setattr__(self, "prompt_tokens", prompt)
        object.__setattr__(self, "output_tokens", output)
        object.__setattr__(self, "think_time_s", think)
        object.__setattr__(self, "timeout_s", _as_timeouts(self.timeout_s, size))

    @property
    def num_requests(self) -> int:
        """Total number of requests, warm-up and cool-down included."""
        return int(self.prompt_tokens.size)


Workload = OpenLoopWorkload | ClosedLoopWorkload | SessionWorkload


def with_prefixes(workload: Workload, traffic: PrefixTraffic | None) -> Workload:
    """``workload`` with every request's shared prefix (:func:`~.prefix.assign_prefixes`);
    unchanged for None."""
    if traffic is None:
        return workload
    return replace(workload, prefix=assign_prefixes(traffic, workload.prompt_tokens))


def open_loop_workload(
    *,
    num_requests: int,
    rate_per_s: float,
    input_tokens: LengthDistribution,
    output_tokens: LengthDistribution,
    rng: np.random.Generator,
    process: ArrivalProcess = "poisson",
    cv: float = 1.0,
    timeout_s: float = math.inf,
    warmup_requests: int = 0,
    cooldown_requests: int = 0,
    match_total_duration: bool = False,
) -> OpenLoopWorkload:
    """Draw an open-loop workload.

    The arrival skeleton, prompt lengths and output lengths come from three independent child
    generators (``rng.spawn(3)``), so changing the arrival process or ``cv`` leaves the lengths
    unchanged for the same seed.

    Examples
    --------
    >>> from servesize.core.traffic.lengths import FixedLength
    >>> w = open_loop_workload(num_requests=3, rate_per_s=2.0, process="constant",
    ...     input_tokens=FixedLength(8), output_tokens=FixedLength(4),
    ...     rng=np.random.default_rng(0))
    >>> w.arrival_s
    array([0. , 0.5, 1. ])
    """
    arrival_rng, input_rng, output_rng = rng.spawn(3)
    unit = unit_rate_arrival_times(
        num_requests,
        process=process,
        rng=arrival_rng,
        cv=cv,
        match_total_duration=match_total_duration,
    )
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ValueError(f"rate_per_s must be finite and > 0, got {rate_per_s}")
    return OpenLoopWorkload(
        arrival_s=unit / rate_per_s,
        prompt_tokens=input_tokens.sample(num_requests, input_rng),
        output_tokens=output_tokens.sample(num_requests, output_rng),
        timeout_s=np.full(num_requests, timeout_s),
        nominal_rate_per_s=rate_per_s,
        warmup_requests=warmup_requests,
        cooldown_requests=cooldown_requests,
    )


def trace_workload(
    *,
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    timeout_s: float | np.ndarray = math.inf,
    warmup_requests: int = 0,
    cooldown_requests: int = 0,
) -> OpenLoopWorkload:
    """Replay a trace: send times and lengths given as arrays (sorted by send time here).

    ``nominal_rate_per_s`` is ``(n - 1) / (last - first)`` (1.0 for a single request or a
    zero-length span), so :meth:`OpenLoopWorkload.with_rate` rescales the trace to a new mean rate.
    """
    arrival = np.asarray(arrival_s, dtype=np.float64)
    if arrival.ndim != 1 or arrival.size == 0:
        raise ValueError("arrival_s must be a non-empty one-dimensional array")
    order = np.argsort(arrival, kind="stable")
    prompt = np.asarray(prompt_tokens)
    output = np.asarray(output_tokens)
    if prompt.shape != arrival.shape or output.shape != arrival.shape:
        raise ValueError("prompt_tokens and output_tokens must match arrival_s in shape")
    timeouts = np.broadcast_to(np.asarray(timeout_s, dtype=np.float64), arrival.shape)
    span = float(arrival.max() - arrival.min())
    rate = (arrival.size - 1) / span if span > 0 else 1.0
    return OpenLoopWorkload(
        arrival_s=arrival[order],
        prompt_tokens=prompt[order],
        output_tokens=output[order],
        timeout_s=timeouts[order],
        nominal_rate_per_s=rate,
        warmup_requests=warmup_requests,
        cooldown_requests=cooldown_requests,
    )


def closed_loop_workload(
    *,
    clients: int,
    num_requests: int,
    input_tokens: LengthDistribution,
    output_tokens: LengthDistribution,
    rng: np.random.Generator,
    think_time_s: float = 0.0,
    think_process: ThinkProcess = "constant",
    timeout_s: float = math.inf,
    warmup_requests: int = 0,
    cooldown_requests: int = 0,
) -> ClosedLoopWorkload:
    """Draw a closed-loop workload: ``clients`` users, ``num_requests`` requests in total.

    ``think_process="exponential"`` draws think times with mean ``think_time_s``; ``"constant"``
    uses ``think_time_s`` for every request.
    """
    think_rng, input_rng, output_rng = rng.spawn(3)
    if not (math.isfinite(think_time_s) and think_time_s >= 0):
        raise ValueError(f"think_time_s must be finite and >= 0, got {think_time_s}")
    if think_process == "constant":
        think = np.full(num_requests, think_time_s, dtype=np.float64)
    elif think_process == "exponential":
        think = think_rng.exponential(think_time_s, size=num_requests)
    else:
        raise ValueError(f"unknown think_process {think_process!r}")
    return ClosedLoopWorkload(
        clients=clients,
        think_time_s=think,
        prompt_tokens=input_tokens.sample(num_requests, input_rng),
        output_tokens=output_tokens.sample(num_requests, output_rng),
        timeout_s=np.full(num_requests, timeout_s),
        warmup_requests=warmup_requests,
        cooldown_requests=cooldown_requests,
    )
