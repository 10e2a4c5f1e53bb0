"""Tier A curve of a candidate with its serving features: prefix caching, KV offload,
speculative decoding (docs/modeling.md §3.11).

The plain :func:`open_loop_curve` is corrected as the closed loop is
(:mod:`~servesize.core.replica.prefix`, :mod:`~servesize.core.replica.speculative`):

1. **Prefix hits** (traffic with shared prefixes, or sessions' history, on a deployment that
   caches prefixes): :func:`~servesize.core.traffic.steady_state_hits` beside ``L*`` running
   requests, ``L*`` the plain curve's resident batch at :data:`~.screen.UTILIZATION_CAP` of its
   saturation rate (the loaded end, where cached blocks compete with running ones), with the
   host tier's blocks when the deployment offloads. The curve is then built on ``P − h`` prompt
   tokens; the cached head stays in the decode context, ``Δτ = τ_dec(L, P + n/2) −
   τ_dec(L, P − h + n/2)`` per step, and every residence grows by ``(n − 1)·Δτ``:
   ``X' = L / (L/X + (n − 1)Δτ)``.
2. **Host loads**: a request's ``h_host / b`` host blocks take ``block_load_s`` each; on vLLM the
   step waits for them (TTFT and every residence grow by the load, and the engine's timeline
   too: ``X' = 1 / (1/X + load)``), on SGLang only what the load exceeds the request's prefill
   by.
3. **Speculation**: at each grid point of ``L`` resident requests (batch ``B = max(L, 1)``,
   context ``P + n/2``), ``TPOT' = (τ_ver(B) + τ_draft(B) + (τ̄ − τ_dec(B))·n/(1 + (n − 1)/E))/E``
   with ``E = (1 − α^{k+1})/(1 − α)``, and ``X' = L / (L/X + (n − 1)(TPOT' − τ̄))``. An ITL gap
   is a verification step, ``E·TPOT'``. Where speculation costs more than it yields (``B``
   past the break-even batch) ``X'`` falls below ``X`` and the candidate needs more replicas.

Approximations: one hit estimate for the whole load axis (at the loaded end: conservative
for the GPU cache); TTFT along the curve is the plain curve's at the same resident count, so
a speculating replica's prompt queue is taken at the plain arrival rate of that count.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from servesize.core.replica import Replica
from servesize.core.sizing.inputs import SizingInputs
from servesize.core.sizing.screen import UTILIZATION_CAP
from servesize.core.speculative import speedup_by_batch, verification_step_s
from servesize.core.steptime import StepWork
from servesize.core.steptime.openloop import OpenLoopCurve, open_loop_curve
from servesize.core.traffic import steady_state_hits

__all__ = ["FeatureEffects", "feature_curve", "feature_notes"]

_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureEffects:
    """What a candidate's features did to its Tier A curve."""

    plain: OpenLoopCurve
    """The curve without speculation (with prefix hits and host loads)."""
    hit_tokens: float = 0.0
    """Prompt tokens a request finds cached (GPU or host)."""
    host_hit_tokens: float = 0.0
    host_load_s: float = 0.0
    """Per request, the time its host-tier hits take over the host link."""
    host_stall_s: float = 0.0
    """Of it, what the request waits (and the engine's timeline stalls)."""
    decode_context_s: float = 0.0
    expected_tokens: float | None = None
    """``E`` of the candidate's speculation (None: plain decoding)."""
    break_even_batch: int | None = None
    """Smallest batch of the speed-up table where speculation no longer pays."""


def _curve(inputs: SizingInputs, replica: Replica, prompt_tokens: float) -> OpenLoopCurve:
    return open_loop_curve(
        replica.step_model,
        input_tokens=prompt_tokens,
        output_tokens=inputs.output_tokens,
        kv_capacity_tokens=replica.kv_capacity_tokens,
    )


def _slower(curve: OpenLoopCurve, stretch_s: np.ndarray, stall_s: float) -> OpenLoopCurve:
    """``curve`` with every residence longer by ``stretch_s`` (at its resident counts) and
    every request's TTFT and engine time by ``stall_s``; the points where the completion rate
    still grows are kept."""
    rate = curve.resident_sequences / (curve.resident_sequences / curve.rate_per_s + stretch_s)
    if stall_s > 0.0:
        rate = 1.0 / (1.0 / rate + stall_s)
    keep = np.concatenate([[True], rate[1:] > np.maximum.accumulate(rate)[:-1]])
    shifted = replace(
        curve,
        rate_per_s=rate,
        saturation_rate_per_s=float(np.max(rate)),
        fixed_s=curve.fixed_s + stall_s,
        request_overhead_s=curve.request_overhead_s + stall_s,
    )
    return shifted.take(np.flatnonzero(keep))


