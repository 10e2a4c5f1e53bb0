"""Shared-prefix structure of traffic (``traffic.prefix`` of ``/v1/simulate`` and ``/v1/slo/*``,
``workload.prefix`` of ``/v1/performance``)."""

from __future__ import annotations

from pydantic import Field, model_validator

from servesize.core.replica import PrefixedEstimate
from servesize.core.traffic import PrefixTraffic
from servesize.schemas.base import RequestModel, ResponseModel

__all__ = ["PrefixCacheOut", "PrefixIn", "prefix_traffic"]


class PrefixIn(RequestModel):
    """Prompt heads the requests share, which a prefix cache computes once: a system prompt of
    ``shared_prefix_tokens`` tokens shared by ``shared_fraction`` of the requests, over
    ``num_prefixes`` distinct prompts used in turn — or a measured ``cache_hit_rate`` (the share
    of prompt tokens the engine served from its cache, vLLM's ``prefix_cache_hits /
    prefix_cache_queries``). Give one of ``shared_prefix_tokens`` and ``cache_hit_rate``."""

    shared_prefix_tokens: int | None = Field(default=None, ge=1, le=2**24, examples=[2048])
    """Tokens of the shared head (cut to the prompt where a prompt is shorter)."""
    shared_fraction: float = Field(default=1.0, gt=0.0, le=1.0, examples=[0.8])
    """Share of the requests that start with a shared head."""
    num_prefixes: int = Field(default=1, ge=1, le=1_000_000, examples=[1])
    """Distinct shared heads; the sharing requests use them in turn (round-robin)."""
    cache_hit_rate: float | None = Field(default=None, ge=0.0, le=1.0, examples=[0.6])
    """A measured hit rate instead of the structure above: every request's first
    ``floor(rate · prompt)`` tokens are shared."""

    @model_validator(mode="after")
    def _one_form(self) -> PrefixIn:
        if (self.shared_prefix_tokens is None) == (self.cache_hit_rate is None):
            raise ValueError("give exactly one of shared_prefix_tokens and cache_hit_rate")
        if self.cache_hit_rate is not None and (
            "shared_fraction" in self.model_fields_set or "num_prefixes" in self.model_fields_set
        ):
            raise ValueError(
                "shared_fraction and num_prefixes describe shared_prefix_tokens; "
                "leave them out with cache_hit_rate"
            )
        return self


def prefix_traffic(spec: PrefixIn | None) -> PrefixTraffic | None:
    """The core description of ``spec`` (None: no shared prefixes)."""
    if spec is None:
        return None
    if spec.cache_hit_rate is not None:
        return PrefixTraffic(cache_hit_rate=spec.cache_hit_rate)
    assert spec.shared_prefix_tokens is not None
    return PrefixTraffic(
        shared_prefix_tokens=spec.shared_prefix_tokens,
        shared_fraction=spec.shared_fraction,
        num_prefixes=spec.num_prefixes,
    )


class PrefixCacheOut(ResponseModel):
    """Steady-state prefix cache of a workload point (``docs/modeling.md`` §3.14): the prompt
    tokens a request finds cached and the KV blocks of the pool, split into those running
    requests hold (``pinned_blocks``, a shared prefix counted once) and the cached prefix blocks
    no running request holds (``evictable_blocks``: free to reuse, kept until the pool needs
    them)."""

    hit_tokens_per_request: float = Field(examples=[1024.0])
    """Expected prompt tokens served from the cache (whole blocks, the last token recomputed)."""
    hit_probability: float = Field(examples=[1.0])
    """Chance that a sharing request's prefix is resident (Che's LRU approximation)."""
    prefill_tokens_per_request: int = Field(examples=[1000])
    """Prompt tokens the estimate prefills per request (``input_tokens`` less the hits)."""
    decode_context_s: float = Field(examples=[0.0004])
    """Added to TPOT: the decode step's attention over the cached prefix."""
    working_set_blocks: int = Field(examples=[128])
    """Blocks of every distinct shared prefix."""
    cache_blocks: int = Field(examples=[20000])
    """Pool blocks beside the running batch."""
    pinned_blocks: int = Field(examples=[9000])
    evictable_blocks: int = Field(examples=[0])
    host_hit_tokens_per_request: float = Field(default=0.0, examples=[0.0])
    """Of the hits, the tokens a host KV tier (``deployment.kv_offload``) loads back."""
    host_load_s: float = Field(default=0.0, examples=[0.0])
    """Per request, the time those host hits take over the host link."""

    @classmethod
    def of(cls, prefixed: PrefixedEstimate) -> PrefixCacheOut | None:
        """The figures of ``prefixed`` (None when no cache acted)."""
        c = prefixed.cache
        if c is None:
            return None
        return cls(
            hit_tokens_per_request=c.hit_tokens_per_request,
            hit_probability=c.hit_probability,
            prefill_tokens_per_request=int(prefixed.estimate.input_tokens[0]) - prefixed.hit_tokens,
            decode_context_s=prefixed.decode_context_s,
            working_set_blocks=c.working_set_blocks,
            cache_blocks=c.cache_blocks,
            pinned_blocks=c.pinned_blocks,
            evictable_blocks=c.evictable_blocks,
            host_hit_tokens_per_request=c.host_hit_tokens_per_request,
            host_load_s=prefixed.host_load_s,
        )
