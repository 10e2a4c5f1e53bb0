"""Offset pagination parameters and the page builder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Query

from servesize.schemas.base import Page

T = TypeVar("T")
MAX_PAGE_SIZE = 500
MAX_OFFSET = 2**31 - 1
"""Largest ``offset`` accepted: far beyond any listing, and within every database's integer
(SQLite and PostgreSQL ``OFFSET`` are 64-bit; a larger value would fail in the driver)."""


@dataclass(frozen=True, slots=True)
class PageParams:
    offset: int
    limit: int

    def page(self, items: Sequence[T], total: int) -> Page[T]:
        end = self.offset + len(items)
        return Page[T](
            items=list(items),
            total=total,
            offset=self.offset,
            limit=self.limit,
            next_offset=end if end < total else None,
        )


async def page_params(
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Items to skip.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Page size.")] = 50,
) -> PageParams:
    return PageParams(offset=offset, limit=limit)


PageDep = Annotated[PageParams, Depends(page_params)]
