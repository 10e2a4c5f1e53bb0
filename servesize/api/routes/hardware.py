"""Hardware profiles and their measurements."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Path, Query, Request, Response, status

from servesize.api.deps import AdminKey, ProfilesWriteKey, ReadAccess, SessionDep
from servesize.api.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    PreconditionFailedError,
    PreconditionRequiredError,
    UnprocessableError,
)
from servesize.api.hardware_resolver import inter_node_spec
from servesize.api.hardware_views import (
    measurement_out,
    measurement_summary,
    profile_out,
    profile_summary,
)
from servesize.api.ownership import require_owner
from servesize.api.pagination import PageDep
from servesize.core.errors import FieldIssue
from servesize.core.hardware import (
    BandwidthSample,
    CollectiveSample,
    GemmSample,
    device_matches,
    identity_tokens,
    implausible_values,
)
from servesize.db.models import HardwareMeasurement, HardwareProfile, inter_node_json
from servesize.db.repository import HardwareRepository
from servesize.db.types import utc_now
from servesize.schemas.base import Page
from servesize.schemas.hardware import (
    HardwareProfileCreate,
    HardwareProfileOut,
    HardwareProfilePatch,
    HardwareProfileSummary,
    MeasurementOut,
    MeasurementSummary,
)
from servesize.schemas.measurements import MeasurementUpload

router = APIRouter(prefix="/v1/hardware", tags=["hardware"], dependencies=[ReadAccess])

RECENT_MEASUREMENTS = 100
"""Measurements read to derive a profile's figures (each from the newest that carries it)."""
MEMORY_MATCH_TOLERANCE = 0.10
"""A device whose total memory differs from the profile's by more than this is another part."""
DATASHEET_MUTABLE_FIELDS = frozenset({"price", "notes"})


def _etag(row: HardwareProfile) -> str:
    return f'"{row.id}-v{row.version}"'


def _load(repo: HardwareRepository, profile_id: str) -> HardwareProfile:
    row = repo.get(profile_id)
    if row is None:
        raise NotFoundError(f"no hardware profile {profile_id!r}")
    return row


def _detail(repo: HardwareRepository, row: HardwareProfile) -> HardwareProfileOut:
    recent = repo.measurements(row.id, limit=RECENT_MEASUREMENTS)
    count = repo.measurement_counts([row.id]).get(row.id, 0)
    return profile_out(row, recent, count)


_ENTITY_TAG = re.compile(r'\s*((?:W/)?"[\x21\x23-\x7e\x80-\xff]*")\s*(?:,|$)')
"""One ``entity-tag`` of a list (RFC 9110 §8.8.3: ``[W/] DQUOTE *etagc DQUOTE``; an
``etagc`` may be a comma, so the list is split on tags, not on commas)."""


def if_match_tags(value: str) -> list[str] | None:
    """The entity tags of an ``If-Match`` value (RFC 9110 §13.1.1: ``"*"`` or
    ``1#entity-tag``, empty list elements allowed); ``["*"]`` for ``*``; ``None`` when the
    value is not of that form."""
    text = value.strip()
    if text == "*":
        return ["*"]
    tags: list[str] = []
    position = 0
    while position < len(text):
        if text[position] in ", \t":
            position += 1
            continue
        match = _ENTITY_TAG.match(text, position)
        if match is None:
            return None
        tags.append(match.group(1))
        position = match.end()
    return tags or None


def _check_if_match(row: HardwareProfile, if_match: str | None) -> None:
    """RFC 9110 §13.1.1: the condition holds for ``*`` or when any listed tag matches the
    current one by strong comparison (a weak ``W/`` tag never does)."""
    if if_match is None:
        raise PreconditionRequiredError(
            "send If-Match with the ETag from GET, so concurrent edits cannot overwrite each other"
        )
    tags = if_match_tags(if_match)
    if tags is None:
        raise BadRequestError(
            'If-Match must be "*" or a comma-separated list of quoted entity tags',
            errors=[{"location": "header", "pointer": "/If-Match", "detail": "malformed"}],
        )
    if "*" not in tags and _etag(row) not in tags:
        raise PreconditionFailedError(
            f"the profile changed: its ETag is now {_etag(row)}", current_etag=_etag(row)
        )


