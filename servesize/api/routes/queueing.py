"""Analytic queueing (Tier A, generic): answers in microseconds from closed forms."""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Body, Request
from pydantic import ValidationError

from servesize.api.compute import GatesDep
from servesize.api.deps import LookupsDep, ReadAccess
from servesize.api.errors import UnprocessableError
from servesize.api.lookups import LookupCache
from servesize.api.replica_resolver import ReplicaInputs, compile_inputs, lookup_inputs
from servesize.core.queueing import (
    GGcResult,
    MG1Result,
    MMcResult,
    ModelValidity,
    ggc,
    littles_law,
    mg1,
    mmc,
)
from servesize.core.steptime import open_loop
from servesize.schemas.queueing import (
    ContinuousBatchingIn,
    LittlesLawIn,
    QueueIn,
    QueueingRequest,
    QueueingResponse,
    ValidityOut,
)

router = APIRouter(prefix="/v1", tags=["queueing"], dependencies=[ReadAccess])

EXAMPLES = {
    "littles_law": {
        "summary": "The seed's example: 10 req/s × 2 s",
        "value": {"model": "littles_law", "arrival_rate_per_s": 10, "residence_time_s": 2},
    },
    "mmc": {
        "summary": "M/M/10 at 8 Erlangs",
        "value": {"model": "mmc", "arrival_rate_per_s": 8, "service_time_s": 1, "servers": 10},
    },
    "continuous_batching": {
        "summary": "Llama-3.1-8B on an H100 at 5 requests/s",
        "value": {
            "model": "continuous_batching",
            "llm": "meta-llama/Llama-3.1-8B",
            "hardware": "h100-sxm",
            "arrival_rate_per_s": 5,
            "input_tokens": 1024,
            "output_tokens": 256,
        },
    },
    "mg1": {
        "summary": "M/D/1 at 80 % load",
        "value": {"model": "mg1", "arrival_rate_per_s": 0.8, "service_time_s": 1, "service_scv": 0},
    },
}


def _validity(v: ModelValidity) -> ValidityOut:
    return ValidityOut(
        model=v.model,
        method=v.method,
        exact=v.exact,
        percentiles=v.percentiles,
        assumptions=list(v.assumptions),
        caveats=list(v.caveats),
    )


def _key(p: float) -> str:
    return f"p{p * 100:.10g}"


def _queue(body: QueueIn) -> QueueingResponse:
    result: MMcResult | MG1Result | GGcResult
    if body.model == "mmc":
        result = mmc(
            arrival_rate_per_s=body.arrival_rate_per_s,
            service_time_s=body.service_time_s,
            servers=body.servers,
        )
    elif body.model == "mg1":
        result = mg1(
            arrival_rate_per_s=body.arrival_rate_per_s,
            service_time_s=body.service_time_s,
            service_scv=body.service_scv,
        )
    else:
        result = ggc(
            arrival_rate_per_s=body.arrival_rate_per_s,
            service_time_s=body.service_time_s,
            servers=body.servers,
            arrival_scv=body.arrival_scv,
            service_scv=body.service_scv,
        )
    response = QueueingResponse(
        model=body.model,
        arrival_rate_per_s=result.arrival_rate_per_s,
        utilization=result.utilization,
        stable=result.stable,
        saturation_rate_per_s=result.saturation_rate_per_s,
        mean_wait_s=result.mean_wait_s,
        mean_response_s=result.mean_wait_s + result.service_time_s,
        validity=_validity(result.validity),
    )
    if isinstance(result, MMcResult | MG1Result):
        response.wait_probability = result.wait_probability
        response.mean_queue_length = result.mean_queue_length
        response.mean_in_system = result.mean_in_system
        response.wait_percentiles_s = {
            _key(p): result.wait_percentile_s(p) for p in body.percentiles
        }
    if isinstance(result, MMcResult):
        response.response_percentiles_s = {
            _key(p): result.response_percentile_s(p) for p in body.percentiles
        }
    return response


def _llm_inputs(body: ContinuousBatchingIn, lookups: LookupCache) -> ReplicaInputs:
    return lookup_inputs(
        lookups, model_ref=body.llm, hardware_ref=body.hardware, model_pointer="/llm"
    )


