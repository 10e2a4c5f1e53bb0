"""Auto-sizing over HTTP: target traffic + SLO + candidates → ranked, costed, verified plans.

A plain ``def`` route (FastAPI's threadpool), so a search does not block the event loop. Answers
are cached in-process by a hash of everything they depend on: the request, the resolved model
config, hardware figures and prices.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Body

from servesize.api.deps import ReadAccess, SessionDep
from servesize.api.errors import ApiError, UnprocessableError, json_pointer
from servesize.api.measured import measured_profile
from servesize.api.models_resolver import resolve_model
from servesize.api.routes.models import CatalogIndexDep
from servesize.api.simulation_runner import length_distribution, min_tokens
from servesize.core.hardware import HardwareSpec
from servesize.core.sizing import (
    MAX_CANDIDATES,
    Plan,
    Predicted,
    SearchSpace,
    SizingResult,
    SizingTraffic,
    ZeroLoadBest,
    sglang_args,
    size,
    vllm_args,
    zero_load_infeasibility,
)
from servesize.core.sizing.defaults import default_max_model_len, upper_tokens
from servesize.core.sizing.engine_args import Role
from servesize.core.sizing.explain import explain
from servesize.core.sizing.space import DEFAULT_KV_CACHE_DTYPES, DEFAULT_MAX_NUM_BATCHED_TOKENS
from servesize.core.steptime import MeasuredProfile
from servesize.db.repository import HardwareRepository
from servesize.schemas.sizing import (
    CandidatesIn,
    EngineArgsOut,
    KnobsOut,
    PlanOut,
    PredictedOut,
    RejectedOut,
    SizingRequest,
    SizingResponse,
)
from servesize.schemas.slo import SloIn

router = APIRouter(prefix="/v1", tags=["sizing"], dependencies=[ReadAccess])
CACHE_ENTRIES = 32
RECENT_UPLOADS = 20
MAX_PROFILES = 1000
_cache: OrderedDict[str, SizingResponse] = OrderedDict()
_cache_lock = threading.Lock()

EXAMPLES: dict[str, dict[str, Any]] = {
    "three_gpus": {
        "summary": "20 requests/s over H100, A100 and L40S at TP 1 or 2, with prices per GPU-hour",
        "value": {
            "model": "meta-llama/Llama-3.1-8B",
            "traffic": {"rate_per_s": 20, "input_tokens": 1024, "output_tokens": 256},
            "slo": {"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}},
            "candidates": {
                "hardware": ["h100-sxm", "a100-sxm-80gb", "l40s"],
                "tensor_parallel": [1, 2],
                "max_num_batched_tokens": [8192],
                "kv_cache_dtype": ["auto"],
            },
            "prices": {"h100-sxm": 2.5, "a100-sxm-80gb": 1.6, "l40s": 0.9},
            "verify_top": 1,
        },
    },
    "disaggregated": {
        "summary": "Long prompts on H100s: aggregated and prefill/decode disaggregated plans "
        "ranked together",
        "value": {
            "model": "meta-llama/Llama-3.1-8B",
            "traffic": {"rate_per_s": 10, "input_tokens": 4096, "output_tokens": 256},
            "slo": {"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.03}},
            "candidates": {
                "hardware": ["h100-sxm"],
                "tensor_parallel": [1],
                "max_num_batched_tokens": [8192],
                "kv_cache_dtype": ["auto"],
                "disaggregation": True,
                "max_gpus": 16,
            },
            "prices": {"h100-sxm": 2.5},
            "verify_top": 2,
        },
    },
}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def predicted_out(p: Predicted | None) -> PredictedOut | None:
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


def plan_out(rank: int, plan: Plan, model: str) -> PlanOut:
    """One plan as JSON, with the launch commands of its pools."""
    c, res = plan.candidate, plan.memory.deployment
    disagg = c.kind == "disaggregated"
    role_first: Role = "prefill" if disagg else "both"
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
        engine_args=EngineArgsOut(
            vllm=vllm_args(model, res, role=role_first),
            sglang=sglang_args(model, res, role=role_first),
        ),
        decode_engine_args=(
            EngineArgsOut(
                vllm=vllm_args(model, res, role="decode"),
                sglang=sglang_args(model, res, role="decode"),
            )
            if disagg
            else None
        ),
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
        tier_a=predicted_out(plan.tier_a),
        simulation=predicted_out(plan.simulation),
        verified=plan.verified,
        decided_by=plan.decided_by,
        verification=plan.verification,
        notes=list(plan.notes),
    )


def response_out(result: SizingResult, model: str) -> SizingResponse:
    return SizingResponse(
        model=model,
        target_rate_per_s=result.target_rate_per_s,
        headroom=result.headroom,
        plans=[plan_out(i + 1, p, model) for i, p in enumerate(result.plans)],
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


def _unknown_hardware(profile_id: str, pointer: str) -> UnprocessableError:
    return UnprocessableError(
        f"no hardware profile {profile_id!r}",
        slug="unknown-hardware",
        errors=[
            {
                "location": "body",
                "pointer": pointer,
                "detail": f"no hardware profile {profile_id!r}",
            }
        ],
    )


def _hardware(
    body: SizingRequest, session: SessionDep
) -> tuple[list[HardwareSpec], dict[str, float], dict[str, MeasuredProfile]]:
    """The searched profiles (repeats once), their prices (the request's over the profile's;
    prices of known hardware outside the search are ignored) and measured kernel tables."""
    repo = HardwareRepository(session)
    ids = body.candidates.hardware
    if ids is None:
        rows = list(repo.page(offset=0, limit=MAX_PROFILES, vendor=None, kind=None)[0])
    else:
        rows = []
        seen: set[str] = set()
        for i, profile_id in enumerate(ids):
            if profile_id in seen:
                continue
            seen.add(profile_id)
            row = repo.get(profile_id)
            if row is None:
                raise _unknown_hardware(profile_id, f"/candidates/hardware/{i}")
            rows.append(row)
    searched = {r.id for r in rows}
    for key in body.prices:
        if key not in searched and repo.get(key) is None:
            raise _unknown_hardware(key, json_pointer(["prices", key]))
    prices: dict[str, float] = {}
    measured: dict[str, MeasuredProfile] = {}
    for row in rows:
        price = body.prices.get(row.id, row.price_per_gpu_hour)
        if price is not None:
            prices[row.id] = price
        uploads = [(m.id, m.payload) for m in repo.measurements(row.id, limit=RECENT_UPLOADS)]
        table = measured_profile(row.id, uploads)
        if table is not None:
            measured[row.id] = table
    return [r.to_spec() for r in rows], prices, measured


def _invalid(detail: str, pointer: str) -> UnprocessableError:
    return UnprocessableError(
        detail,
        slug="invalid-candidates",
        errors=[{"location": "body", "pointer": pointer, "detail": detail}],
    )


def _check_knobs(cand: CandidatesIn, max_position_embeddings: int | None) -> None:
    """Knob values the engine would refuse at start-up: a token budget below a
    ``max_num_seqs`` searched (vLLM: ``max_num_batched_tokens >= max_num_seqs``), a
    ``max_model_len`` beyond the model's positions."""
    most_seqs = max(cand.max_num_seqs or [0])
    for i, budget in enumerate(cand.max_num_batched_tokens or []):
        if budget < most_seqs:
            raise _invalid(
                f"max_num_batched_tokens {budget} < max_num_seqs {most_seqs}: vLLM refuses a "
                "step token budget below the running-batch limit",
                f"/candidates/max_num_batched_tokens/{i}",
            )
    if max_position_embeddings is not None:
        for i, length in enumerate(cand.max_model_len or []):
            if length > max_position_embeddings:
                raise _invalid(
                    f"max_model_len {length} > the model's max_position_embeddings "
                    f"{max_position_embeddings}",
                    f"/candidates/max_model_len/{i}",
                )


