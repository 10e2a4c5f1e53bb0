"""``GET /v1/accuracy``: predicted against measured over every stored plan verification."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from servesize.api.deps import ReadAccess, SessionDep
from servesize.api.plan_views import accuracy_report
from servesize.schemas.plans import AccuracyOut

router = APIRouter(prefix="/v1/accuracy", tags=["plans"], dependencies=[ReadAccess])


@router.get("", response_model=AccuracyOut)
def get_accuracy(
    session: SessionDep,
    engine: Annotated[str | None, Query(max_length=32, pattern=r"^[a-z0-9_-]+$")] = None,
    hardware: Annotated[str | None, Query(max_length=64, pattern=r"^[a-z0-9_.-]+$")] = None,
) -> AccuracyOut:
    """Per engine and hardware: median measured/predicted ratio and MAPE of TTFT p50/p95 and
    TPOT p50/p95 across the stored ``POST /v1/plans/{id}/verify`` answers. Read-only: nothing
    is recalibrated."""
    return accuracy_report(session, engine=engine, hardware=hardware)


__all__ = ["router"]
