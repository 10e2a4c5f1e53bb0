"""Saved plans: the stored answer with its inputs, its deployment artifacts and benchmark job,
the endpoint benchmarks measured for it, and plan against measured."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from servesize.api.deps import OptionalKeyDep, ReadAccess, SessionDep
from servesize.api.plan_views import (
    load_plan,
    plan_benchmarks,
    plan_manifests,
    plan_verifications,
    saved_plan_out,
    verify_plan,
)
from servesize.schemas.manifests import ManifestsOut
from servesize.schemas.plans import (
    SavedPlanOut,
    StoredBenchmarksOut,
    VerificationsOut,
    VerifyRequest,
    VerifyResponse,
)

router = APIRouter(prefix="/v1/plans", tags=["plans"], dependencies=[ReadAccess])
Namespace = Annotated[str | None, Query(max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]


@router.get("/{plan_id}", response_model=SavedPlanOut)
def get_plan(plan_id: str, session: SessionDep) -> SavedPlanOut:
    """The stored answer and every input that determined it: the request, the model config's
    hash, the hardware profiles' versions and measurements read, the prices and their origin,
    and the service version."""
    return saved_plan_out(session, load_plan(session, plan_id))


@router.get("/{plan_id}/manifests", response_model=ManifestsOut)
def get_manifests(
    plan_id: str,
    session: SessionDep,
    rank: Annotated[int, Query(ge=1, le=1000)] = 1,
    namespace: Annotated[
        str | None, Query(max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    ] = None,
) -> ManifestsOut:
    """Kubernetes Service + Deployment (and KServe InferenceService) for the ranked plan, with
    its ``vllm bench serve`` job."""
    return plan_manifests(session, load_plan(session, plan_id), rank, namespace=namespace)


@router.get("/{plan_id}/benchmarks", response_model=StoredBenchmarksOut)
def list_benchmarks(plan_id: str, session: SessionDep) -> StoredBenchmarksOut:
    """Endpoint benchmarks uploaded for the plans' hardware profiles, newest first."""
    row = load_plan(session, plan_id)
    return StoredBenchmarksOut(plan_id=row.id, items=plan_benchmarks(session, row))


VERIFY_EXAMPLES = {
    "stored": {
        "summary": "The top plan against a benchmark uploaded to its hardware profile",
        "value": {"rank": 1, "measurement_id": 12, "benchmark_index": 0},
    }
}


@router.post("/{plan_id}/verify", response_model=VerifyResponse)
def verify(
    plan_id: str,
    body: Annotated[VerifyRequest, Body(openapi_examples=VERIFY_EXAMPLES)],
    session: SessionDep,
    key: OptionalKeyDep,
) -> VerifyResponse:
    """Predicted against measured TTFT, TPOT, ITL, E2E and throughput, with the prediction
    intervals, and whether the request's SLO held on the measured level. With a key of
    scope ``plans:write`` the answer is stored: ``GET /v1/plans/{id}/verifications`` and
    ``GET /v1/accuracy`` read it."""
    return verify_plan(session, load_plan(session, plan_id), body, key=key)


@router.get("/{plan_id}/verifications", response_model=VerificationsOut)
def list_verifications(plan_id: str, session: SessionDep) -> VerificationsOut:
    """Every stored verify answer of the plan, oldest first."""
    return plan_verifications(session, load_plan(session, plan_id))


__all__ = ["router"]
