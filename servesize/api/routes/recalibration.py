"""Recalibration of an engine's constants on a hardware profile from its stored endpoint
benchmarks: preview, apply, list, delete (docs/deployment.md "Recalibration")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, status

from servesize.api.deps import LookupsDep, OptionalKeyDep, ProfilesWriteKey, ReadAccess, SessionDep
from servesize.api.errors import ForbiddenError, NotFoundError, UnauthorizedError
from servesize.api.recalibration_views import calibration_list, recalibrate
from servesize.api.routes.hardware import IfMatch, _check_if_match, _load
from servesize.db.repository import CalibrationRepository, HardwareRepository
from servesize.db.types import utc_now
from servesize.schemas.recalibration import (
    CalibrationsOut,
    RecalibrationOut,
    RecalibrationRequest,
)
from servesize.security import Scope, grants

router = APIRouter(prefix="/v1/hardware", tags=["hardware"], dependencies=[ReadAccess])

RECALIBRATION_EXAMPLES = {
    "preview": {
        "summary": "Preview vLLM's constants refitted to two uploaded benchmark runs",
        "value": {
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B",
            "measurement_ids": [12, 13],
            "apply": False,
        },
    }
}


@router.post(
    "/{profile_id}/recalibration",
    response_model=RecalibrationOut,
)
def post_recalibration(
    profile_id: str,
    body: Annotated[RecalibrationRequest, Body(openapi_examples=RECALIBRATION_EXAMPLES)],
    session: SessionDep,
    lookups: LookupsDep,
    key: OptionalKeyDep,
    if_match: IfMatch = None,
) -> RecalibrationOut:
    """Fit the engine's request overhead and step-time scale to the endpoint benchmarks of
    ``measurement_ids``; before/after constants and errors per level. With ``apply`` (scope
    ``profiles:write``, ``If-Match``) the constants are stored and later predictions of this
    engine on this profile use and name them."""
    row = _load(HardwareRepository(session), profile_id)
    if body.apply:
        scope = Scope.PROFILES_WRITE
        if key is None:
            raise UnauthorizedError(f"applying a recalibration needs scope {scope.value!r}")
        if not grants(key.scopes, scope):
            raise ForbiddenError(
                f"the API key {key.name!r} lacks scope {scope.value!r}",
                required_scope=scope.value,
            )
        _check_if_match(row, if_match)
    return recalibrate(session, lookups, row, body, key)


@router.get(
    "/{profile_id}/recalibration",
    response_model=CalibrationsOut,
)
def get_recalibrations(profile_id: str, session: SessionDep) -> CalibrationsOut:
    """The stored recalibrations of the profile, newest first; the newest per engine is
    ``active`` (the one predictions use)."""
    row = _load(HardwareRepository(session), profile_id)
    return CalibrationsOut(items=calibration_list(session, row.id))


@router.delete(
    "/{profile_id}/recalibration/{calibration_id}",
    status_code=status.HTTP_204_NO_CONTENT,
)
def delete_recalibration(
    profile_id: str,
    calibration_id: str,
    session: SessionDep,
    key: ProfilesWriteKey,
    if_match: IfMatch = None,
) -> None:
    """Remove one recalibration (scope ``profiles:write``, ``If-Match`` of the profile); the
    engine's previous one, or the shipped constants, apply again."""
    row = _load(HardwareRepository(session), profile_id)
    _check_if_match(row, if_match)
    repo = CalibrationRepository(session)
    cal = repo.get(row.id, calibration_id)
    if cal is None:
        raise NotFoundError(f"no recalibration {calibration_id!r} of profile {profile_id!r}")
    repo.delete(cal)
    row.updated_at = utc_now()
    session.flush()
