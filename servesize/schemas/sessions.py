"""Multi-turn session traffic (``traffic.sessions`` of ``/v1/simulate``, ``workload.sessions``
of ``/v1/performance``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from servesize.schemas.base import RequestModel, ResponseModel
from servesize.schemas.lengths import LengthIn

__all__ = ["MAX_SESSIONS", "SessionMeansOut", "SessionsIn", "TurnsIn"]

MAX_SESSIONS = 50_000
MAX_TURNS = 1_000


class _In(RequestModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


class UniformTurnsIn(_In):
    """Turn counts uniform on ``[low_turns, high_turns]``, both ends included."""

    kind: Literal["uniform"]
    low_turns: int = Field(ge=1, le=MAX_TURNS, examples=[1])
    high_turns: int = Field(ge=1, le=MAX_TURNS, examples=[8])

    @model_validator(mode="after")
    def _ordered(self) -> UniformTurnsIn:
        if self.high_turns < self.low_turns:
            raise ValueError(
                f"high_turns ({self.high_turns}) must be >= low_turns ({self.low_turns})"
            )
        return self


class GeometricTurnsIn(_In):
    """``P(T = n) = p (1 − p)^{n−1}`` with ``p = 1 / mean_turns``: after each turn the user
    leaves with probability ``p``."""

    kind: Literal["geometric"]
    mean_turns: float = Field(ge=1, le=MAX_TURNS, examples=[3.0])


TurnsIn = Annotated[
    Annotated[int, Field(ge=1, le=MAX_TURNS)]
    | Annotated[UniformTurnsIn | GeometricTurnsIn, Field(discriminator="kind")],
    Field(examples=[4, {"kind": "geometric", "mean_turns": 3.0}]),
]
"""A fixed number of turns, or ``{"kind": "uniform" | "geometric", ...}``."""


class SessionsIn(_In):
    """Multi-turn sessions (chat, agents): sessions start at ``sessions_per_s`` (Poisson);
    each has ``turns`` turns; turn ``t`` sends the whole history (every earlier prompt and
    answer) plus ``new_tokens`` new tokens, and gets ``output_tokens``; the next turn is sent
    a think time (exponential, mean ``think_time_s``) after the answer's last token. With
    prefix caching on, the history is a cached prefix unless evicted meanwhile."""

    sessions_per_s: float = Field(gt=0, le=100_000, examples=[0.5])
    """Mean new sessions per second."""
    num_sessions: int = Field(default=200, ge=1, le=MAX_SESSIONS, examples=[200])
    """Sessions in the run (the requests are their turns, at most 50,000 in all)."""
    turns: TurnsIn = 4
    """Turns per session."""
    think_time_s: float = Field(default=5.0, ge=0, le=86_400, examples=[5.0])
    """Mean pause between an answer and the user's next turn."""
    think_process: Literal["exponential", "constant"] = Field(
        default="exponential", examples=["exponential"]
    )
    new_tokens: LengthIn = Field(
        default=256, examples=[256, {"kind": "lognormal", "mean_tokens": 256.0, "cv": 1.0}]
    )
    """New user tokens per turn (after the history)."""
    output_tokens: LengthIn = Field(default=256, examples=[256])
    """Output tokens per turn."""


class SessionMeansOut(ResponseModel):
    """What the steady-state tier takes for session traffic: per-request means over the turns
    (``mean ISL = (ū E[T(T+1)] + ō E[T(T−1)]) / (2 E[T])``), the history share a warm prefix
    cache serves (``(ū + ō) E[T(T−1)] / (2 E[T])`` over the mean ISL) and the request rate
    ``λ_sess E[T]``. The approximation: one fixed-length request of the mean lengths, the
    history always resident (an upper bound on the cache's saving; the simulator tracks
    evictions during think times)."""

    mean_turns: float = Field(examples=[4.0])
    input_tokens: float = Field(examples=[1024.0])
    output_tokens: float = Field(examples=[256.0])
    history_tokens: float = Field(examples=[768.0])
    history_share: float = Field(examples=[0.75])
    requests_per_s: float = Field(examples=[2.0])
