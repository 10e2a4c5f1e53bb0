"""Step times and closed-loop steady state from the step-time model."""

from __future__ import annotations

from fastapi import APIRouter

from servesize.api.deps import ReadAccess, SessionDep
from servesize.api.engine_model import engine_model
from servesize.api.routes.models import CatalogIndexDep
from servesize.core.steptime import closed_loop
from servesize.schemas.memory import AppliedDefaultOut
from servesize.schemas.performance import (
    ArithmeticIntensity,
    PerformanceRequest,
    PerformanceResponse,
    PhaseBound,
)

router = APIRouter(prefix="/v1", tags=["performance"], dependencies=[ReadAccess])


@router.post("/performance", response_model=PerformanceResponse)
def performance(
    body: PerformanceRequest, session: SessionDep, index: CatalogIndexDep
) -> PerformanceResponse:
    """Prefill and decode step times, zero-load TTFT, and the closed-loop steady state."""
    built = engine_model(
        model_ref=body.model,
        hardware_ref=body.hardware,
        deployment_in=body.deployment,
        catalog=index.catalog,
        session=session,
        use_measurements=body.use_measurements,
        calibrated=body.calibrated,
    )
    model, hardware, memory, step_model = (
        built.model,
        built.hardware,
        built.memory,
        built.step_model,
    )
    res = memory.deployment
    work = body.workload
    estimate = closed_loop(
        step_model,
        concurrency=work.concurrency,
        input_tokens=work.input_tokens,
        output_tokens=work.output_tokens,
        kv_capacity_tokens=memory.kv_capacity_tokens,
    )
    ttft = float(estimate.ttft_s[0])
    tpot = float(estimate.tpot_s[0])
    warnings = list(memory.warnings)
    if float(estimate.resident_sequences[0]) < work.concurrency:
        warnings.append(
            f"only {float(estimate.resident_sequences[0]):.1f} of {work.concurrency} requests fit "
            "in the batch at once (max_num_seqs or KV capacity); the rest wait for admission"
        )
    return PerformanceResponse(
        model=model.id,
        hardware=hardware.id,
        engine=res.engine,
        concurrency=work.concurrency,
        input_tokens=work.input_tokens,
        output_tokens=work.output_tokens,
        prefill_time_s=float(estimate.prefill_time_s[0]),
        decode_step_time_s=float(estimate.decode_step_time_s[0]),
        ttft_zero_load_s=float(estimate.ttft_zero_load_s[0]),
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=ttft + tpot * (work.output_tokens - 1),
        throughput_output_tokens_per_s=float(estimate.throughput_output_tokens_per_s[0]),
        throughput_requests_per_s=float(estimate.request_rate_per_s[0]),
        resident_sequences=float(estimate.resident_sequences[0]),
        admission_wait_s=float(estimate.admission_wait_s[0]),
        bound=PhaseBound(
            prefill=str(estimate.prefill_bound[0]), decode=str(estimate.decode_bound[0])
        ),
        arithmetic_intensity=ArithmeticIntensity(
            prefill=float(estimate.prefill_arithmetic_intensity[0]),
            decode=float(estimate.decode_arithmetic_intensity[0]),
        ),
        ridge_point_flops_per_byte=float(step_model.ridge_point_flops_per_byte),
        kv_capacity_tokens=memory.kv_capacity_tokens,
        weights_bytes_per_gpu=memory.weights_bytes_per_gpu,
        sources=dict(estimate.sources),
        defaults_applied=[
            AppliedDefaultOut.model_validate(d, from_attributes=True) for d in res.defaults
        ],
        warnings=warnings,
    )