def _continuous_batching(body: ContinuousBatchingIn, inputs: ReplicaInputs) -> QueueingResponse:
    built = compile_inputs(inputs, body.deployment)
    longest = built.memory.max_model_len
    if body.input_tokens + body.output_tokens > longest:
        detail = (
            f"input_tokens + output_tokens ({body.input_tokens + body.output_tokens}) exceed "
            f"max_model_len ({longest}): the engine refuses such requests"
        )
        raise UnprocessableError(
            detail,
            slug="request-too-long",
            errors=[
                {"location": "body", "pointer": "/input_tokens", "detail": detail},
                {"location": "body", "pointer": "/output_tokens", "detail": detail},
            ],
        )
    r = open_loop(
        built.step_model,
        arrival_rate_per_s=body.arrival_rate_per_s,
        input_tokens=body.input_tokens,
        output_tokens=body.output_tokens,
        kv_capacity_tokens=built.replica.kv_capacity_tokens,
    )
    caveats = [] if r.utilization <= 0.9 else ["utilisation above 0.9: simulate to decide"]
    if built.calibration is not None:
        caveats.append(built.calibration.note())
    return QueueingResponse(
        model="continuous_batching",
        arrival_rate_per_s=r.arrival_rate_per_s,
        utilization=r.utilization,
        stable=True,
        saturation_rate_per_s=r.saturation_rate_per_s,
        wait_probability=r.prefill_utilization,
        mean_wait_s=r.prefill_wait_mean_s,
        mean_in_system=r.resident_sequences,
        ttft_s={
            "mean": r.ttft_mean_s,
            "p50": r.ttft_p50_s,
            "p95": r.ttft_p95_s,
            "p99": r.ttft_p99_s,
        },
        tpot_s=r.tpot_s,
        e2e_mean_s=r.e2e_mean_s,
        throughput_output_tokens_per_s=r.throughput_output_tokens_per_s,
        validity=ValidityOut(
            model="continuous batching (mean-field step-time fixed point)",
            method="X(L) = L/(N·τ̄) solved for L at the arrival rate; M/D/1 prefill queue",
            exact=False,
            percentiles="approximate",
            assumptions=list(r.assumptions),
            caveats=caveats,
        ),
    )


def _check_littles_law(body: LittlesLawIn) -> None:
    """422 with a pointer when the third quantity cannot be solved for or is not finite."""
    lam, w, n = body.arrival_rate_per_s, body.residence_time_s, body.in_flight
    problem: tuple[str, str] | None = None
    if n is not None and lam is not None and lam == 0:
        problem = ("arrival_rate_per_s", "must be > 0 to solve for residence_time_s = L / λ")
    elif n is not None and w is not None and w == 0:
        problem = ("residence_time_s", "must be > 0 to solve for arrival_rate_per_s = L / W")
    elif lam is not None and w is not None and not math.isfinite(lam * w):
        problem = ("arrival_rate_per_s", "λ·W overflows: the product is not a finite number")
    elif n is not None and (lam or w):
        divisor = lam if lam is not None else w
        assert divisor is not None
        if not math.isfinite(n / divisor):
            field = "in_flight"
            problem = (field, "L divided by the other quantity is not a finite number")
    if problem is not None:
        field, detail = problem
        raise UnprocessableError(
            f"{field} {detail}",
            slug="invalid-littles-law",
            errors=[{"location": "body", "pointer": f"/{field}", "detail": detail}],
        )


def _closed_form(body: QueueingRequest) -> QueueingResponse:
    if isinstance(body, LittlesLawIn):
        _check_littles_law(body)
        r = littles_law(
            arrival_rate_per_s=body.arrival_rate_per_s,
            residence_time_s=body.residence_time_s,
            in_flight=body.in_flight,
        )
        return QueueingResponse(
            model="littles_law",
            arrival_rate_per_s=r.arrival_rate_per_s,
            residence_time_s=r.residence_time_s,
            in_flight=r.in_flight,
            solved_for=r.solved_for,
            validity=_validity(r.validity),
        )
    assert not isinstance(body, ContinuousBatchingIn)
    return _finite_queue(body)


def _finite_queue(body: QueueIn) -> QueueingResponse:
    """:func:`_queue`, or a 422 naming the inputs when a result overflows a double (a service
    time of 5e-324 s is a saturation rate of ``c / S = inf``) and so has no finite answer."""
    try:
        return _queue(body)
    except ValidationError as exc:
        if not any(e["type"] == "finite_number" for e in exc.errors()):
            raise
    detail = "the result overflows a double at these inputs; use rates and times within 1e-9..1e9"
    raise UnprocessableError(
        f"arrival_rate_per_s and service_time_s: {detail}",
        slug="numeric-overflow",
        errors=[
            {"location": "body", "pointer": f"/{field}", "detail": detail}
            for field in ("arrival_rate_per_s", "service_time_s")
        ],
    )


@router.post("/queueing", response_model=QueueingResponse)
async def queueing(
    body: Annotated[QueueingRequest, Body(openapi_examples=EXAMPLES)],
    request: Request,
    lookups: LookupsDep,
    gates: GatesDep,
) -> QueueingResponse:
    """Little's law in any direction, M/M/c (Erlang C), M/G/1 (Pollaczek–Khinchine), G/G/c
    (Kingman, Allen–Cunneen), and the model mode ``continuous_batching`` (an engine replica
    under Poisson arrivals, from the step-time model). An unstable queue is a 422."""
    if isinstance(body, ContinuousBatchingIn):
        llm = body
        return await gates.estimate.run(
            request,
            lambda inputs: _continuous_batching(llm, inputs),
            lambda: _llm_inputs(llm, lookups),
        )
    return await gates.estimate.run(request, lambda _: _closed_form(body))
