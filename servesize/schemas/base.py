"""Base classes every request and response schema derives from."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class RequestModel(BaseModel):
    """Strict inputs: unknown fields are errors, NaN and Infinity are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class ResponseModel(BaseModel):
    """Outputs; built from core values or ORM rows."""

    model_config = ConfigDict(from_attributes=True, allow_inf_nan=False)


ItemT = TypeVar("ItemT")


class Page(ResponseModel, Generic[ItemT]):
    """One page of a listing. ``next_offset`` is null on the last page."""

    items: list[ItemT]
    total: int = Field(description="Number of items across all pages.")
    offset: int
    limit: int
    next_offset: int | None
