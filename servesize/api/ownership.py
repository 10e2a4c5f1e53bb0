"""Who may change a stored resource: the API key that created it, or any ``admin`` key."""

from __future__ import annotations

from servesize.api.errors import ForbiddenError
from servesize.db.models import ApiKey
from servesize.security import Scope


def may_change(owner_key_id: int | None, key: ApiKey) -> bool:
    """True for the owning key and for ``admin`` keys; a row with no owner (``NULL``: made
    before ownership was recorded, or a datasheet profile) is ``admin``'s only."""
    return Scope.ADMIN.value in key.scopes or (owner_key_id is not None and owner_key_id == key.id)


def require_owner(owner_key_id: int | None, key: ApiKey, resource: str) -> None:
    """403 problem unless ``key`` may change ``resource``."""
    if not may_change(owner_key_id, key):
        raise ForbiddenError(
            f"{resource} belongs to another API key; only its owner or an admin key may "
            "change or delete it",
            required_scope=Scope.ADMIN.value,
        )