IfMatch = Annotated[str | None, Header(description="ETag from GET /v1/hardware/{id}.")]


@router.get("", response_model=Page[HardwareProfileSummary])
def list_profiles(
    session: SessionDep,
    page: PageDep,
    vendor: Annotated[str | None, Query(max_length=64)] = None,
    kind: Annotated[Literal["datasheet", "custom"] | None, Query()] = None,
) -> Page[HardwareProfileSummary]:
    """Hardware profiles, datasheet and custom, by id."""
    repo = HardwareRepository(session)
    rows, total = repo.page(offset=page.offset, limit=page.limit, vendor=vendor, kind=kind)
    counts = repo.measurement_counts([r.id for r in rows])
    return page.page([profile_summary(r, counts.get(r.id, 0)) for r in rows], total)


@router.get("/{profile_id}", response_model=HardwareProfileOut)
def get_profile(profile_id: str, session: SessionDep, response: Response) -> HardwareProfileOut:
    """Datasheet figures, the latest measurement and the efficiencies the planner uses."""
    repo = HardwareRepository(session)
    row = _load(repo, profile_id)
    response.headers["ETag"] = _etag(row)
    return _detail(repo, row)


def _apply(
    row: HardwareProfile,
    fields: dict[str, object],
    body: HardwareProfilePatch | HardwareProfileCreate,
) -> None:
    for name in fields:
        if name == "interconnect":
            link = body.interconnect
            row.interconnect_kind = link.kind if link else None
            row.interconnect_bandwidth_bytes_per_s = link.bandwidth_bytes_per_s if link else None
            row.gpus_per_node = link.gpus_per_node if link else 8
        elif name == "inter_node":
            row.inter_node = inter_node_json(inter_node_spec(body.inter_node))
        elif name == "price":
            price = body.price
            row.price_per_gpu_hour = price.per_gpu_hour if price else None
            row.price_currency = price.currency if price else None
            row.price_as_of = price.as_of if price else None
            row.price_source = price.source if price else None
        elif name == "peak_tflop_per_s":
            row.peak_tflop_per_s = dict(fields[name])  # type: ignore[call-overload]
        elif name == "identity_tokens":
            tokens = getattr(body, "identity_tokens", None)
            row.identity_tokens = (
                [t.lower() for t in tokens]
                if tokens is not None
                else list(identity_tokens(row.name))
            )
        else:
            setattr(row, name, fields[name])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=HardwareProfileOut)
def create_profile(
    body: HardwareProfileCreate, session: SessionDep, response: Response, admin: AdminKey
) -> HardwareProfileOut:
    """Create a custom profile (scope ``admin``)."""
    repo = HardwareRepository(session)
    if repo.get(body.id) is not None:
        raise ConflictError(f"a hardware profile {body.id!r} exists already")
    now = utc_now()
    row = HardwareProfile(
        id=body.id,
        kind="custom",
        vendor=body.vendor,
        name=body.name,
        memory_bytes=body.memory_bytes,
        memory_bandwidth_bytes_per_s=body.memory_bandwidth_bytes_per_s,
        peak_tflop_per_s={},
        identity_tokens=[],
        unverified_fields=[],
        created_at=now,
        updated_at=now,
        owner_key_id=admin.id,
    )
    _apply(row, body.model_dump(exclude={"id"}) | {"identity_tokens": None}, body)
    repo.add(row)
    response.headers["ETag"] = _etag(row)
    response.headers["Location"] = f"/v1/hardware/{row.id}"
    return _detail(repo, row)


