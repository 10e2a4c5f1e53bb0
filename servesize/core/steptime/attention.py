"""Attention time per layer kind: decode reads of the KV cache, causal prefill FLOPs.

- softmax (full, sliding window) and MLA: decode reads ``Σ min(c, w)`` cached tokens' K/V
  (MLA: the latent) and does ``decode_flops_per_pair`` per attended token; prefill does
  ``prefill_flops_per_pair`` per causal (query, key) pair and reads the cached context;
- linear attention (gated delta-net): each sequence's state is read and written once per step.

Measured tables (FlashAttention-3 in vLLM, TensorRT-LLM's kernels) replace the roofline; a head
layout they lack borrows the nearest layout's latency scaled by the ratio of the two rooflines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servesize.core.architecture import STATE_KINDS
from servesize.core.steptime._arrays import FloatArray
from servesize.core.steptime.operators import AttentionOp
from servesize.core.steptime.rates import (
    PREFILL_ATTENTION_EFFICIENCY_MAX,
    PREFILL_ATTENTION_HALF_TOKENS,
    DeviceRates,
    KernelCost,
    kernel_cost,
)
from servesize.core.steptime.tables import AttentionTable

__all__ = [
    "AttentionLookup",
    "attention_decode_cost",
    "attention_lookup",
    "attention_prefill_cost",
    "prefill_attention_efficiency",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionLookup:
    """A measured attention table for one operator, with the table's own cost coefficients
    (for ratio transfer when the head layout differs)."""

    table: AttentionTable
    exact: bool
    table_kv_bytes_per_token: float
    table_flops_per_pair: float


def _dtype_bytes(name: str) -> float:
    return 1.0 if name.startswith("fp8") else 2.0


def attention_lookup(
    op: AttentionOp, tables: tuple[AttentionTable, ...], *, kv_dtype: str, phase: str
) -> AttentionLookup | None:
    """The table for ``op`` (same heads, head dim and KV dtype), else the nearest layout."""
    if not tables or op.kind in STATE_KINDS:
        return None
    kv_fp8 = kv_dtype.startswith("fp8")

    def distance(t: AttentionTable) -> float:
        return float(
            abs(np.log(t.num_heads / op.num_heads))
            + abs(np.log(t.num_kv_heads / op.num_kv_heads))
            + abs(np.log(t.head_dim / op.head_dim))
            + (0.0 if t.kv_dtype.startswith("fp8") == kv_fp8 else 10.0)
        )

    best = min(tables, key=distance)
    exact = distance(best) == 0.0
    if best.mechanism == "mla":
        kv_token = (op.kv_bytes_per_token / _dtype_bytes(kv_dtype)) * _dtype_bytes(best.kv_dtype)
        per_pair = op.decode_flops_per_pair if phase == "decode" else op.prefill_flops_per_pair
        per_pair *= best.num_heads / op.num_heads
    else:
        kv_token = 2.0 * best.num_kv_heads * best.head_dim * _dtype_bytes(best.kv_dtype)
        per_pair = 4.0 * best.num_heads * best.head_dim
    return AttentionLookup(
        table=best, exact=exact, table_kv_bytes_per_token=kv_token, table_flops_per_pair=per_pair
    )


def _window(length: FloatArray, window: int | None) -> FloatArray:
    return length if window is None else np.minimum(length, float(window))


def attention_decode_cost(
    op: AttentionOp,
    sequences: FloatArray,
    context_tokens: FloatArray,
    *,
    activation_bytes: float,
    rates: DeviceRates,
    lookup: AttentionLookup | None,
) -> KernelCost:
    """Decode attention of ``sequences`` (per GPU) with ``context_tokens`` in total.

    Softmax/MLA: reads ``Σ min(c, w)`` cached tokens' K/V, ``decode_flops_per_pair`` per
    attended token. Linear attention: reads and writes each sequence's state once.
    """
    b = sequences
    layers = float(op.layers)
    active = b > 0
    safe_b = np.where(active, b, 1.0)
    length = _window(context_tokens / safe_b, op.window_tokens)
    if op.kind in STATE_KINDS:
        flops = b * op.recurrent_flops_per_token
        nbytes = b * 2.0 * op.state_bytes_per_sequence
    else:
        pairs = b * length
        flops = pairs * op.decode_flops_per_pair
        nbytes = pairs * op.kv_bytes_per_token + b * 4.0 * op.num_heads * op.head_dim * (
            activation_bytes
        )
    tc = rates.compute_time_s(flops, "bf16")
    tm = rates.memory_time_s(nbytes)
    if lookup is None:
        t = np.maximum(tc, tm) + rates.attention_floor_s
    else:
        t = lookup.table.latency(safe_b, np.maximum(length, 1.0))
        if not lookup.exact:
            t = t * _transfer_ratio(
                b, length, op.kv_bytes_per_token, op.decode_flops_per_pair, lookup, rates
            )
        t = t * np.where(tc >= tm, rates.compute_slowdown, rates.memory_slowdown)
    return kernel_cost(np.where(active, t * layers, 0.0), flops * layers, nbytes * layers, tc, tm)


def _transfer_ratio(
    b: FloatArray,
    length: FloatArray,
    kv_token: float,
    per_pair: float,
    lookup: AttentionLookup,
    rates: DeviceRates,
) -> FloatArray:
    pairs = np.maximum(b, 1.0) * np.maximum(length, 1.0)
    own = np.maximum(
        rates.compute_time_s(pairs * per_pair, "bf16"), rates.memory_time_s(pairs * kv_token)
    )
    ref = np.maximum(
        rates.compute_time_s(pairs * lookup.table_flops_per_pair, "bf16"),
        rates.memory_time_s(pairs * lookup.table_kv_bytes_per_token),
    )
    return np.asarray(own / ref, dtype=np.float64)


def prefill_attention_efficiency(chunk_tokens: FloatArray) -> FloatArray:
    """``0.55·t̄/(t̄ + 1024)``: achieved fraction of the bf16 peak for chunks of ``t̄``."""
    return np.asarray(
        PREFILL_ATTENTION_EFFICIENCY_MAX
        * chunk_tokens
        / (chunk_tokens + PREFILL_ATTENTION_HALF_TOKENS),
        dtype=np.float64,
    )


def _window_pairs(t: FloatArray, o: FloatArray, window: int) -> FloatArray:
    """Pairs of a chunk of ``t`` tokens after ``o`` cached, each attending to ``≤ w`` keys:
    ``Σ_{c=o+1}^{o+t} min(c, w)``."""
    w = float(window)

    def s(n: FloatArray) -> FloatArray:
        capped = np.minimum(n, w)
        return np.asarray(capped * (capped + 1) / 2 + np.maximum(n - w, 0.0) * w)

    return np.asarray(s(o + t) - s(o), dtype=np.float64)


def attention_prefill_cost(
    op: AttentionOp,
    sequences: FloatArray,
    tokens: FloatArray,
    cached_tokens: FloatArray,
    pairs: FloatArray,
    *,
    activation_bytes: float,
    rates: DeviceRates,
    lookup: AttentionLookup | None,
) -> KernelCost:
    """Prefill attention of ``sequences`` chunks (per GPU): ``tokens`` new, ``cached_tokens``
    read from the cache, ``pairs`` causal (query, key) pairs (window-capped per layer kind)."""
    s = sequences
    layers = float(op.layers)
    active = (s > 0) & (tokens > 0)
    safe_s = np.where(active, s, 1.0)
    chunk = tokens / safe_s
    if op.kind in STATE_KINDS:
        flops = tokens * op.recurrent_flops_per_token
        nbytes = s * 2.0 * op.state_bytes_per_sequence + tokens * 4.0 * op.num_heads * (
            op.head_dim * activation_bytes
        )
        eff = np.full_like(chunk, PREFILL_ATTENTION_EFFICIENCY_MAX)
    else:
        if op.window_tokens is not None:
            pairs = s * _window_pairs(chunk, cached_tokens / safe_s, op.window_tokens)
            read = s * np.minimum(cached_tokens / safe_s, float(op.window_tokens))
        else:
            read = cached_tokens
        flops = pairs * op.prefill_flops_per_pair
        nbytes = (read + tokens) * op.kv_bytes_per_token + tokens * 4.0 * op.num_heads * (
            op.head_dim * activation_bytes
        )
        eff = prefill_attention_efficiency(np.maximum(chunk, 1.0))
    peak = rates.peak("bf16")
    tc = np.asarray(flops * rates.compute_slowdown / (peak * eff), dtype=np.float64)
    tm = rates.memory_time_s(nbytes)
    if lookup is None:
        t = np.maximum(tc, tm) + rates.attention_floor_s
    else:
        # The table holds chunks without cached context: look up the chunk length, then add
        # the roofline time of what the cached context adds (its extra pairs and KV reads).
        # Adding, not scaling: a short chunk's table time is mostly the kernel's fixed cost,
        # and multiplying it by the context's work ratio (thousands for one token after 8k
        # cached) would charge that fixed cost thousands of times.
        t = lookup.table.latency(safe_s, np.maximum(chunk, 1.0))
        own = np.maximum(tc, tm)
        table_pairs = safe_s * chunk * (chunk + 1) / 2
        ref_c = table_pairs * lookup.table_flops_per_pair / (peak * eff)
        ref_m = rates.memory_time_s(safe_s * chunk * lookup.table_kv_bytes_per_token)
        t = t + np.maximum(own - np.maximum(ref_c, ref_m), 0.0)
    return kernel_cost(np.where(active, t * layers, 0.0), flops * layers, nbytes * layers, tc, tm)
