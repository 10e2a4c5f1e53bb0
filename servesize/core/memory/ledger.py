"""Line items: one named amount of bytes per GPU with the formula that produced it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["LineItem", "total_bytes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LineItem:
    """One entry of the ledger.

    ``formula`` states the computation in words and symbols with the numbers substituted
    (``"2 · 32 layers · 8 KV heads · 128 · 2 B = 131072 B/token"``).
    """

    name: str
    bytes_per_gpu: int
    formula: str
    category: str
    """``weights``, ``kv_cache``, ``activations``, ``cuda_graphs``, ``non_torch``,
    ``reserve`` (held outside the engine's budget) or ``budget`` (a limit, not a use)."""


def total_bytes(items: Iterable[LineItem], *categories: str) -> int:
    """Sum of ``bytes_per_gpu`` over ``items`` in ``categories`` (all when none given)."""
    return sum(i.bytes_per_gpu for i in items if not categories or i.category in categories)
