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

from service.api.deps import ReadAccess, SessionDep
from service.api.errors import UnprocessableError
from service.api.measured import measured_profile
from service.api.models_resolver import resolve_model
from service.api.routes.models import CatalogIndexDep
from service.api.simulation_runner import length_distribution, min_tokens
from service.core.hardware import HardwareSpec
from service.core.sizing import (
    Plan,
    Predicted,
    SearchSpace,
    SizingResult,
    SizingTraffic,
    sglang_args,
    size,
    vllm_args,
)
from service.core.sizing.engine_args import Role
from service.core.sizing.explain import explain
from service.core.sizing.space import DEFAULT_KV_CACHE_DTYPES, DEFAULT_MAX_NUM_BATCHED_TOKENS
from service.core.steptime import MeasuredProfile
from service.db.repository import HardwareRepository
from service.schemas.simulate import FixedLengthIn, LengthIn, UniformLengthIn
from service.schemas.sizing import (
    EngineArgsOut,
    KnobsOut,
    PlanOut,
    PredictedOut,
    RejectedOut,
    SizingRequest,
    SizingResponse,
)

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


def upper_tokens(spec: LengthIn) -> int:
    """The longest length a spec draws (unclipped normal/log-normal: four times the mean)."""
    if isinstance(spec, int):
        return spec
    if isinstance(spec, FixedLengthIn):
        return spec.tokens
    if isinstance(spec, UniformLengthIn):
        return spec.high_tokens
    if spec.max_tokens is not None:
        return spec.max_tokens
    return max(spec.min_tokens, math.ceil(4 * spec.mean_tokens))


def default_max_model_len(input_tokens: LengthIn, output_tokens: LengthIn) -> int:
    """The smallest power of two (at least 2048) that holds the longest request."""
    longest = upper_tokens(input_tokens) + upper_tokens(output_tokens)
    return max(2048, 1 << (longest - 1).bit_length())


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
        elapsed_s=result.elapsed_s,
        cached=False,
        warnings=list(result.warnings),
    )


def _hardware(
    body: SizingRequest, session: SessionDep
) -> tuple[list[HardwareSpec], dict[str, float], dict[str, MeasuredProfile]]:
    repo = HardwareRepository(session)
    ids = body.candidates.hardware
    if ids is None:
        rows = list(repo.page(offset=0, limit=MAX_PROFILES, vendor=None, kind=None)[0])
    else:
        rows = []
        for i, profile_id in enumerate(ids):
            row = repo.get(profile_id)
            if row is None:
                raise UnprocessableError(
                    f"no hardware profile {profile_id!r}",
                    slug="unknown-hardware",
                    errors=[
                        {
                            "location": "body",
                            "pointer": f"/candidates/hardware/{i}",
                            "detail": f"no hardware profile {profile_id!r}",
                        }
                    ],
                )
            rows.append(row)
    unknown = sorted(set(body.prices) - {r.id for r in rows})
    if unknown:
        raise UnprocessableError(
            f"prices given for hardware outside the search: {', '.join(unknown)}",
            slug="unknown-hardware",
            errors=[
                {"location": "body", "pointer": f"/prices/{k}", "detail": "not a candidate"}
                for k in unknown
            ],
        )
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
    lengths = cand.max_model_len or [
        default_max_model_len(traffic.input_tokens, traffic.output_tokens)
    ]
    clip = max(lengths)
    objective = body.slo.to_core()
    try:
        space = SearchSpace(
            hardware=tuple(specs),
            engines=tuple(cand.engines),
            tensor_parallel=tuple(cand.tensor_parallel),
            pipeline_parallel=tuple(cand.pipeline_parallel),
            data_parallel=tuple(cand.data_parallel),
            expert_parallel=tuple(cand.expert_parallel),
            max_num_seqs=tuple(cand.max_num_seqs or [None]),
            max_num_batched_tokens=tuple(
                cand.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
            ),
            gpu_memory_utilization=tuple(cand.gpu_memory_utilization or [None]),
            kv_cache_dtype=tuple(cand.kv_cache_dtype or DEFAULT_KV_CACHE_DTYPES),
            max_model_len=tuple(lengths),
            disaggregation=cand.disaggregation,
            max_gpus=cand.max_gpus,
        )
    except ValueError as exc:
        raise UnprocessableError(
            str(exc),
            slug="invalid-candidates",
            errors=[{"location": "body", "pointer": "/candidates", "detail": str(exc)}],
        ) from None
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
