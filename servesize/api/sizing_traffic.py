"""The sizing request's forecast and serving-feature grids as the core takes them: open-loop
traffic with its shared prefixes or multi-turn sessions (``traffic``), and the speculative
decoding and KV offload options of ``candidates`` (``docs/modeling.md`` §3.11)."""

from __future__ import annotations

import math

from servesize.api.errors import UnprocessableError
from servesize.api.simulation_runner import length_distribution, min_tokens, session_traffic
from servesize.core.memory import KVOffload
from servesize.core.sizing import SizingTraffic, default_max_model_len, upper_tokens
from servesize.core.speculative import SpeculativeDecoding
from servesize.schemas.prefix import prefix_traffic
from servesize.schemas.sessions import SessionsIn, UniformTurnsIn
from servesize.schemas.sizing import CandidatesIn, SizingTrafficIn
from servesize.schemas.speculative import speculative_decoding

__all__ = ["default_length", "feature_grids", "sizing_traffic"]

GEOMETRIC_TURNS_MULTIPLE = 4
"""A geometric turn count is taken to end by four times its mean (``P(T > 4/p) ≈ e^{-4}``)."""


def _most_turns(spec: SessionsIn) -> int:
    turns = spec.turns
    if isinstance(turns, int):
        return turns
    if isinstance(turns, UniformTurnsIn):
        return turns.high_turns
    return math.ceil(GEOMETRIC_TURNS_MULTIPLE * turns.mean_turns)


def _session_longest(spec: SessionsIn) -> int:
    """The last turn of the longest session: ``T_max · (u_max + o_max)`` tokens."""
    return _most_turns(spec) * (upper_tokens(spec.new_tokens) + upper_tokens(spec.output_tokens))


def default_length(traffic: SizingTrafficIn) -> int:
    """The searched ``max_model_len`` when none is given: the smallest power of two (at least
    2048) that holds the longest request, or the longest session's last turn."""
    if traffic.sessions is None:
        return default_max_model_len(traffic.input_tokens, traffic.output_tokens)
    return default_max_model_len(_session_longest(traffic.sessions), 0)


def sizing_traffic(traffic: SizingTrafficIn, clip: int) -> SizingTraffic:
    """The forecast, its lengths clipped so that a prompt and an output fit in ``clip``."""
    timeout = traffic.timeout_s if traffic.timeout_s is not None else math.inf
    if traffic.sessions is not None:
        return SizingTraffic.of_sessions(
            session_traffic(traffic.sessions, clip),
            timeout_s=timeout,
            seed=traffic.seed,
            longest_request_tokens=_session_longest(traffic.sessions),
        )
    assert traffic.rate_per_s is not None
    return SizingTraffic(
        rate_per_s=traffic.rate_per_s,
        input_tokens=length_distribution(
            traffic.input_tokens, clip - min_tokens(traffic.output_tokens)
        ),
        output_tokens=length_distribution(
            traffic.output_tokens, clip - min_tokens(traffic.input_tokens)
        ),
        process=traffic.process,
        cv=traffic.cv,
        timeout_s=timeout,
        seed=traffic.seed,
        longest_request_tokens=upper_tokens(traffic.input_tokens)
        + upper_tokens(traffic.output_tokens),
        prefix=prefix_traffic(traffic.prefix),
    )


def feature_grids(
    cand: CandidatesIn,
) -> tuple[tuple[SpeculativeDecoding | None, ...], tuple[KVOffload | None, ...]]:
    """``candidates.speculative`` and ``candidates.kv_offload`` as core options (repeats
    once; unset: without). A separate draft model is not searched (its checkpoint would have
    to be resolved per option): a 422 naming the entry."""
    specs: list[SpeculativeDecoding | None] = []
    for i, spec in enumerate(cand.speculative or [None]):
        if spec is not None and spec.method == "draft_model":
            detail = "sizing searches eagle3, mtp and ngram drafts; draft_model is not searched"
            raise UnprocessableError(
                detail,
                slug="invalid-candidates",
                errors=[
                    {
                        "location": "body",
                        "pointer": f"/candidates/speculative/{i}/method",
                        "detail": detail,
                    }
                ],
            )
        specs.append(speculative_decoding(spec))
    offloads = [
        None if o is None else KVOffload(**o.model_dump()) for o in cand.kv_offload or [None]
    ]
    return tuple(dict.fromkeys(specs)), tuple(dict.fromkeys(offloads))