class SloInfeasibleError(ApiError):
    """Every candidate misses the SLO with no load at all (as ``/v1/slo/evaluate``)."""

    status, slug = 422, "slo-infeasible"


def _infeasible(result: SizingResult, best: tuple[ZeroLoadBest, ...]) -> SloInfeasibleError:
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


@router.post("/sizing", response_model=SizingResponse)
def sizing(
    body: Annotated[SizingRequest, Body(openapi_examples=EXAMPLES)],
    session: SessionDep,
    index: CatalogIndexDep,
) -> SizingResponse:
    """The cheapest deployments that serve the traffic within the SLO: ranked, costed, with
    engine arguments, the binding constraint, headroom and every pruned candidate's reason."""
    if any(p <= 0 or not math.isfinite(p) for p in body.prices.values()):
        bad = [k for k, p in body.prices.items() if not (p > 0 and math.isfinite(p))]
        raise UnprocessableError(
            "prices must be > 0 per GPU-hour",
            slug="invalid-price",
            errors=[
                {"location": "body", "pointer": f"/prices/{k}", "detail": "must be > 0"}
                for k in bad
            ],
        )
    model = resolve_model(body.model, catalog=index.catalog, session=session)
    specs, prices, measured = _hardware(body, session)
    key = hashlib.sha256(
        json.dumps(
            {
                "body": body.model_dump(mode="json"),
                "config": model.config,
                "hardware": [asdict(s) for s in specs],
                "prices": prices,
                "measured": sorted(measured),
            },
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit.model_copy(update={"cached": True})
    cand, traffic = body.candidates, body.traffic
    _check_knobs(cand, model.architecture.max_position_embeddings)
    lengths = cand.max_model_len or [
        default_max_model_len(traffic.input_tokens, traffic.output_tokens)
    ]
    clip = max(lengths)
    objective = body.slo.to_core()

    def grid(values: list[Any] | None, default: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(dict.fromkeys(values)) if values else default

    try:
        space = SearchSpace(
            hardware=tuple(specs),
            engines=grid(cand.engines, ()),
            tensor_parallel=grid(cand.tensor_parallel, ()),
            pipeline_parallel=grid(cand.pipeline_parallel, ()),
            data_parallel=grid(cand.data_parallel, ()),
            expert_parallel=grid(cand.expert_parallel, ()),
            max_num_seqs=grid(cand.max_num_seqs, (None,)),
            max_num_batched_tokens=grid(
                cand.max_num_batched_tokens, DEFAULT_MAX_NUM_BATCHED_TOKENS
            ),
            gpu_memory_utilization=grid(cand.gpu_memory_utilization, (None,)),
            kv_cache_dtype=grid(cand.kv_cache_dtype, DEFAULT_KV_CACHE_DTYPES),
            max_model_len=grid(lengths, ()),
            disaggregation=cand.disaggregation,
            max_gpus=cand.max_gpus,
        )
    except ValueError as exc:
        name = str(exc).split(":", 1)[0]
        known = name in CandidatesIn.model_fields
        raise _invalid(str(exc), f"/candidates/{name}" if known else "/candidates") from None
    if space.candidate_count > MAX_CANDIDATES:
        detail = (
            f"the candidate sets combine into {space.candidate_count} configurations, more than "
            f"the {MAX_CANDIDATES} one sizing screens: narrow the hardware, parallel sizes or "
            "knob grids"
        )
        raise UnprocessableError(
            detail,
            slug="sizing-too-large",
            errors=[{"location": "body", "pointer": "/candidates", "detail": detail}],
        )
    sizing_traffic = SizingTraffic(
        rate_per_s=traffic.rate_per_s,
        input_tokens=length_distribution(
            traffic.input_tokens, clip - min_tokens(traffic.output_tokens)
        ),
        output_tokens=length_distribution(
            traffic.output_tokens, clip - min_tokens(traffic.input_tokens)
        ),
        process=traffic.process,
        cv=traffic.cv,
        timeout_s=traffic.timeout_s if traffic.timeout_s is not None else math.inf,
        seed=traffic.seed,
        longest_request_tokens=upper_tokens(traffic.input_tokens)
        + upper_tokens(traffic.output_tokens),
    )
    result = size(
        model.architecture,
        model_name=model.id,
        space=space,
        traffic=sizing_traffic,
        objective=objective,
        prices=prices,
        measured=measured,
        headroom=body.headroom,
        verify_top=body.verify_top,
        calibrated=body.calibrated,
    )
    best = zero_load_infeasibility(result)
    if best:
        raise _infeasible(result, best)
    response = response_out(result, model.id)
    with _cache_lock:
        _cache[key] = response
        while len(_cache) > CACHE_ENTRIES:
            _cache.popitem(last=False)
    return response


def cache_clear() -> None:
    """Forget every cached answer (tests)."""
    with _cache_lock:
        _cache.clear()


__all__ = ["cache_clear", "default_max_model_len", "router", "upper_tokens"]
