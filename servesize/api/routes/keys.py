"""API keys over HTTP (scope ``admin``); the CLI makes the first one."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from servesize.api.deps import AdminKey, KeyRepoDep, ReadAccess
from servesize.api.errors import ConflictError, NotFoundError
from servesize.schemas.keys import ApiKeyCreate, ApiKeyCreated, ApiKeyOut

router = APIRouter(prefix="/v1/keys", tags=["keys"], dependencies=[ReadAccess])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ApiKeyCreated)
def create_key(
    body: ApiKeyCreate, keys: KeyRepoDep, admin: AdminKey, response: Response
) -> ApiKeyCreated:
    """Create a key; the response holds the full key, shown this once (``Cache-Control:
    no-store``: no cache on the way may keep it)."""
    response.headers["Cache-Control"] = "no-store"
    if any(k.name == body.name for k in keys.list()):
        raise ConflictError(f"an API key named {body.name!r} exists already")
    row, new = keys.create(name=body.name, scopes=body.scopes, created_by=admin.id)
    return ApiKeyCreated.model_validate(
        {**ApiKeyOut.model_validate(row).model_dump(), "key": new.token}
    )


@router.get("", response_model=list[ApiKeyOut])
def list_keys(keys: KeyRepoDep, _admin: AdminKey) -> list[ApiKeyOut]:
    """Every key, revoked ones included (never their secrets)."""
    return [ApiKeyOut.model_validate(k) for k in keys.list()]


@router.delete("/{key_id}", response_model=ApiKeyOut)
def revoke_key(key_id: str, keys: KeyRepoDep, admin: AdminKey) -> ApiKeyOut:
    """Revoke a key (idempotent); it stops working at once. An admin key cannot revoke itself
    while it is the last live admin key (409): that would leave no way to manage keys over
    HTTP (the CLI's ``servesize keys`` still can)."""
    if key_id == admin.key_id and keys.live_admin_count() <= 1:
        raise ConflictError(
            "this is the last live admin key; create another admin key before revoking it"
        )
    row = keys.revoke(key_id)
    if row is None:
        raise NotFoundError(f"no API key with id {key_id!r}")
    return ApiKeyOut.model_validate(row)
