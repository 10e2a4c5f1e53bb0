"""Step times and closed-loop steady state from the step-time model."""

from __future__ import annotations

from fastapi import APIRouter

from servesize.api.deps import ReadAccess, SessionDep
from servesize.api.performance_views import performance_estimate, performance_response
from servesize.api.render.uncertainty import performance_bands
from servesize.api.replica_resolver import request_replica
from servesize.api.routes.models import CatalogIndexDep
from servesize.schemas.performance import PerformanceRequest, PerformanceResponse

router = APIRouter(prefix="/v1", tags=["performance"], dependencies=[ReadAccess])


@router.post("/performance", response_model=PerformanceResponse)
def performance(
    body: PerformanceRequest, session: SessionDep, index: CatalogIndexDep
) -> PerformanceResponse:
    """Prefill and decode step times, zero-load TTFT, and the closed-loop steady state."""
    built = request_replica(body, catalog=index.catalog, session=session)
    work = body.workload
    estimate = performance_estimate(built, work)
    return performance_bands(built, work, performance_response(built, work, estimate))