@router.patch("/{profile_id}", response_model=HardwareProfileOut)
def patch_profile(
    profile_id: str,
    body: HardwareProfilePatch,
    session: SessionDep,
    response: Response,
    admin: AdminKey,
    if_match: IfMatch = None,
) -> HardwareProfileOut:
    """Change a profile (scope ``admin``; ``If-Match`` required). Datasheet profiles accept
    only ``price`` and ``notes``."""
    repo = HardwareRepository(session)
    row = _load(repo, profile_id)
    require_owner(row.owner_key_id, admin, f"hardware profile {row.id!r}")
    _check_if_match(row, if_match)
    fields = body.model_dump(exclude_unset=True)
    if row.kind == "datasheet":
        read_only = sorted(set(fields) - DATASHEET_MUTABLE_FIELDS)
        if read_only:
            raise UnprocessableError(
                f"datasheet profile {row.id!r} is read-only except price and notes; "
                "create a custom profile to change other fields",
                slug="read-only-field",
                errors=[
                    {"location": "body", "pointer": f"/{f}", "detail": "read-only"}
                    for f in read_only
                ],
            )
    _apply(row, fields, body)
    row.updated_at = utc_now()
    session.flush()
    response.headers["ETag"] = _etag(row)
    return _detail(repo, row)


@router.delete("/{profile_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_profile(
    profile_id: str, session: SessionDep, admin: AdminKey, if_match: IfMatch = None
) -> Response:
    """Delete a custom profile that has no measurements (scope ``admin``; ``If-Match``)."""
    repo = HardwareRepository(session)
    row = _load(repo, profile_id)
    if row.kind == "datasheet":
        raise ConflictError(f"datasheet profile {row.id!r} cannot be deleted")
    require_owner(row.owner_key_id, admin, f"hardware profile {row.id!r}")
    _check_if_match(row, if_match)
    count = repo.measurement_counts([row.id]).get(row.id, 0)
    if count:
        raise ConflictError(
            f"profile {row.id!r} has {count} measurements; measurements are never discarded"
        )
    repo.delete(row)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _fingerprint(request: Request, body: MeasurementUpload) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"POST {request.url.path}\n{canonical}".encode()).hexdigest()


def _identity_issues(row: HardwareProfile, body: MeasurementUpload) -> list[FieldIssue]:
    issues: list[FieldIssue] = []
    tokens = tuple(row.identity_tokens)
    if not device_matches(body.provenance.gpu_name, tokens):
        issues.append(
            FieldIssue(
                "/provenance/gpu_name",
                f"device {body.provenance.gpu_name!r} is not a {row.name} "
                f"(its name must contain {' '.join(tokens)!r})",
            )
        )
    measured = body.provenance.gpu_memory_bytes
    if (
        measured is not None
        and abs(measured - row.memory_bytes) > MEMORY_MATCH_TOLERANCE * row.memory_bytes
    ):
        issues.append(
            FieldIssue(
                "/provenance/gpu_memory_bytes",
                f"{measured} bytes differs from the profile's {row.memory_bytes} by more than "
                f"{MEMORY_MATCH_TOLERANCE:.0%}",
            )
        )
    return issues


def _as_errors(issues: list[FieldIssue]) -> list[dict[str, str]]:
    return [{"location": "body", "pointer": i.field, "detail": i.problem} for i in issues]


def _check_idempotency_key(idempotency_key: str | None) -> str:
    if idempotency_key is None or not idempotency_key.strip():
        raise BadRequestError("an Idempotency-Key header is required for uploads")
    if len(idempotency_key) > 255:
        raise BadRequestError("the Idempotency-Key header is longer than 255 characters")
    return idempotency_key


def _replayed(
    repo: HardwareRepository, api_key_id: int, idempotency_key: str, fingerprint: str
) -> HardwareMeasurement | None:
    """The measurement an earlier upload with this key stored (the same request only)."""
    earlier = repo.by_idempotency_key(api_key_id, idempotency_key)
    if earlier is not None and earlier.request_sha256 != fingerprint:
        raise UnprocessableError(
            "this Idempotency-Key was used for a different request; use a new key",
            slug="idempotency-key-reused",
            errors=[{"location": "header", "pointer": "", "detail": "Idempotency-Key reused"}],
        )
    return earlier


