"""Multi-turn sessions: conversations whose every turn resends the whole history.

Sessions start by an open-loop arrival process at ``sessions_per_s`` (Poisson by default); each
has ``T`` turns (a length distribution over turn counts). Turn ``t`` (from 1) sends ``u_t`` new
user tokens after the full history, so its prompt is

``P_t = Σ_{k ≤ t} u_k + Σ_{k < t} o_k``

(``o_k`` the output tokens of turn ``k``: the history is every earlier prompt and answer, as a
chat client resends it; the chat template's own tokens are taken to be inside ``u``). Turn
``t + 1`` is sent a think time ``Z`` (exponential with mean ``think_time_s``, or constant) after
turn ``t``'s last token reached the client: closed loop within a session, open loop across
sessions.

Prefix structure: every turn of session ``s`` is in prefix group ``s`` and covers its prompt and
output (``P_t + o_t``), which is the next turn's history; an engine that caches prefixes keeps
those blocks as the turn decodes (vLLM ``KVCacheManager.cache_blocks`` caches generated tokens'
full blocks too; SGLang ``RadixCache.cache_finished_req`` inserts prompt plus output), so the
next turn finds its history cached unless it was evicted during the think time.

Request ids run session by session (sessions in start order, turns in order), so warm-up and
cool-down counted in requests take whole early and late sessions.

Steady-state means for the analytic tier (:func:`session_means`), with ``u``, ``o`` i.i.d. per
turn and independent of ``T``: ``E[Σ_t P_t | T] = ū T(T+1)/2 + ō T(T−1)/2``, so over requests

``mean ISL = (ū E[T(T+1)] + ō E[T(T−1)]) / (2 E[T])``, ``mean history = (ū + ō) E[T(T−1)] /
(2 E[T])``, request rate ``λ_req = λ_sess E[T]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servesize.core.traffic.arrivals import ArrivalProcess, unit_rate_arrival_times
from servesize.core.traffic.lengths import (
    FixedLength,
    GeometricLength,
    HistogramLength,
    LengthDistribution,
    UniformLength,
)
from servesize.core.traffic.prefix import PrefixAssignment

__all__ = [
    "SessionMeans",
    "SessionTraffic",
    "SessionWorkload",
    "session_means",
    "session_workload",
    "turns_second_moment",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTraffic:
    """Multi-turn session traffic (module docstring)."""

    sessions_per_s: float
    turns: LengthDistribution
    new_tokens: LengthDistribution
    output_tokens: LengthDistribution
    think_time_s: float = 0.0
    think_process: str = "exponential"
    process: ArrivalProcess = "poisson"
    cv: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.sessions_per_s) and self.sessions_per_s > 0):
            raise ValueError(f"sessions_per_s must be finite and > 0, got {self.sessions_per_s}")
        if not (math.isfinite(self.think_time_s) and self.think_time_s >= 0):
            raise ValueError(f"think_time_s must be finite and >= 0, got {self.think_time_s}")
        if self.think_process not in ("constant", "exponential"):
            raise ValueError(f"unknown think_process {self.think_process!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionWorkload:
    """The requests of a session run, indexed by request id (session-major).

    Attributes
    ----------
    session, turn : numpy.ndarray
        Session index (in start order) and turn index (from 0) of every request.
    session_start_s : numpy.ndarray
        Send time of each session's first turn (non-decreasing).
    think_time_s : numpy.ndarray
        Pause before each request after its predecessor ended (0 for first turns).
    prompt_tokens, output_tokens, timeout_s : numpy.ndarray
        As for :class:`~servesize.core.traffic.workload.OpenLoopWorkload`.
    prefix : PrefixAssignment
        Group = session, covered tokens = prompt + output (the next turn's history).
    """

    session: np.ndarray
    turn: np.ndarray
    session_start_s: np.ndarray
    think_time_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    timeout_s: np.ndarray
    nominal_rate_per_s: float
    warmup_requests: int = 0
    cooldown_requests: int = 0
    prefix: PrefixAssignment | None = None

    def __post_init__(self) -> None:
        size = int(self.prompt_tokens.size)
        if size - self.warmup_requests - self.cooldown_requests < 1:
            raise ValueError(
                f"no request left to measure: {size} requests, {self.warmup_requests} warm-up, "
                f"{self.cooldown_requests} cool-down"
            )
        object.__setattr__(
            self,
            "timeout_s",
            np.broadcast_to(np.asarray(self.timeout_s, dtype=np.float64), (size,)).copy(),
        )

    @property
    def num_requests(self) -> int:
        """Total requests (turns of every session)."""
        return int(self.prompt_tokens.size)

    @property
    def num_sessions(self) -> int:
        """Sessions in the run."""
        return int(self.session_start_s.size)

    def first_turns(self) -> np.ndarray:
        """Request ids of every session's first turn (in start order)."""
        return np.flatnonzero(self.turn == 0)

    def next_turn(self, r: int) -> int:
        """The request that follows ``r`` in its session (-1 after the last turn)."""
        n = r + 1
        return n if n < self.session.size and self.session[n] == self.session[r] else -1


def session_workload(
    traffic: SessionTraffic,
    *,
    num_sessions: int,
    rng: np.random.Generator,
    timeout_s: float = math.inf,
    warmup_requests: int = 0,
    cooldown_requests: int = 0,
) -> SessionWorkload:
    """Draw ``num_sessions`` sessions (module docstring). Start times, turn counts, new tokens,
    output tokens and think times come from five independent child generators."""
    if isinstance(num_sessions, bool) or not isinstance(num_sessions, int) or num_sessions < 1:
        raise ValueError(f"num_sessions must be an integer >= 1, got {num_sessions!r}")
    start_rng, turns_rng, new_rng, out_rng, think_rng = rng.spawn(5)
    start = unit_rate_arrival_times(
        num_sessions, process=traffic.process, rng=start_rng, cv=traffic.cv
    )
    start = start / traffic.sessions_per_s
    turns = traffic.turns.sample(num_sessions, turns_rng)
    size = int(turns.sum())
    session = np.repeat(np.arange(num_sessions, dtype=np.int64), turns)
    first = np.concatenate(([0], np.cumsum(turns)[:-1])).astype(np.int64)
    turn = np.arange(size, dtype=np.int64) - first[session]
    new = traffic.new_tokens.sample(size, new_rng)
    out = traffic.output_tokens.sample(size, out_rng)
    # P_t = Σ_{k<=t} u_k + Σ_{k<t} o_k within the session: a running sum reset per session.
    step = new + np.concatenate(([0], out[:-1]))
    step[first] = new[first]
    total = np.cumsum(step)
    prompt = total - np.repeat(total[first] - new[first], turns)
    if traffic.think_process == "constant":
        think = np.full(size, traffic.think_time_s)
    else:
        think = think_rng.exponential(traffic.think_time_s, size=size)
    think[first] = 0.0
    mean_turns = traffic.turns.mean_tokens
    return SessionWorkload(
        session=session,
        turn=turn,
        session_start_s=start,
        think_time_s=think,
        prompt_tokens=prompt.astype(np.int64),
        output_tokens=out.astype(np.int64),
        timeout_s=np.full(size, timeout_s),
        nominal_rate_per_s=traffic.sessions_per_s * mean_turns,
        warmup_requests=warmup_requests,
        cooldown_requests=cooldown_requests,
        prefix=PrefixAssignment(group=session.copy(), shared_tokens=(prompt + out)),
    )


def turns_second_moment(turns: LengthDistribution) -> float:
    """``E[T²]`` of a turn-count distribution: fixed ``n²``; uniform on ``[a, b]``
    ``(Σ k²)/(b − a + 1)``; a histogram bin by bin; geometric ``(2 − p)/p²``."""
    if isinstance(turns, FixedLength):
        return float(turns.tokens) ** 2
    if isinstance(turns, UniformLength):
        k = np.arange(turns.low_tokens, turns.high_tokens + 1, dtype=np.float64)
        return float(np.mean(k * k))
    if isinstance(turns, HistogramLength):
        edges = turns.bin_edges_tokens
        weights = np.asarray(turns.counts, dtype=np.float64)
        weights = weights / weights.sum()
        second = 0.0
        for w, lo, hi in zip(weights.tolist(), edges[:-1], edges[1:], strict=True):
            k = np.arange(lo, hi, dtype=np.float64)
            second += w * float(np.mean(k * k))
        return second
    if isinstance(turns, GeometricLength):
        return turns.second_moment_tokens2
    raise ValueError("turns must be fixed, uniform, a histogram or geometric")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMeans:
    """Per-request means of a session workload (module docstring)."""

    mean_turns: float
    input_tokens: float
    output_tokens: float
    history_tokens: float
    """Mean prompt tokens that are history (a cache hit when it stays resident)."""
    requests_per_s: float

    @property
    def history_share(self) -> float:
        """``history / ISL``: the prompt share a warm prefix cache serves."""
        return self.history_tokens / self.input_tokens


def session_means(traffic: SessionTraffic) -> SessionMeans:
    """``mean ISL``, ``mean history`` and ``λ_req`` of ``traffic`` (module docstring).

    Examples
    --------
    >>> m = session_means(SessionTraffic(sessions_per_s=0.5, turns=FixedLength(3),
    ...     new_tokens=FixedLength(100), output_tokens=FixedLength(50)))
    >>> round(m.input_tokens, 9), round(m.history_tokens, 9), m.requests_per_s
    (250.0, 150.0, 1.5)
    """
    e_t = traffic.turns.mean_tokens
    e_t2 = turns_second_moment(traffic.turns)
    u, o = traffic.new_tokens.mean_tokens, traffic.output_tokens.mean_tokens
    up = (e_t2 + e_t) / 2.0  # E[T(T+1)/2]
    down = (e_t2 - e_t) / 2.0  # E[T(T-1)/2]
    return SessionMeans(
        mean_turns=e_t,
        input_tokens=(u * up + o * down) / e_t,
        output_tokens=o,
        history_tokens=(u + o) * down / e_t,
        requests_per_s=traffic.sessions_per_s * e_t,
    )
