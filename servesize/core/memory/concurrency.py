"""How many requests of a given length (or length mix) the KV pool holds at once.

A request of ``T`` tokens holds ``blocks(T)`` pool blocks, the sum over its layer groups of
the worst-case blocks per group (:meth:`KvLayout.blocks_per_request`), so
``max_concurrency(T) = num_blocks / blocks(T)``: the figure vLLM logs as "Maximum concurrency
for T tokens per request". For a mix of lengths the expected blocks per request replace
``blocks(T)``. ``kv_tokens_per_request`` is what one request costs in the pool's token units
(``blocks · block_size / groups``), block rounding included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servesize.core.memory.kv import KvLayout

__all__ = ["ConcurrencyEstimate", "concurrency_at", "concurrency_for_lengths"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConcurrencyEstimate:
    """Requests of a length (or mix of lengths) that fit in the KV pool at once."""

    tokens_per_request: float
    """The length asked about (the weighted mean for a mix)."""
    blocks_per_request: float
    kv_tokens_per_request: float
    """Pool capacity one request holds, in tokens, including block rounding."""
    kv_bytes_per_request: float
    max_concurrency: float


def concurrency_at(layout: KvLayout, num_blocks: int, tokens: int) -> ConcurrencyEstimate:
    """Concurrency for requests of exactly ``tokens`` tokens.

    >>> from servesize.core.memory.kv import KvLayerSpec, kv_layout
    >>> spec = KvLayerSpec(kind="full_attention", layers=32, bytes_per_token=4096, formula="")
    >>> layout = kv_layout((spec,), block_size=16, batched_tokens=8192)
    >>> concurrency_at(layout, 1000, 1000).max_concurrency  # 1000 blocks / cdiv(1000, 16)
    15.873015873015873
    """
    return concurrency_for_lengths(layout, num_blocks, [tokens])


def concurrency_for_lengths(
    layout: KvLayout,
    num_blocks: int,
    lengths: Sequence[int],
    weights: Sequence[float] | None = None,
) -> ConcurrencyEstimate:
    """Concurrency for a mix of request lengths, ``weights`` their relative frequencies."""
    if not lengths:
        raise ValueError("lengths must not be empty")
    if any(t < 1 for t in lengths):
        raise ValueError("every length must be >= 1 token")
    w = [1.0] * len(lengths) if weights is None else [float(x) for x in weights]
    if len(w) != len(lengths) or any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError("weights must be non-negative, one per length, not all zero")
    total = sum(w)
    mean_tokens = sum(t * x for t, x in zip(lengths, w, strict=True)) / total
    blocks = sum(layout.blocks_per_request(t) * x for t, x in zip(lengths, w, strict=True)) / total
    groups = sum(layout.groups)
    return ConcurrencyEstimate(
        tokens_per_request=mean_tokens,
        blocks_per_request=blocks,
        kv_tokens_per_request=blocks * layout.block_size / groups,
        kv_bytes_per_request=blocks * layout.block_bytes,
        max_concurrency=num_blocks / blocks if blocks else 0.0,
    )
