"""Tier A plan of one candidate: its per-replica rate ``λ*`` under the SLO, the replicas
``ceil(target / (λ* × headroom))`` and, for the returned plans, its Tier A metrics at the
target load.

An aggregated candidate is screened on one :func:`open_loop_curve`. A disaggregated one sizes
a prefill pool on the prefill load (TTFT targets) and a decode pool on the decode load
(TPOT/ITL targets), rate-matched from the same step-time model, with the KV transfer
``latency + P·kv_bytes/bandwidth`` over the hardware interconnect; E2E and attainment targets
scale both pools' load together. Each screen returns the plan together with what it was
screened on (:class:`Screened`), which Tier A metrics and verification read later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from servesize.core.replica import Replica
from servesize.core.sizing.build import kv_link_notes
from servesize.core.sizing.features import FeatureEffects, feature_curve, feature_notes
from servesize.core.sizing.inputs import SizingInputs
from servesize.core.sizing.result import Plan, Predicted, Rejection
from servesize.core.sizing.screen import (
    SATURATION,
    UTILIZATION_CAP,
    Miss,
    TargetCurve,
    screen_curve,
    target_curves,
)
from servesize.core.sizing.space import Candidate
from servesize.core.steptime import StepWork
from servesize.core.steptime.openloop import OpenLoopCurve, open_loop_curve

__all__ = [
    "DecodeCurve",
    "Screened",
    "replicas_needed",
    "residence_s",
    "screen_aggregated",
    "screen_disaggregated",
    "with_tier_a",
]


def replicas_needed(
    target_rate_per_s: float, max_rate_per_replica_per_s: float, headroom: float
) -> int:
    """``ceil(target / (λ* × headroom))``, at least 1.

    >>> replicas_needed(100.0, 12.0, 0.85)  # 100 / 10.2 = 9.8
    10
    """
    if max_rate_per_replica_per_s <= 0:
        raise ValueError("max_rate_per_replica_per_s must be > 0")
    if not 0 < headroom <= 1:
        raise ValueError(f"headroom must be in (0, 1], got {headroom}")
    # Round first so that exact quotients (e.g. 10 / (5 × 1.0)) are not pushed up by float error.
    return max(1, math.ceil(round(target_rate_per_s / (max_rate_per_replica_per_s * headroom), 9)))


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeCurve:
    """The decode pool of one replica along its load: rate ``X(L)`` and the TPOT there (decode
    step plus the KV transfer spread over the ``n − 1`` decode steps)."""

    rate_per_s: np.ndarray
    tpot_s: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class Screened:
    """What one plan was screened on: its compiled replica (memory plan, step-time model with
    the plan's scheduler limits, scheduler, KV transfer for P/D), the Tier A curve of a replica
    (of a prefill replica for P/D) and, for P/D, the decode curve."""

    replica: Replica
    curve: OpenLoopCurve
    decode: DecodeCurve | None = None
    features: FeatureEffects | None = None
    """What prefix hits, host loads and speculation did to the curve (None: nothing)."""


def _describe_misses(misses: tuple[Miss, ...]) -> str:
    parts = []
    for m in misses:
        relation = ">" if m.direction == "max" else "<"
        parts.append(
            f"{m.name} {m.predicted:.4g} {relation} limit {m.limit:.4g} "
            f"(missed by {m.relative_miss:.0%})"
        )
    return "; ".join(parts)


def _tier_a_metrics(
    inputs: SizingInputs, curve: OpenLoopCurve, rate_per_replica: float, replicas: int, binding: str
) -> Predicted:
    """Tier A at one replica's share of the target load (interpolated between grid points)."""
    i = int(
        np.clip(np.searchsorted(curve.rate_per_s, rate_per_replica), 1, curve.rate_per_s.size - 1)
    )
    pair = curve.take([i - 1, i])

    def at(values: np.ndarray) -> float:
        return pair.interpolate(values, rate_per_replica)

    tpot = at(pair.tpot_s)
    decode_steps = max(inputs.output_tokens - 1.0, 0.0)
    ttft95 = at(pair.ttft_quantile(0.95))
    slo = inputs.objective.request_slo()
    good = 1.0
    if slo is not None:
        if slo.tpot_s is not None and tpot > slo.tpot_s and inputs.output_tokens >= 2:
            good = 0.0
        else:
            limit = min(
                slo.ttft_s if slo.ttft_s is not None else math.inf,
                slo.e2e_s - decode_steps * tpot if slo.e2e_s is not None else math.inf,
            )
            good = at(pair.ttft_cdf(limit)) if math.isfinite(limit) else 1.0
    rate = rate_per_replica * replicas
    return Predicted(
        source="tier_a",
        ttft_p50_s=at(pair.ttft_quantile(0.5)),
        ttft_p95_s=ttft95,
        ttft_p99_s=at(pair.ttft_quantile(0.99)),
        tpot_p50_s=tpot,
        tpot_p95_s=tpot,
        e2e_p95_s=ttft95 + decode_steps * tpot,
        throughput_requests_per_s=rate,
        goodput_requests_per_s=rate * good,
        feasible=True,
        binding=binding,
    )


def screen_aggregated(
    inputs: SizingInputs,
    c: Candidate,
    replica: Replica,
    targets: list[TargetCurve],
) -> tuple[Plan, Screened] | Rejection:
    """Screen an aggregated candidate: ``λ*`` on its Tier A curve, then the replicas the target
    needs; rejected when it misses a target even idle or needs more GPUs than allowed."""
    memory = replica.memory
    curve, effects = feature_curve(inputs, replica)
    screen = screen_curve(curve, targets)
    if screen.max_rate_per_s <= 0:
        said = feature_notes(effects, curve, float(curve.rate_per_s[0]))
        return Rejection(
            candidate=c,
            reason="infeasible-at-zero-load",
            detail="; ".join((_describe_misses(screen.misses), *said)),
            miss=max(m.relative_miss for m in screen.misses) if screen.misses else None,
            zero_load=screen.zero_load,
        )
    replicas = replicas_needed(inputs.target_rate_per_s, screen.max_rate_per_s, inputs.headroom)
    total = replicas * c.gpus_per_replica
    if inputs.max_gpus is not None and total > inputs.max_gpus:
        return Rejection(
            candidate=c,
            reason="over-gpu-limit",
            detail=(
                f"needs {replicas} replicas × {c.gpus_per_replica} GPUs = {total} GPUs "
                f"(λ* = {screen.max_rate_per_s:.3g}/s per replica, limited by {screen.binding}) "
                f"> max_gpus {inputs.max_gpus}"
                + "".join(f"; {n}" for n in feature_notes(effects, curve, screen.max_rate_per_s))
            ),
        )
    per_replica = inputs.target_rate_per_s / replicas
    notes = feature_notes(effects, curve, per_replica)
    plan = Plan(
        candidate=c,
        memory=memory,
        replicas=replicas,
        prefill_replicas=None,
        decode_replicas=None,
        max_rate_per_replica_per_s=screen.max_rate_per_s,
        decode_max_rate_per_replica_per_s=None,
        utilization=per_replica / screen.max_rate_per_s,
        headroom=inputs.headroom,
        binding=screen.binding,
        kv_transfer_s=None,
        price_per_gpu_hour=inputs.prices.get(c.hardware_id),
        target_output_tokens_per_s=inputs.target_rate_per_s * inputs.output_tokens,
        notes=notes,
    )
    return plan, Screened(replica=replica, curve=curve, features=effects)


def _decode_curve(
    inputs: SizingInputs, replica: Replica, points: int = 96
) -> tuple[np.ndarray, np.ndarray, float]:
    """Decode pool of one replica: rate ``X(L) = L / ((n − 1)·τ_dec(L))`` and ``τ_dec(L)`` for
    ``L`` resident decodes at context ``P + n/2``, up to the residency cap."""
    p, n = inputs.input_tokens, inputs.output_tokens
    model = replica.step_model
    seqs = float(model.engine.max_num_seqs * model.inventory.data_parallel_size)
    cap = max(min(seqs, math.floor(replica.kv_capacity_tokens / (p + n / 2))), 1.0)
    resident = np.geomspace(min(1e-3, cap / 2), cap, points)
    pp = float(model.inventory.pipeline_parallel_size)
    step = model.step_time(StepWork.decode(np.maximum(resident / pp, 1.0), p + n / 2)).total_s
    rate = resident / ((n - 1) * step)
    return np.asarray(rate), np.asarray(step), float(rate[-1])


def screen_disaggregated(
    inputs: SizingInputs, c: Candidate, replica: Replica
) -> tuple[Plan, Screened] | Rejection:
    """Screen a disaggregated candidate: the prefill pool on the TTFT targets, the decode pool
    on TPOT/ITL, both scaled down together until E2E and attainment hold; rejected when a pool
    misses even idle or the pools need more GPUs than allowed."""
    n = inputs.output_tokens
    if n < 2:
        return Rejection(
            candidate=c,
            reason="unsupported",
            detail="disaggregation needs at least two output tokens per request",
        )
    memory, model, transfer = replica.memory, replica.step_model, replica.kv_transfer
    assert transfer is not None, "a disaggregated candidate is compiled with a KV link"
    xfer_s = float(transfer.transfer_time_s(np.array([round(inputs.input_tokens)]))[0])
    prefill = open_loop_curve(
        model,
        input_tokens=inputs.input_tokens,
        output_tokens=1,
        kv_capacity_tokens=replica.kv_capacity_tokens,
    )
    # TTFT targets bind the prefill pool (the first token comes from the prefill worker).
    ttft_targets = [t for t in target_curves(inputs.objective, 1.0) if t.name.startswith("ttft_s.")]
    p_screen = screen_curve(prefill, ttft_targets)
    if p_screen.max_rate_per_s <= 0:
        return Rejection(
            candidate=c,
            reason="infeasible-at-zero-load",
            detail="prefill pool: " + _describe_misses(p_screen.misses),
            miss=max(m.relative_miss for m in p_screen.misses) if p_screen.misses else None,
            zero_load=p_screen.zero_load,
        )
    d_rate, d_step, d_sat = _decode_curve(inputs, replica)
    # TPOT = (E2E − TTFT)/(n − 1) also carries the transfer; ITL gaps are decode steps.
    tpot = d_step + xfer_s / (n - 1)
    d_max, binding_d = UTILIZATION_CAP * d_sat, SATURATION
    for t in inputs.objective.targets:
        if t.metric not in ("tpot", "itl"):
            continue
        values = tpot if (t.metric == "tpot" or t.statistic == "mean") else d_step
        holds = values <= t.limit_s
        if not holds[0]:
            miss = (float(values[0]) - t.limit_s) / t.limit_s
            return Rejection(
                candidate=c,
                reason="infeasible-at-zero-load",
                detail=(
                    f"decode pool: {t.name} {values[0]:.4g} > limit {t.limit_s:.4g} "
                    f"(missed by {miss:.0%})"
                ),
                miss=miss,
                zero_load=(
                    Miss(name=t.name, predicted=float(values[0]), limit=t.limit_s, direction="max"),
                ),
            )
        if holds.all():
            continue
        k = int(np.argmin(holds))
        v0, v1 = float(values[k - 1]), float(values[k])
        fraction = (t.limit_s - v0) / (v1 - v0) if v1 != v0 else 0.0
        rate = float(d_rate[k - 1] + fraction * (d_rate[k] - d_rate[k - 1]))
        if rate < d_max:
            d_max, binding_d = rate, t.name
    # E2E and attainment couple the pools: scale both loads together until they hold, on the
    # prefill curve's grid (E2E = TTFT + transfer + (n − 1)·τ_dec = TTFT + (n − 1)·TPOT).
    scale = 1.0
    joint = [
        t
        for t in target_curves(inputs.objective, n)
        if t.name.startswith("e2e") or t.name == "attainment"
    ]
    if joint:
        fractions = prefill.rate_per_s / p_screen.max_rate_per_s
        usable = fractions <= 1.0
        coupled = replace(prefill, tpot_s=np.interp(fractions * d_max, d_rate, tpot))
        ok = np.all(np.vstack([t.holds(coupled) for t in joint]), axis=0) & usable
        if not ok[0]:
            return Rejection(
                candidate=c,
                reason="infeasible-at-zero-load",
                detail="an E2E or attainment target is missed at the lowest load of both pools",
            )
        last = int(np.argmin(ok)) - 1 if not ok.all() else int(np.max(np.nonzero(usable)))
        scale = min(1.0, float(fractions[last]))
    p_max, d_max = p_screen.max_rate_per_s * scale, d_max * scale
    x = replicas_needed(inputs.target_rate_per_s, p_max, inputs.headroom)
    y = replicas_needed(inputs.target_rate_per_s, d_max, inputs.headroom)
    total = (x + y) * c.gpus_per_replica
    if inputs.max_gpus is not None and total > inputs.max_gpus:
        return Rejection(
            candidate=c,
            reason="over-gpu-limit",
            detail=(
                f"needs {x} prefill + {y} decode replicas = {total} GPUs "
                f"> max_gpus {inputs.max_gpus}"
            ),
        )
    p_load = inputs.target_rate_per_s / x
    d_load = inputs.target_rate_per_s / y
    plan = Plan(
        candidate=c,
        memory=memory,
        replicas=x + y,
        prefill_replicas=x,
        decode_replicas=y,
        max_rate_per_replica_per_s=p_max,
        decode_max_rate_per_replica_per_s=d_max,
        utilization=max(p_load / p_max, d_load / d_max),
        headroom=inputs.headroom,
        binding=p_screen.binding if p_load / p_max >= d_load / d_max else binding_d,
        kv_transfer_s=xfer_s,
        price_per_gpu_hour=inputs.prices.get(c.hardware_id),
        notes=kv_link_notes(inputs.hardware[c.hardware_id]),
        target_output_tokens_per_s=inputs.target_rate_per_s * n,
    )
    screened = Screened(
        replica=replica, curve=prefill, decode=DecodeCurve(rate_per_s=d_rate, tpot_s=tpot)
    )
    return plan, screened


def with_tier_a(inputs: SizingInputs, screened: Screened, plan: Plan) -> Plan:
    """The plan with its Tier A metrics at its share of the target load."""
    curve = screened.curve
    if plan.prefill_replicas is None or plan.decode_replicas is None:
        per_replica = inputs.target_rate_per_s / plan.replicas
        metrics = _tier_a_metrics(inputs, curve, per_replica, plan.replicas, plan.binding)
        return replace(plan, tier_a=metrics)
    assert screened.decode is not None
    d_rate, tpot = screened.decode.rate_per_s, screened.decode.tpot_s
    x, y = plan.prefill_replicas, plan.decode_replicas
    base = _tier_a_metrics(inputs, curve, inputs.target_rate_per_s / x, x, plan.binding)
    tpot_at = float(np.interp(inputs.target_rate_per_s / y, d_rate, tpot))
    decode_steps = inputs.output_tokens - 1
    return replace(
        plan,
        tier_a=replace(
            base,
            tpot_p50_s=tpot_at,
            tpot_p95_s=tpot_at,
            e2e_p95_s=base.ttft_p95_s + decode_steps * tpot_at,
        ),
    )


def _interp(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
    return float(np.interp(x, xs, ys))


def residence_s(
    inputs: SizingInputs, screened: Screened, plan: Plan, per_prefill: float, per_decode: float
) -> float:
    """Tier A mean residence ``W̄ = TTFT̄ + (n − 1)·TPOT`` at the given per-replica loads
    (aggregated: both are the replica's load; P/D: plus the KV transfer)."""
    curve = screened.curve
    decode_steps = max(inputs.output_tokens - 1.0, 0.0)
    ttft = _interp(per_prefill, curve.rate_per_s, curve.ttft_mean_s)
    if plan.prefill_replicas is None:
        return ttft + decode_steps * _interp(per_prefill, curve.rate_per_s, curve.tpot_s)
    assert screened.decode is not None
    d_rate, tpot = screened.decode.rate_per_s, screened.decode.tpot_s
    return ttft + (plan.kv_transfer_s or 0.0) + decode_steps * _interp(per_decode, d_rate, tpot)
