"""Base classes every request and response schema derives from."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

NUL = "\x00"


def contains_nul(value: Any) -> bool:
    """Whether a string, or any key or string inside nested lists and dicts, holds U+0000.

    PostgreSQL ``text`` and ``jsonb`` cannot store U+0000, so such input is refused when it is
    validated rather than when the database rejects it. Iterative: the body's nesting is bounded
    by the JSON depth limit, but nothing here relies on that.
    """
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if NUL in node:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple | set | frozenset):
            stack.extend(node)
    return False


class RequestModel(BaseModel):
    """Strict inputs: unknown fields are errors, NaN and Infinity are refused, and no string
    (nested ones in free-form objects included) may contain U+0000."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        if not isinstance(value, BaseModel) and contains_nul(value):
            raise ValueError("text must not contain the NUL character (U+0000)")
        return value


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
