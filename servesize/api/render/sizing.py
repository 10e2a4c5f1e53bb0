"""Sizing results as ``/v1/sizing`` responses (plans with launch commands), and the problem of
an SLO every candidate misses at zero load."""

from __future__ import annotations

import math
from typing import Any

from servesize.api.exceptions import SloInfeasibleError
from servesize.core.sizing import (
    LaunchPlan,
    Plan,
    Predicted,
    SizingResult,
    ZeroLoadBest,
    explain,
    shell_command,
)
from servesize.prices import PriceQuote
from servesize.schemas.energy import EnergyOut
from servesize.schemas.sizing import (
    EngineArgsOut,
    KnobsOut,
    LaunchCommandOut,
    LaunchFileOut,
    LaunchOut,
    PlanKVOffloadOut,
    PlanOut,
    PlanSpeculativeOut,
    PredictedOut,
    PriceSourceOut,
    RejectedOut,
    SizingResponse,
)
from servesize.schemas.slo import SloIn


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def predicted_out(p: Predicted | None) -> PredictedOut | None:
    """One tier's prediction for a plan; non-finite figures as ``null``."""
    if p is None:
        return None
    return PredictedOut(
        source=p.source,
        ttft_p50_s=_finite(p.ttft_p50_s),
        ttft_p95_s=_finite(p.ttft_p95_s),
        ttft_p99_s=_finite(p.ttft_p99_s),
        tpot_p50_s=_finite(p.tpot_p50_s),
        tpot_p95_s=_finite(p.tpot_p95_s),
        e2e_p95_s=_finite(p.e2e_p95_s),
        throughput_requests_per_s=_finite(p.throughput_requests_per_s),
        goodput_requests_per_s=_finite(p.goodput_requests_per_s),
        feasible=p.feasible,
        binding=p.binding,
        reason=p.reason,
    )


def launch_out(launch: LaunchPlan) -> LaunchOut:
    """A plan's launch commands as JSON."""
    return LaunchOut(
        engine=launch.engine,
        engine_version=launch.engine_version,
        commands=[
            LaunchCommandOut(
                role=c.role,
                argv=list(c.argv),
                command=shell_command(c.argv),
                files=[LaunchFileOut(path=p, content=t) for p, t in c.files],
            )
            for c in launch.commands
        ],
        placeholders=dict(launch.placeholders),
        notes=list(launch.notes),
    )


def _engine_args(launch: LaunchPlan | None, pool: str = "") -> EngineArgsOut | None:
    """The first server command (of ``pool``, ``prefill`` or ``decode``, for P/D plans) under
    the engine's key; the other engines' keys stay null."""
    if launch is None:
        return None
    first = next(
        (c for c in launch.commands if c.role != "router" and c.role.startswith(pool)), None
    )
    if first is None:
        return None
    return EngineArgsOut.model_validate({launch.engine: list(first.argv)})


