"""API-key schemas."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from servesize.schemas.base import RequestModel, ResponseModel
from servesize.security import Scope


class ApiKeyCreate(RequestModel):
    name: str = Field(min_length=1, max_length=200, examples=["ci-uploader"])
    """A unique human-readable name."""
    scopes: list[Scope] = Field(min_length=1, examples=[["profiles:write"]])
    """What the key may write; ``admin`` implies every scope."""


class ApiKeyOut(ResponseModel):
    key_id: str
    name: str
    scopes: list[str]
    created_at: datetime
    revoked_at: datetime | None
    revoked: bool


class ApiKeyCreated(ApiKeyOut):
    key: str = Field(description="The full key. It is shown once and cannot be recovered.")
