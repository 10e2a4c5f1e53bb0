"""The serving-feature flags of ``servesize perf``, ``simulate`` and ``size``: speculative
decoding, a host KV tier, shared prefixes and multi-turn sessions, each as the core takes it
and as the request body field the API takes (``deployment.speculative``,
``deployment.kv_offload``, ``traffic.prefix``, ``traffic.sessions``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from servesize.cli.app import refuse
from servesize.core.memory import KVOffload
from servesize.core.speculative import SpeculativeDecoding
from servesize.core.traffic import FixedLength, PrefixTraffic, SessionTraffic

if TYPE_CHECKING:
    from servesize.core.sizing import SearchSpace, SizingTraffic

__all__ = [
    "AcceptanceRate",
    "KvOffloadGib",
    "NumPrefixes",
    "SessionsPerS",
    "SharedFraction",
    "SharedPrefixTokens",
    "Speculative",
    "SpeculativeTokens",
    "ThinkTimeS",
    "Turns",
    "kv_offload_body",
    "kv_offload_of",
    "point_body",
    "prefix_body",
    "prefix_of",
    "report_candidates",
    "report_traffic",
    "sessions_body",
    "sessions_of",
    "speculative_body",
    "speculative_of",
]

Speculative = Annotated[
    str | None, typer.Option(help="Speculative decoding: eagle3, mtp or ngram.")
]
SpeculativeTokens = Annotated[int, typer.Option(min=1, max=16, help="num_speculative_tokens k")]
AcceptanceRate = Annotated[
    float, typer.Option(min=0.0, max=0.999, help="acceptance rate of each proposed token")
]
KvOffloadGib = Annotated[
    float | None,
    typer.Option(
        "--kv-offload-gib",
        min=1e-3,
        help="Host KV tier: vLLM --kv-offloading-size GiB per replica; SGLang: its "
        "hierarchical cache at --hicache-size of this many GiB per rank.",
    ),
]
SharedPrefixTokens = Annotated[
    int | None, typer.Option(min=1, help="Tokens of a prompt head the requests share.")
]
SharedFraction = Annotated[
    float, typer.Option(min=1e-6, max=1.0, help="Share of requests with a shared head.")
]
NumPrefixes = Annotated[int, typer.Option(min=1, help="Distinct shared heads, used in turn.")]
SessionsPerS = Annotated[
    float | None,
    typer.Option(
        min=1e-6,
        help="Multi-turn sessions started per second (Poisson); --input-tokens are each turn's "
        "new tokens, --output-tokens its answer, the history is resent.",
    ),
]
Turns = Annotated[int, typer.Option(min=1, max=1000, help="Turns per session.")]
ThinkTimeS = Annotated[
    float, typer.Option(min=0.0, help="Mean think time between an answer and the next turn.")
]


def speculative_of(
    method: str | None, tokens: int, acceptance: float
) -> SpeculativeDecoding | None:
    """``--speculative`` as the core's configuration; exits 2 on an unknown method."""
    if method is None:
        return None
    if method not in ("eagle3", "mtp", "ngram"):
        refuse(f"--speculative must be one of eagle3, mtp, ngram, not {method!r}", code=2)
    return SpeculativeDecoding.of(method, tokens, acceptance_rate=acceptance)  # type: ignore[arg-type]


def speculative_body(spec: SpeculativeDecoding | None) -> dict[str, Any] | None:
    """``deployment.speculative`` of ``spec``."""
    if spec is None:
        return None
    return {
        "method": spec.method,
        "num_speculative_tokens": spec.k,
        "acceptance_rate": spec.acceptance[0],
    }