def plan_out(rank: int, plan: Plan, model: str) -> PlanOut:
    """One plan as JSON, with the launch commands of its engine."""
    c, res = plan.candidate, plan.memory.deployment
    disagg = c.kind == "disaggregated"
    return PlanOut(
        rank=rank,
        kind=c.kind,
        hardware=c.hardware_id,
        engine=c.engine,
        gpus_per_replica=plan.gpus_per_replica,
        replicas=plan.replicas,
        prefill_replicas=plan.prefill_replicas,
        decode_replicas=plan.decode_replicas,
        total_gpus=plan.total_gpus,
        parallelism={
            "tensor_parallel_size": res.tensor_parallel_size,
            "pipeline_parallel_size": res.pipeline_parallel_size,
            "data_parallel_size": res.data_parallel_size,
            "enable_expert_parallel": res.enable_expert_parallel,
        },
        knobs=KnobsOut(
            max_num_seqs=res.max_num_seqs,
            max_num_batched_tokens=res.max_num_batched_tokens,
            gpu_memory_utilization=res.memory_fraction,
            kv_cache_dtype=res.kv_cache.name,
            max_model_len=res.max_model_len,
        ),
        speculative=None
        if c.speculative is None
        else PlanSpeculativeOut(
            method=c.speculative.method,
            num_speculative_tokens=c.speculative.k,
            acceptance_per_position=list(c.speculative.acceptance),
            expected_tokens_per_step=c.speculative.expected_tokens,
        ),
        kv_offload=None
        if c.kv_offload is None
        else PlanKVOffloadOut.model_validate(c.kv_offload, from_attributes=True),
        engine_args=_engine_args(plan.launch, "prefill" if disagg else "") or EngineArgsOut(),
        decode_engine_args=_engine_args(plan.launch, "decode") if disagg else None,
        launch=launch_out(plan.launch) if plan.launch is not None else None,
        max_rate_per_replica_per_s=plan.max_rate_per_replica_per_s,
        decode_max_rate_per_replica_per_s=plan.decode_max_rate_per_replica_per_s,
        utilization=plan.utilization,
        headroom=plan.headroom,
        binding=plan.binding,
        kv_transfer_s=plan.kv_transfer_s,
        kv_capacity_tokens=plan.memory.kv_capacity_tokens,
        price_per_gpu_hour=plan.price_per_gpu_hour,
        cost_per_hour=plan.cost_per_hour,
        cost_per_million_output_tokens=plan.cost_per_million_output_tokens,
        energy=EnergyOut.of(plan.energy),
        tier_a=predicted_out(plan.tier_a),
        simulation=predicted_out(plan.simulation),
        verified=plan.verified,
        decided_by=plan.decided_by,
        verification=plan.verification,
        notes=list(plan.notes),
    )


def _price_source(quote: PriceQuote | None) -> PriceSourceOut | None:
    if quote is None:
        return None
    return PriceSourceOut(
        origin=quote.origin, provider=quote.provider, source_url=quote.source_url, as_of=quote.as_of
    )


def response_out(
    result: SizingResult, model: str, quotes: dict[str, PriceQuote] | None = None
) -> SizingResponse:
    """A fresh (not cached) answer; ``quotes`` say where each hardware's price came from."""
    quotes = quotes or {}
    plans = [
        plan_out(i + 1, p, model).model_copy(
            update={"price_source": _price_source(quotes.get(p.candidate.hardware_id))}
        )
        for i, p in enumerate(result.plans)
    ]
    dated = [q.as_of for p in plans if (q := quotes.get(p.hardware)) and q.as_of is not None]
    return SizingResponse(
        model=model,
        target_rate_per_s=result.target_rate_per_s,
        headroom=result.headroom,
        plans=plans,
        prices_as_of=min(dated) if dated else None,
        plans_found=result.plans_found,
        explanation=explain(result),
        rejected=[
            RejectedOut(candidate=r.candidate.label, reason=r.reason, detail=r.detail, miss=r.miss)
            for r in result.rejected
        ],
        candidates_evaluated=result.candidates_evaluated,
        simulations=result.simulations,
        simulated_requests=result.simulated_requests,
        elapsed_s=result.elapsed_s,
        cached=False,
        warnings=list(result.warnings),
    )


def infeasible_problem(result: SizingResult, best: tuple[ZeroLoadBest, ...]) -> SloInfeasibleError:
    """Every candidate misses the SLO with no load at all (as ``/v1/slo/evaluate``): each
    target with the best zero-load value and the candidate that reaches it."""
    screened = sum(r.reason == "infeasible-at-zero-load" for r in result.rejected)
    errors: list[dict[str, Any]] = []
    for b in best:
        relation = ">" if b.direction == "max" else "<"
        detail = (
            f"{b.name}: the best zero-load value of the {screened} candidates screened is "
            f"{b.best:.4g} ({b.candidate.label}) {relation} limit {b.limit:.4g}"
        )
        if not b.alone:
            detail += ", and no candidate meets every target at once"
        errors.append(
            {
                "location": "body",
                "pointer": "/slo" + SloIn.pointer(b.name),
                "detail": detail,
                "limit": b.limit,
                "zero_load": b.best,
                "candidate": b.candidate.label,
            }
        )
    return SloInfeasibleError(
        "; ".join(e["detail"] for e in errors)
        + " (zero load: Tier A at the lowest rate; no number of replicas helps: relax the "
        "target or add faster hardware)",
        errors=errors,
    )
