"""Step times and closed-loop steady state from the step-time model (no database session:
the lookup cache resolves the references, the estimate gate runs the work)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from servesize.api.compute import GatesDep
from servesize.api.deps import LookupsDep, ReadAccess
from servesize.api.performance_views import performance_estimate, performance_response
from servesize.api.render.uncertainty import performance_bands
from servesize.api.replica_resolver import ReplicaInputs, request_inputs, request_replica
from servesize.api.session_views import session_point
from servesize.schemas.performance import PerformanceRequest, PerformanceResponse

router = APIRouter(prefix="/v1", tags=["performance"], dependencies=[ReadAccess])


def _performance(body: PerformanceRequest, inputs: ReplicaInputs) -> PerformanceResponse:
    built = request_replica(body, inputs)
    work, sessions = session_point(built, body.workload)
    estimate = performance_estimate(built, work)
    answer = performance_bands(built, work, performance_response(built, work, estimate))
    return answer if sessions is None else answer.model_copy(update={"sessions": sessions})


@router.post("/performance", response_model=PerformanceResponse)
async def performance(
    body: PerformanceRequest, request: Request, lookups: LookupsDep, gates: GatesDep
) -> PerformanceResponse:
    """Prefill and decode step times, zero-load TTFT, and the closed-loop steady state."""
    return await gates.estimate.run(
        request, lambda inputs: _performance(body, inputs), lambda: request_inputs(body, lookups)
    )