def _check_plausible(row: HardwareProfile, body: MeasurementUpload) -> None:
    """Refuse an upload from another device, or with figures the profile's peaks exclude."""
    issues = _identity_issues(row, body)
    issues += implausible_values(
        row.to_spec(),
        gemm=[
            GemmSample(dtype=g.dtype, achieved_tflop_per_s=g.achieved_tflop_per_s)
            for g in body.gemm
        ],
        bandwidth=[
            BandwidthSample(achieved_bytes_per_s=b.achieved_bytes_per_s)
            for b in body.memory_bandwidth
        ],
        collectives=[
            CollectiveSample(
                num_gpus=c.num_gpus, bus_bandwidth_bytes_per_s=c.bus_bandwidth_bytes_per_s
            )
            for c in body.collectives
        ],
    )
    if issues:
        raise UnprocessableError(
            f"the upload cannot be a measurement of {row.name}: "
            + "; ".join(i.problem for i in issues[:3]),
            slug="implausible-measurement",
            errors=_as_errors(issues),
        )


def _measurement_row(
    row: HardwareProfile,
    body: MeasurementUpload,
    *,
    api_key_id: int,
    idempotency_key: str,
    fingerprint: str,
) -> HardwareMeasurement:
    provenance = body.provenance
    return HardwareMeasurement(
        profile_id=row.id,
        api_key_id=api_key_id,
        idempotency_key=idempotency_key,
        request_sha256=fingerprint,
        received_at=utc_now(),
        measured_at=provenance.measured_at,
        agent_version=provenance.agent_version,
        method_version=provenance.method_version,
        host=provenance.host,
        device=provenance.device,
        gpu_name=provenance.gpu_name,
        gpu_uuid=provenance.gpu_uuid,
        payload=body.model_dump(mode="json"),
        owner_key_id=api_key_id,
    )


@router.post(
    "/{profile_id}/measurements",
    status_code=status.HTTP_201_CREATED,
    response_model=MeasurementOut,
    responses={
        400: {"description": "Idempotency-Key missing"},
        409: {"description": "A request with this key is being stored concurrently"},
        422: {"description": "Impossible values, wrong device, or a reused Idempotency-Key"},
    },
)
def upload_measurement(
    profile_id: str,
    body: MeasurementUpload,
    request: Request,
    response: Response,
    session: SessionDep,
    key: ProfilesWriteKey,
    idempotency_key: Annotated[
        str | None, Header(description="Unique per upload; a replay returns the original.")
    ] = None,
) -> MeasurementOut:
    """Store a measurement (scope ``profiles:write``). Nothing partial is ever stored."""
    idempotency_key = _check_idempotency_key(idempotency_key)
    repo = HardwareRepository(session)
    row = _load(repo, profile_id)
    fingerprint = _fingerprint(request, body)
    stored = _replayed(repo, key.id, idempotency_key, fingerprint)
    if stored is not None:
        response.headers["Idempotent-Replayed"] = "true"
    else:
        _check_plausible(row, body)
        stored = repo.add_measurement(
            _measurement_row(
                row,
                body,
                api_key_id=key.id,
                idempotency_key=idempotency_key,
                fingerprint=fingerprint,
            )
        )
    response.headers["Location"] = f"/v1/hardware/{row.id}/measurements/{stored.id}"
    return measurement_out(stored)


@router.get("/{profile_id}/measurements", response_model=Page[MeasurementSummary])
def list_measurements(
    profile_id: str, session: SessionDep, page: PageDep
) -> Page[MeasurementSummary]:
    """Measurement history, newest first."""
    repo = HardwareRepository(session)
    row = _load(repo, profile_id)
    rows = repo.measurements(row.id, offset=page.offset, limit=page.limit)
    total = repo.measurement_counts([row.id]).get(row.id, 0)
    return page.page([measurement_summary(m) for m in rows], total)


@router.get("/{profile_id}/measurements/{measurement_id}", response_model=MeasurementOut)
def get_measurement(
    profile_id: str,
    # The id column is INTEGER: PostgreSQL refuses a larger parameter ("integer out of range").
    measurement_id: Annotated[int, Path(ge=1, le=2**31 - 1)],
    session: SessionDep,
) -> MeasurementOut:
    """One measurement with its full payload."""
    repo = HardwareRepository(session)
    _load(repo, profile_id)
    stored = repo.get_measurement(profile_id, measurement_id)
    if stored is None:
        raise NotFoundError(f"no measurement {measurement_id} of profile {profile_id!r}")
    return measurement_out(stored)
