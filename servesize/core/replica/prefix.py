"""Tier A with a prefix cache: the closed loop on the uncached part of each prompt.

:func:`closed_loop_with_prefix` runs the closed loop of ``replica.step_model`` twice. The first
pass, on whole prompts, gives the resident batch ``L``; with it
:func:`~servesize.core.traffic.steady_state_hits` estimates the prompt tokens ``h`` a request
finds cached (whole blocks of the shared prefix, the last prompt token always recomputed,
times the probability that the prefix is still resident: Che's approximation of LRU beside a
batch of ``L`` running requests). The second pass is the closed loop with ``ISL − h`` prompt
tokens: the prefill work, the chunk count, the queueing behind other prompts and the KV a
request adds (a shared prefix is held once) are those of the uncached suffix.

What the second pass leaves out is the cached prefix in the attention context: a decode attends
to ``ISL + n/2`` tokens, not ``ISL − h + n/2``. That is added back to TPOT as the difference of
two decode steps of the resident batch, ``Δτ = τ_dec(L, ISL + n/2) − τ_dec(L, ISL − h + n/2)``,
and to every request's residence (``n − 1`` decode steps, so the closed-loop throughput becomes
``C / (C/X + (n − 1)·Δτ)``). The suffix's prefill attention over the cached prefix
(``(ISL − h)·h`` pairs) is not added: it is the smaller term (``ISL − h`` is a block or less
for identical prompts).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from servesize.core.replica.compile import Replica
from servesize.core.steptime import ServingEstimate, StepWork, closed_loop
from servesize.core.traffic import (
    PrefixCacheEstimate,
    PrefixTraffic,
    Workload,
    steady_state_hits,
)

__all__ = [
    "PrefixedEstimate",
    "closed_loop_with_prefix",
    "steady_prompt_tokens",
    "warm_prompt_tokens",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixedEstimate:
    """The closed loop and, when a prefix cache acts, its steady-state figures."""

    estimate: ServingEstimate
    cache: PrefixCacheEstimate | None
    hit_tokens: int
    """Prompt tokens per request taken off the prefill (``h`` rounded to a token)."""
    decode_context_s: float
    """``Δτ`` added to TPOT for the cached prefix in the decode context."""
    host_load_s: float = 0.0
    """Per request, the time its host-tier hits take to load (``blocks · block_load_s``)."""


def closed_loop_with_prefix(
    replica: Replica,
    *,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    prefix: PrefixTraffic | None,
) -> PrefixedEstimate:
    """The closed loop at one point with the replica's prefix cache (module docstring); the
    plain closed loop when the deployment has no prefix caching or the traffic no prefix."""

    def loop(prompt_tokens: int) -> ServingEstimate:
        return closed_loop(
            replica.step_model,
            concurrency=concurrency,
            input_tokens=prompt_tokens,
            output_tokens=output_tokens,
            kv_capacity_tokens=replica.kv_capacity_tokens,
            policy=replica.scheduler.policy,
        )

    first = loop(input_tokens)
    if prefix is None or not replica.deployment.enable_prefix_caching:
        return PrefixedEstimate(estimate=first, cache=None, hit_tokens=0, decode_context_s=0.0)
    sched = replica.scheduler
    resident = float(first.resident_sequences[0])
    host = sched.host_kv
    cache = steady_state_hits(
        prefix,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        block_size_tokens=sched.block_size_tokens,
        pool_blocks=sched.num_kv_blocks,
        running_requests=resident,
        host_blocks=host.blocks if host is not None else 0,
    )
    hit = min(round(cache.hit_tokens_per_request), input_tokens - 1)
    if hit <= 0:
        return PrefixedEstimate(estimate=first, cache=cache, hit_tokens=0, decode_context_s=0.0)
    second = loop(input_tokens - hit)
    batch = max(float(second.resident_sequences[0]), 1.0)
    half = output_tokens / 2.0
    steps = replica.step_model.step_time(
        StepWork.decode(
            batch_size=[batch, batch],
            context_tokens=[input_tokens + half, input_tokens - hit + half],
        )
    ).total_s
    delta = max(float(steps[0] - steps[1]), 0.0)
    load, stall = _host_load(replica, cache, second)
    rate = second.request_rate_per_s
    cycle_s = concurrency / rate + (output_tokens - 1) * delta
    rate_after = concurrency / cycle_s
    if stall > 0.0:
        rate_after = 1.0 / (1.0 / rate_after + stall)
    estimate = replace(
        second,
        input_tokens=np.asarray(first.input_tokens),
        ttft_s=second.ttft_s + stall,
        tpot_s=second.tpot_s + delta,
        request_rate_per_s=rate_after,
        throughput_output_tokens_per_s=rate_after * output_tokens,
    )
    return PrefixedEstimate(
        estimate=estimate, cache=cache, hit_tokens=hit, decode_context_s=delta, host_load_s=load
    )


def _host_load(
    replica: Replica, cache: PrefixCacheEstimate, second: ServingEstimate
) -> tuple[float, float]:
    """A request's host-tier load time and the stall it adds to the engine's timeline (and to
    its TTFT): the whole load when the step waits for it (vLLM), what the load exceeds the
    request's prefill step by when it runs under the forward pass (SGLang), as the simulator
    charges it (:mod:`servesize.core.simulation.host_cache`)."""
    host = replica.scheduler.host_kv
    if host is None or cache.host_hit_tokens_per_request <= 0.0:
        return 0.0, 0.0
    load = cache.host_hit_tokens_per_request / replica.scheduler.block_size_tokens
    load *= host.block_load_s
    if not host.overlap:
        return load, load
    return load, max(load - float(np.asarray(second.prefill_time_s).reshape(-1)[0]), 0.0)


def warm_prompt_tokens(replica: Replica, workload: Workload) -> np.ndarray:
    """Per request, the prompt tokens a warm cache leaves to prefill: the prompt less
    ``⌊min(S, P − 1) / b⌋ · b`` for a request that shares a prefix of ``S`` tokens (the whole
    prompt without prefix caching or shared prefixes). For zero-load screens."""
    prompt = np.asarray(workload.prompt_tokens, dtype=np.int64)
    if workload.prefix is None or not replica.deployment.enable_prefix_caching:
        return prompt
    bs = replica.scheduler.block_size_tokens
    shared = np.minimum(workload.prefix.shared_tokens, prompt - 1)
    hit = np.where(workload.prefix.group >= 0, np.maximum(shared, 0) // bs * bs, 0)
    return np.asarray(prompt - hit, dtype=np.int64)


def steady_prompt_tokens(
    replica: Replica, prefix: PrefixTraffic | None, input_tokens: int, output_tokens: int
) -> int:
    """The prompt tokens Tier A's open loop prefills per request: ``ISL − round(h)`` with the
    hit ``h`` of :func:`~servesize.core.traffic.steady_state_hits` beside one running request
    (the light-load case; the simulator decides under load), ``ISL`` without a cache."""
    if prefix is None or not replica.deployment.enable_prefix_caching:
        return input_tokens
    sched = replica.scheduler
    cache = steady_state_hits(
        prefix,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        block_size_tokens=sched.block_size_tokens,
        pool_blocks=sched.num_kv_blocks,
        running_requests=1.0,
    )
    return input_tokens - min(round(cache.hit_tokens_per_request), input_tokens - 1)
