"""Measured kernel tables: pure value objects of numpy arrays, with their lookups.

A :class:`MeasuredProfile` bundles what an agent (or a published database) measured on one
GPU: GEMM latency over ``(m, n, k)``, attention latency over ``(batch, length)`` per head
layout, whole-MoE-layer latency over tokens, and collective latency over message size. The
core never reads files; :mod:`servesize.calibration` builds these from CSV.

Interpolation is linear in log-log space (:mod:`~servesize.core.steptime.interpolation`):
exact at measured points and monotone between neighbours. Shapes that were not measured are
handled by the callers (:mod:`~servesize.core.steptime.gemm`, ``attention``, ``experts``),
which scale the nearest
measured shape by the ratio of the two roofline times ("ratio transfer").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from servesize.core.steptime._arrays import ArrayLike, FloatArray, as_float_array
from servesize.core.steptime.interpolation import bilinear_loglog, loglog_interp

__all__ = [
    "AttentionTable",
    "CollectiveTable",
    "GemmTable",
    "MeasuredProfile",
    "MoeTable",
    "fill_grid_loglog",
]


def fill_grid_loglog(axis: FloatArray, latency_s: FloatArray) -> FloatArray:
    """Fill NaN cells of a ``(rows, len(axis))`` grid along the second axis.

    Each row is completed from its own measured cells with :func:`loglog_interp` (held below
    the first, proportional above the last). A row with no measurement copies the nearest
    measured row. Measured cells are returned unchanged.
    """
    out = np.array(latency_s, dtype=np.float64, copy=True)
    measured_rows = [i for i in range(out.shape[0]) if np.any(np.isfinite(out[i]))]
    if not measured_rows:
        raise ValueError("the grid has no measured cell")
    for i in measured_rows:
        ok = np.isfinite(out[i])
        if not ok.all():
            out[i, ~ok] = loglog_interp(axis[~ok], axis[ok], out[i, ok])
    for i in range(out.shape[0]):
        if i not in measured_rows:
            nearest = min(measured_rows, key=lambda r: abs(r - i))
            out[i] = out[nearest]
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmTable:
    """GEMM latency ``C[m, n] = A[m, k] @ B[k, n]`` for one compute dtype.

    Row ``s`` of ``latency_s`` is the shape ``(n[s], k[s])`` measured over the common ``m``
    grid (NaN where not measured; filled at construction).
    """

    dtype: str
    """Canonical compute dtype: ``bf16`` or ``fp8``."""
    engine: str | None
    """Engine whose GEMM path was timed (``trtllm``, ``vllm``), None if generic."""
    source: str
    m: FloatArray
    n: FloatArray
    k: FloatArray
    latency_s: FloatArray

    def __post_init__(self) -> None:
        if self.latency_s.shape != (len(self.n), len(self.m)) or len(self.n) != len(self.k):
            raise ValueError("latency_s must have shape (shapes, len(m))")
        object.__setattr__(self, "latency_s", fill_grid_loglog(self.m, self.latency_s))

    def shape_index(self, n: int, k: int) -> int | None:
        """Row of the exact shape ``(n, k)``, or None when it was not measured."""
        hits = np.flatnonzero((self.n == n) & (self.k == k))
        return int(hits[0]) if hits.size else None

    def latency(self, m: ArrayLike, row: int) -> FloatArray:
        """Latency of shape ``row`` at ``m`` rows (log-log interpolation over the m grid)."""
        return loglog_interp(m, self.m, self.latency_s[row])


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionTable:
    """Attention latency of one layer on one GPU, over ``(batch, length)``.

    ``phase`` is ``decode`` (one new token per sequence attending to ``length`` tokens,
    itself included) or ``context`` (a prompt of ``length`` tokens, causal, nothing cached).
    ``num_heads`` / ``num_kv_heads`` are per GPU; for MLA ``num_kv_heads`` is 1 (the latent).
    """

    phase: str
    mechanism: str
    """``gqa`` (softmax attention with grouped K/V heads) or ``mla``."""
    engine: str | None
    source: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    kv_dtype: str
    batch: FloatArray
    length: FloatArray
    latency_s: FloatArray

    def __post_init__(self) -> None:
        if self.latency_s.shape != (len(self.batch), len(self.length)):
            raise ValueError("latency_s must have shape (len(batch), len(length))")
        object.__setattr__(self, "latency_s", fill_grid_loglog(self.length, self.latency_s))

    def latency(self, batch: ArrayLike, length: ArrayLike) -> FloatArray:
        """Bilinear log-log interpolation; exact at measured ``(batch, length)`` points."""
        return bilinear_loglog(batch, length, self.batch, self.length, self.latency_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeTable:
    """Latency of a whole MoE layer (router, dispatch, grouped GEMMs, combine) over tokens."""

    dtype: str
    engine: str | None
    source: str
    hidden_size: int
    intermediate_size: int
    experts_per_token: int
    num_experts: int
    tensor_parallel_size: int
    expert_parallel_size: int
    distribution: str
    tokens: FloatArray
    latency_s: FloatArray

    def latency(self, tokens: ArrayLike) -> FloatArray:
        return loglog_interp(tokens, self.tokens, self.latency_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveTable:
    """Latency of one collective on ``num_gpus`` GPUs over the message size in bytes."""

    op: str
    """``all_reduce``, ``all_gather``, ``reduce_scatter`` or ``all_to_all``."""
    implementation: str
    """``nccl`` or ``custom`` (an engine's own one-shot/two-shot kernel)."""
    source: str
    num_gpus: int
    message_bytes: FloatArray
    latency_s: FloatArray

    def latency(self, message_bytes: ArrayLike) -> FloatArray:
        return loglog_interp(as_float_array(message_bytes), self.message_bytes, self.latency_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredProfile:
    """Everything measured on one GPU model; any part may be empty."""

    name: str
    gemm: tuple[GemmTable, ...] = ()
    attention: tuple[AttentionTable, ...] = ()
    moe: tuple[MoeTable, ...] = ()
    collectives: tuple[CollectiveTable, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def gemm_table(self, dtype: str, engine: str | None) -> GemmTable | None:
        """The GEMM table of ``dtype``, preferring the one timed on ``engine``."""
        return _prefer_engine([t for t in self.gemm if t.dtype == dtype], engine)

    def attention_tables(
        self, *, phase: str, mechanism: str, engine: str | None
    ) -> tuple[AttentionTable, ...]:
        """Tables of one phase and mechanism, those of ``engine`` first when any exist."""
        tables = [t for t in self.attention if t.phase == phase and t.mechanism == mechanism]
        own = [t for t in tables if t.engine == engine]
        return tuple(own or tables)

    def collective(self, op: str, num_gpus: int, implementation: str) -> CollectiveTable | None:
        """The ``op`` table on ``num_gpus`` GPUs, ``implementation`` first, else any."""
        tables = [t for t in self.collectives if t.op == op and t.num_gpus == num_gpus]
        for table in tables:
            if table.implementation == implementation:
                return table
        return tables[0] if tables else None


def _prefer_engine(tables: list[GemmTable], engine: str | None) -> GemmTable | None:
    for table in tables:
        if table.engine == engine:
            return table
    return tables[0] if tables else None
