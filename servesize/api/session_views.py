"""Session traffic in the steady-state tier: ``workload.sessions`` of ``/v1/performance`` as
the equivalent fixed-length point (:func:`servesize.core.traffic.session_means`)."""

from __future__ import annotations

from servesize.api.resolved import ResolvedReplica
from servesize.api.simulation_runner import session_traffic
from servesize.core.traffic import session_means
from servesize.schemas.performance import WorkloadPoint
from servesize.schemas.prefix import PrefixIn
from servesize.schemas.sessions import SessionMeansOut

__all__ = ["session_point"]


def session_point(
    built: ResolvedReplica, work: WorkloadPoint
) -> tuple[WorkloadPoint, SessionMeansOut | None]:
    """``work`` with its sessions replaced by their per-request means: ``input_tokens`` the
    rounded mean ISL, ``output_tokens`` the rounded mean OSL, and the history as a measured
    hit rate ``history / ISL`` (the history taken as always resident); unchanged without
    sessions."""
    spec = work.sessions
    if spec is None:
        return work, None
    means = session_means(session_traffic(spec, built.memory.max_model_len))
    isl = max(1, round(means.input_tokens))
    point = work.model_copy(
        update={
            "input_tokens": isl,
            "output_tokens": max(1, round(means.output_tokens)),
            "prefix": PrefixIn(cache_hit_rate=min(1.0, means.history_tokens / isl))
            if means.history_tokens > 0
            else None,
            "sessions": None,
        }
    )
    out = SessionMeansOut(
        mean_turns=means.mean_turns,
        input_tokens=means.input_tokens,
        output_tokens=means.output_tokens,
        history_tokens=means.history_tokens,
        history_share=means.history_share,
        requests_per_s=means.requests_per_s,
    )
    return point, out
