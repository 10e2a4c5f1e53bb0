"""API keys: generation, parsing, keyed hashing and scopes.

A key reads ``ssk_<key_id>_<secret>``. ``key_id`` (16 hex characters) is public and indexes
the row; only ``HMAC-SHA256(instance_secret, secret)`` is stored, and the comparison is done in
constant time with :func:`hmac.compare_digest`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum

KEY_PREFIX = "ssk"


class Scope(StrEnum):
    """What a key may write. ``admin`` implies every other scope."""

    MODELS_WRITE = "models:write"
    PROFILES_WRITE = "profiles:write"
    PLANS_WRITE = "plans:write"
    JOBS_WRITE = "jobs:write"
    TRACES_WRITE = "traces:write"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class NewKey:
    key_id: str
    secret: str

    @property
    def token(self) -> str:
        """The full key, shown to its owner exactly once."""
        return f"{KEY_PREFIX}_{self.key_id}_{self.secret}"


def generate_key() -> NewKey:
    return NewKey(key_id=secrets.token_hex(8), secret=secrets.token_urlsafe(32))


def parse_key(token: str) -> NewKey | None:
    """Split a presented key into its parts; ``None`` if it is not shaped like one of ours."""
    prefix, sep, rest = token.partition("_")
    if prefix != KEY_PREFIX or not sep:
        return None
    key_id, sep, secret = rest.partition("_")
    if not sep or len(key_id) != 16 or not secret:
        return None
    return NewKey(key_id=key_id, secret=secret)


def hash_secret(secret: str, *, instance_secret: bytes) -> str:
    return hmac.new(instance_secret, secret.encode(), hashlib.sha256).hexdigest()


def verify_secret(secret: str, stored_hash: str, *, instance_secret: bytes) -> bool:
    return hmac.compare_digest(hash_secret(secret, instance_secret=instance_secret), stored_hash)


def grants(scopes: list[str] | tuple[str, ...], required: Scope) -> bool:
    """True when a key with ``scopes`` may act under ``required``."""
    return Scope.ADMIN.value in scopes or required.value in scopes