def _with_prefix(
    inputs: SizingInputs, replica: Replica, plain: OpenLoopCurve
) -> tuple[OpenLoopCurve, FeatureEffects]:
    """Step 1 and 2 of the module docstring."""
    p, n = inputs.input_tokens, inputs.output_tokens
    sched = replica.scheduler
    loaded = UTILIZATION_CAP * plain.saturation_rate_per_s
    resident = plain.interpolate(plain.resident_sequences, loaded)
    host = sched.host_kv
    assert inputs.traffic.prefix is not None
    cache = steady_state_hits(
        inputs.traffic.prefix,
        input_tokens=round(p),
        output_tokens=round(n),
        block_size_tokens=sched.block_size_tokens,
        pool_blocks=sched.num_kv_blocks,
        running_requests=resident,
        host_blocks=host.blocks if host is not None else 0,
    )
    hit = min(cache.hit_tokens_per_request, p - 1.0)
    if hit < 1.0:
        return plain, FeatureEffects(plain=plain)
    curve = _curve(inputs, replica, p - hit)
    batch = np.maximum(curve.resident_sequences, 1.0)
    both = replica.step_model.step_time(
        StepWork.decode(
            batch_size=np.concatenate([batch, batch]),
            context_tokens=np.concatenate(
                [np.full_like(batch, p + n / 2), np.full_like(batch, p - hit + n / 2)]
            ),
        )
    ).total_s
    delta = np.maximum(both[: batch.size] - both[batch.size :], 0.0)
    load = stall = 0.0
    if host is not None and cache.host_hit_tokens_per_request > 0.0:
        load = cache.host_hit_tokens_per_request / sched.block_size_tokens * host.block_load_s
        own_prefill = float(curve.fixed_s[0]) - curve.request_overhead_s
        stall = max(load - own_prefill, 0.0) if host.overlap else load
    widened = replace(
        curve,
        tpot_s=curve.tpot_s + delta,
        mean_step_s=curve.mean_step_s + delta,
        mix_step_s=curve.mix_step_s + delta,
        decode_step_s=curve.decode_step_s + delta,
    )
    out = _slower(widened, max(n - 1.0, 0.0) * delta, stall)
    effects = FeatureEffects(
        plain=out,
        hit_tokens=hit,
        host_hit_tokens=cache.host_hit_tokens_per_request,
        host_load_s=load,
        host_stall_s=stall,
        decode_context_s=float(np.interp(0.0, curve.rate_per_s, delta)),
    )
    return out, effects


def _with_speculation(
    inputs: SizingInputs, replica: Replica, curve: OpenLoopCurve, effects: FeatureEffects
) -> tuple[OpenLoopCurve, FeatureEffects]:
    """Step 3 of the module docstring."""
    draft = replica.draft
    assert draft is not None
    spec, model = draft.spec, replica.step_model
    p, n = inputs.input_tokens, inputs.output_tokens
    e = spec.expected_tokens
    ctx = p + n / 2.0
    sizes = [s for s in _BATCHES if s <= max(replica.scheduler.max_num_seqs, 1)] or [1]
    table = speedup_by_batch(
        model,
        spec,
        draft.shape,
        context_tokens=ctx,
        batch_sizes=sizes,
        bytes_per_param=draft.bytes_per_param,
        gpus=draft.gpus,
    )
    even = next((pt.batch_size for pt in table if pt.speedup < 1.0), None)
    effects = replace(effects, expected_tokens=e, break_even_batch=even)
    if n < 2:
        return curve, effects
    b = np.maximum(curve.resident_sequences, 1.0)
    c = np.full_like(b, ctx)
    plain = np.asarray(model.step_time(StepWork.decode(b, c)).total_s)
    step = verification_step_s(model, b, c, spec.k) + draft.draft_s(model, b, c)
    mix = np.maximum(curve.tpot_s - plain, 0.0) * n / ((n - 1.0) / e + 1.0)
    tpot = (step + mix) / e
    spec_curve = replace(
        curve,
        tpot_s=tpot,
        mean_step_s=tpot * e,
        decode_step_s=step,
        mix_step_s=curve.mix_step_s + (step - plain),
    )
    return _slower(spec_curve, (n - 1.0) * (tpot - curve.tpot_s), 0.0), effects


def feature_curve(
    inputs: SizingInputs, replica: Replica
) -> tuple[OpenLoopCurve, FeatureEffects | None]:
    """The Tier A curve of ``replica`` with its features (module docstring), and what they
    did; the plain curve and None when no feature acts."""
    plain = _curve(inputs, replica, inputs.input_tokens)
    curve, effects = plain, None
    if inputs.traffic.prefix is not None and replica.deployment.enable_prefix_caching:
        curve, effects = _with_prefix(inputs, replica, plain)
    if replica.draft is not None:
        curve, effects = _with_speculation(
            inputs, replica, curve, effects or FeatureEffects(plain=curve)
        )
    return curve, effects


def feature_notes(
    effects: FeatureEffects | None, curve: OpenLoopCurve, rate_per_replica: float
) -> tuple[str, ...]:
    """What a plan's features do at its share of the target load, in words."""
    if effects is None:
        return ()
    notes: list[str] = []
    if effects.hit_tokens > 0:
        text = f"prefix cache: {effects.hit_tokens:.0f} prompt tokens per request served cached"
        if effects.host_hit_tokens > 0:
            text += (
                f", {effects.host_hit_tokens:.0f} of them loaded from the host KV tier in "
                f"{effects.host_load_s * 1e3:.3g} ms ({effects.host_stall_s * 1e3:.3g} ms "
                "waited)"
            )
        notes.append(text)
    if effects.expected_tokens is not None:
        plain = effects.plain.interpolate(effects.plain.tpot_s, rate_per_replica)
        spec = curve.interpolate(curve.tpot_s, rate_per_replica)
        batch = curve.interpolate(curve.resident_sequences, rate_per_replica)
        even = effects.break_even_batch
        notes.append(
            f"speculative decoding: E = {effects.expected_tokens:.4g} tokens per verification "
            f"step; TPOT {spec * 1e3:.3g} ms against {plain * 1e3:.3g} ms without it at "
            f"{rate_per_replica:.3g}/s per replica (×{plain / spec:.2f}, resident batch "
            f"{batch:.3g}); "
            + (
                f"it stops paying from a batch of {even}"
                if even is not None
                else "it pays at every batch up to max_num_seqs"
            )
        )
    return tuple(notes)