def kv_offload_of(gib: float | None, engine: str) -> KVOffload | None:
    """``--kv-offload-gib`` in the engine's terms: vLLM's GiB per replica, SGLang's GB per
    rank (``⌈GiB · 2^30 / 10^9⌉``); TensorRT-LLM has none (the core refuses it)."""
    if gib is None:
        return None
    if engine == "sglang":
        return KVOffload(hicache_size_gb=max(1, -(-round(gib * 2**30) // 10**9)))
    return KVOffload(size_gib=gib)


def kv_offload_body(offload: KVOffload | None) -> dict[str, Any] | None:
    """``deployment.kv_offload`` of ``offload``."""
    if offload is None:
        return None
    fields = ("size_gib", "backend", "hicache_ratio", "hicache_size_gb")
    return {f: getattr(offload, f) for f in fields if getattr(offload, f) is not None}


def prefix_of(tokens: int | None, fraction: float, prefixes: int) -> PrefixTraffic | None:
    """``--shared-prefix-tokens`` (with ``--shared-fraction``, ``--num-prefixes``)."""
    if tokens is None:
        return None
    return PrefixTraffic(
        shared_prefix_tokens=tokens, shared_fraction=fraction, num_prefixes=prefixes
    )


def prefix_body(prefix: PrefixTraffic | None) -> dict[str, Any] | None:
    """``traffic.prefix`` of ``prefix``."""
    if prefix is None:
        return None
    return {
        "shared_prefix_tokens": prefix.shared_prefix_tokens,
        "shared_fraction": prefix.shared_fraction,
        "num_prefixes": prefix.num_prefixes,
    }


def sessions_of(
    per_s: float | None, *, turns: int, think_time_s: float, new_tokens: int, output_tokens: int
) -> SessionTraffic | None:
    """``--sessions-per-s`` (fixed turns and lengths, exponential think times)."""
    if per_s is None:
        return None
    return SessionTraffic(
        sessions_per_s=per_s,
        turns=FixedLength(turns),
        new_tokens=FixedLength(new_tokens),
        output_tokens=FixedLength(output_tokens),
        think_time_s=think_time_s,
    )


def sessions_body(sessions: SessionTraffic | None, num_sessions: int) -> dict[str, Any] | None:
    """``traffic.sessions`` of ``sessions``."""
    if sessions is None:
        return None
    assert isinstance(sessions.turns, FixedLength)
    assert isinstance(sessions.new_tokens, FixedLength)
    assert isinstance(sessions.output_tokens, FixedLength)
    return {
        "sessions_per_s": sessions.sessions_per_s,
        "num_sessions": num_sessions,
        "turns": sessions.turns.tokens,
        "think_time_s": sessions.think_time_s,
        "new_tokens": sessions.new_tokens.tokens,
        "output_tokens": sessions.output_tokens.tokens,
    }


def point_body(
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    prefix: PrefixTraffic | None,
    sessions: SessionTraffic | None,
) -> dict[str, Any]:
    """The ``/v1/performance`` workload point of the flags (sessions carry their own
    lengths)."""
    out: dict[str, Any] = {"concurrency": concurrency}
    if sessions is not None:
        out["sessions"] = sessions_body(sessions, 1)
        return out
    out |= {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if prefix is not None:
        out["prefix"] = prefix_body(prefix)
    return out


def report_traffic(
    traffic: SizingTraffic, input_tokens: int, output_tokens: int
) -> dict[str, Any] | None:
    """``traffic`` of the ``/v1/sizing`` body of a ``size`` run with sessions or a shared
    prefix (None: the plain forecast)."""
    if traffic.sessions is not None:
        return {"sessions": sessions_body(traffic.sessions, 1)}
    if traffic.prefix is None:
        return None
    return {
        "rate_per_s": traffic.rate_per_s,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "prefix": prefix_body(traffic.prefix),
    }


def report_candidates(space: SearchSpace) -> dict[str, Any]:
    """``candidates.speculative`` and ``candidates.kv_offload`` of a ``size`` run's grids
    (left out when only "without" is searched)."""
    out: dict[str, Any] = {}
    if space.speculative != (None,):
        out["speculative"] = [speculative_body(s) for s in space.speculative]
    if space.kv_offload != (None,):
        out["kv_offload"] = [kv_offload_body(o) for o in space.kv_offload]
    return out
