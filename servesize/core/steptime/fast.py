"""The step-time model evaluated one step at a time in microseconds, with the same numbers.

:meth:`StepTimeModel.step_time` runs a few hundred numpy operations per call, whatever the
number of steps; a simulator that decides one step at a time pays that for every step. This
module evaluates the same sum, ``t_step = T(tokens, has_prefill) + S(sequences) +
Σ_layer kinds [D(B, C) + P(n, T_p, O, A)]``, split by what each term depends on:

* ``T``: every GEMM whose rows are the step's tokens, routed experts, element-wise traffic,
  communication and the engine's overheads depend only on the step's token count and on whether
  it holds a prefill (CUDA graphs). Token counts are integers, so ``T`` is tabulated at every
  integer by the model's own vectorised code (:func:`~servesize.core.steptime.gemm.gemm_cost`,
  :func:`~servesize.core.steptime.experts.moe_cost`, :meth:`StepTimeModel.communication_s`,
  :meth:`StepTimeModel.overhead_s`), in blocks of ``TABLE_BLOCK`` tokens built on first use;
* ``S``: the output head (one row per sequence), tabulated the same way over sequences;
* ``D`` and ``P``: decode and prefill attention of each layer kind, which depend on two and
  four continuous quantities, are the formulas of :mod:`~servesize.core.steptime.attention`
  (roofline, measured table with bilinear log-log interpolation, head-layout transfer, sliding
  windows, linear attention) written for Python floats.

Nothing is approximated: a step's time equals ``model.step_time(work).total_s`` up to the
rounding of a differently ordered sum and of ``math.log``/``math.exp`` against numpy's (a few
ulps; the tests hold it to ``1e-12`` relative). Each step is evaluated on its own, so a step's
time does not depend on the other steps of a call.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict

import numpy as np

from servesize.core.architecture import STATE_KINDS
from servesize.core.steptime._arrays import FloatArray
from servesize.core.steptime.attention import AttentionLookup
from servesize.core.steptime.experts import moe_cost
from servesize.core.steptime.gemm import gemm_cost
from servesize.core.steptime.model import StepTimeModel
from servesize.core.steptime.operators import AttentionOp
from servesize.core.steptime.rates import (
    PREFILL_ATTENTION_EFFICIENCY_MAX,
    PREFILL_ATTENTION_HALF_TOKENS,
)
from servesize.core.steptime.scalar import ScalarCounts
from servesize.core.steptime.tables import AttentionTable

__all__ = ["TABLE_BLOCK", "TABLE_LIMIT", "FastStepTime", "fast_step_time"]

TABLE_BLOCK = 4096
"""Integers per block of the token and sequence tables (a block is built on first use)."""
TABLE_LIMIT = 1 << 20
"""Largest tabulated count; a step beyond it is costed by the vectorised model."""
_CACHE_SIZE = 8
_ROW_CACHE = 4096
_DECODE_MEMO = 1 << 16
"""Pure-decode step times kept by ``(batch, context)``: closed loops of equal requests repeat
them every wave (the value is the one computed the first time, so nothing changes)."""


class _ScalarBilinear:
    """:func:`~servesize.core.steptime.interpolation.bilinear_loglog` over one table, for floats
    (same clamping, extrapolation and exact grid hits).

    The ``x`` half of the interpolation (a row of log-latencies over the ``y`` grid, mixed from
    the two bracketing rows) is kept per ``x``: batch sizes and chunk counts repeat. Mixing the
    rows first reorders the sum of four products, a rounding-level difference.
    """

    __slots__ = ("_fp", "_lf", "_lxp", "_lyp", "_ny", "_rows", "_xp", "_yp")

    def __init__(self, table: AttentionTable) -> None:
        self._xp: list[float] = table.batch.tolist()
        self._yp: list[float] = table.length.tolist()
        self._fp: list[list[float]] = table.latency_s.tolist()
        self._lxp: list[float] = np.log(table.batch).tolist()
        self._lyp: list[float] = np.log(table.length).tolist()
        self._lf: list[list[float]] = np.log(table.latency_s).tolist()
        self._ny = len(self._yp)
        self._rows: dict[float, tuple[list[float], int]] = {}

    def _row(self, x: float) -> tuple[list[float], int]:
        """Log-latency over the ``y`` grid at ``x``, and the table row ``x`` hits (-1 if
        none)."""
        xp, lxp, lf = self._xp, self._lxp, self._lf
        nx = len(xp)
        lx = min(max(math.log(max(x, xp[0])), lxp[0]), lxp[-1])
        i = min(max(bisect_right(lxp, lx) - 1, 0), max(nx - 2, 0))
        if nx == 1:
            row = list(lf[i])
        else:
            wx = (lx - lxp[i]) / (lxp[i + 1] - lxp[i])
            row = [a * (1 - wx) + b * wx for a, b in zip(lf[i], lf[i + 1], strict=True)]
        ix = min(bisect_left(xp, x), nx - 1)
        entry = (row, ix if xp[ix] == x else -1)
        if len(self._rows) >= _ROW_CACHE:
            self._rows.clear()
        self._rows[x] = entry
        return entry

    def __call__(self, x: float, y: float) -> float:
        entry = self._rows.get(x)
        row, hit = entry if entry is not None else self._row(x)
        yp, lyp = self._yp, self._lyp
        ny = self._ny
        ly_raw = math.log(y if y > yp[0] else yp[0])
        ly = ly_raw if ly_raw < lyp[-1] else lyp[-1]
        if ny == 1:
            value = row[0]
        else:
            j = bisect_right(lyp, ly) - 1
            j = 0 if j < 0 else (ny - 2 if j > ny - 2 else j)
            wy = (ly - lyp[j]) / (lyp[j + 1] - lyp[j])
            value = row[j] * (1 - wy) + row[j + 1] * wy
        if hit >= 0:
            iy = bisect_left(yp, y)
            if iy < ny and yp[iy] == y:
                return self._fp[hit][iy]
        return math.exp(value + (ly_raw - ly))


class _ScalarAttention:
    """Decode and prefill attention of one layer kind (:mod:`~servesize.core.steptime.attention`)
    for one step, in Python floats."""

    __slots__ = (
        "_activation_bytes",
        "_cden",
        "_cs",
        "_decode_table",
        "_floor",
        "_layers",
        "_linear",
        "_mden",
        "_ms",
        "_op",
        "_peak",
        "_prefill_act",
        "_prefill_table",
        "_window",
        "decode_lookup",
        "prefill_lookup",
    )

    def __init__(
        self,
        op: AttentionOp,
        model: StepTimeModel,
        decode: AttentionLookup | None,
        prefill: AttentionLookup | None,
    ) -> None:
        rates = model.rates
        a_b = model.inventory.activation_bytes
        self._op = op
        self._layers = float(op.layers)
        self._linear = op.kind in STATE_KINDS
        self._window = None if op.window_tokens is None else float(op.window_tokens)
        self._cs = rates.compute_slowdown
        self._ms = rates.memory_slowdown
        self._peak = rates.peak("bf16")
        self._cden = rates.peak("bf16") * rates.gemm_efficiency["bf16"]
        self._mden = rates.memory_bandwidth_bytes_per_s * rates.bandwidth_efficiency
        self._floor = rates.attention_floor_s
        self._activation_bytes = a_b
        self._prefill_act = op.head_dim * a_b
        self.decode_lookup = decode
        self.prefill_lookup = prefill
        self._decode_table = None if decode is None else _ScalarBilinear(decode.table)
        self._prefill_table = None if prefill is None else _ScalarBilinear(prefill.table)

    def decode_s(self, b: float, context: float) -> float:
        """``attention_decode_cost(...).time_s`` for ``b`` sequences with ``context`` tokens."""
        if not b > 0:
            return 0.0
        op, cs, ms = self._op, self._cs, self._ms
        length = context / b
        if self._window is not None:
            length = min(length, self._window)
        if self._linear:
            flops = b * op.recurrent_flops_per_token
            nbytes = b * 2.0 * op.state_bytes_per_sequence
        else:
            pairs = b * length
            flops = pairs * op.decode_flops_per_pair
            nbytes = pairs * op.kv_bytes_per_token + b * 4.0 * op.num_heads * op.head_dim * (
                self._activation_bytes
            )
        tc = flops * cs / self._cden
        tm = nbytes * ms / self._mden
        table = self._decode_table
        if table is None:
            t = (tc if tc > tm else tm) + self._floor
        else:
            lookup = self.decode_lookup
            assert lookup is not None
            t = table(b, length if length > 1.0 else 1.0)
            if not lookup.exact:
                t = t * self._transfer_ratio(b, length, lookup)
            t = t * (cs if tc >= tm else ms)
        return t * self._layers

    def _transfer_ratio(self, b: float, length: float, lookup: AttentionLookup) -> float:
        op, cs, ms = self._op, self._cs, self._ms
        pairs = (b if b > 1.0 else 1.0) * (length if length > 1.0 else 1.0)
        own_c = pairs * op.decode_flops_per_pair * cs / self._cden
        own_m = pairs * op.kv_bytes_per_token * ms / self._mden
        ref_c = pairs * lookup.table_flops_per_pair * cs / self._cden
        ref_m = pairs * lookup.table_kv_bytes_per_token * ms / self._mden
        own = own_c if own_c > own_m else own_m
        ref = ref_c if ref_c > ref_m else ref_m
        return own / ref

    def prefill_s(self, s: float, tokens: float, cached: float, pairs: float) -> float:
        """``attention_prefill_cost(...).time_s`` for ``s`` chunks of ``tokens`` new tokens in
        all after ``cached`` cached ones, with ``pairs`` causal pairs."""
        if not (s > 0 and tokens > 0):
            return 0.0
        op, cs, ms = self._op, self._cs, self._ms
        chunk = tokens / s
        if self._linear:
            flops = tokens * op.recurrent_flops_per_token
            nbytes = s * 2.0 * op.state_bytes_per_sequence + (
                tokens * 4.0 * op.num_heads * self._prefill_act
            )
            eff = PREFILL_ATTENTION_EFFICIENCY_MAX
        else:
            window = self._window
            if window is not None:
                own_cached = cached / s
                pairs = s * (
                    _window_sum(own_cached + chunk, window) - _window_sum(own_cached, window)
                )
                read = s * (own_cached if own_cached < window else window)
            else:
                read = cached
            flops = pairs * op.prefill_flops_per_pair
            nbytes = (read + tokens) * op.kv_bytes_per_token + (
                tokens * 4.0 * op.num_heads * self._prefill_act
            )
            c = chunk if chunk > 1.0 else 1.0
            eff = PREFILL_ATTENTION_EFFICIENCY_MAX * c / (c + PREFILL_ATTENTION_HALF_TOKENS)
        peak = self._peak
        tc = flops * cs / (peak * eff)
        tm = nbytes * ms / self._mden
        table = self._prefill_table
        if table is None:
            t = (tc if tc > tm else tm) + self._floor
        else:
            lookup = self.prefill_lookup
            assert lookup is not None
            t = table(s, chunk if chunk > 1.0 else 1.0)
            own = tc if tc > tm else tm
            table_pairs = s * chunk * (chunk + 1) / 2
            ref_c = table_pairs * lookup.table_flops_per_pair / (peak * eff)
            ref_m = s * chunk * lookup.table_kv_bytes_per_token * ms / self._mden
            extra = own - (ref_c if ref_c > ref_m else ref_m)
            t = t + (extra if extra > 0.0 else 0.0)
        return t * self._layers


def _window_sum(n: float, window: float) -> float:
    """``Σ_{c=1}^{n} min(c, w)`` (as :func:`~servesize.core.steptime.attention._window_pairs`)."""
    capped = n if n < window else window
    over = n - window
    return capped * (capped + 1) / 2 + (over if over > 0.0 else 0.0) * window


class _CountTable:
    """Values of a vectorised function at the integers ``0, 1, 2, ...``, built in blocks of
    :data:`TABLE_BLOCK` on first use (thread-safe)."""

    __slots__ = ("_fn", "_lock", "values")

    def __init__(self, fn: _Vectorised) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self.values: list[float] = []

    def at(self, count: float) -> float:
        """The function at a count outside the table (not tabulated): in Python floats where
        ``ScalarCounts`` covers the model, else one vectorised call."""
        scalar = self._fn.scalar
        if scalar is not None:
            return scalar(count)
        return float(self._fn(np.array([count], dtype=np.float64))[0])

    def grow(self, count: int) -> None:
        """Tabulate at least ``0 .. count``."""
        with self._lock:
            while len(self.values) <= count:
                start = len(self.values)
                block = np.arange(start, start + TABLE_BLOCK, dtype=np.float64)
                self.values.extend(np.asarray(self._fn(block), dtype=np.float64).tolist())


class _Vectorised:
    """A part of the step time as a function of one count (see :class:`FastStepTime`)."""

    def __init__(self, model: StepTimeModel, part: str) -> None:
        self.model = model
        self.part = part
        self.scalar = ScalarCounts.build(model, part)

    def __call__(self, counts: FloatArray) -> FloatArray:
        model = self.model
        inv, rates = model.inventory, model.rates
        dp = float(inv.data_parallel_size)
        a_b = inv.activation_bytes
        per_rank = counts / dp
        total = np.zeros_like(counts)
        if self.part == "sequences":
            for gemm, curve in zip(inv.gemms, model.gemm_curves, strict=True):
                if gemm.per_sequence:
                    cost = gemm_cost(gemm, per_rank, activation_bytes=a_b, rates=rates, curve=curve)
                    total = total + cost.time_s
            return total
        for gemm, curve in zip(inv.gemms, model.gemm_curves, strict=True):
            if not gemm.per_sequence:
                cost = gemm_cost(gemm, per_rank, activation_bytes=a_b, rates=rates, curve=curve)
                total = total + cost.time_s
        for moe_op, lookup in zip(inv.moe, model.moe_lookups, strict=True):
            cost = moe_cost(moe_op, counts, activation_bytes=a_b, rates=rates, lookup=lookup)
            total = total + cost.time_s
        total = total + rates.memory_time_s(model.elementwise_bytes(per_rank))
        total = total + model.communication_s(per_rank)
        prefill = counts if self.part == "tokens_prefill" else np.zeros_like(counts)
        return np.asarray(total + model.overhead_s(counts, prefill), dtype=np.float64)


class FastStepTime:
    """:meth:`StepTimeModel.step_time` ``.total_s`` for one step at a time (module docstring).

    Build it with :func:`fast_step_time`, which shares one per model.
    """

    __slots__ = (
        "_attention",
        "_decode_memo",
        "_dp",
        "_sequences",
        "_tokens",
        "_tokens_prefill",
        "model",
    )

    def __init__(self, model: StepTimeModel) -> None:
        inv = model.inventory
        self.model = model
        self._tokens = _CountTable(_Vectorised(model, "tokens"))
        self._tokens_prefill = _CountTable(_Vectorised(model, "tokens_prefill"))
        self._sequences = _CountTable(_Vectorised(model, "sequences"))
        self._attention = tuple(
            _ScalarAttention(op, model, dec, pre)
            for op, dec, pre in zip(
                inv.attention, model.decode_lookups, model.prefill_lookups, strict=True
            )
        )
        self._dp = float(inv.data_parallel_size)
        self._decode_memo: dict[tuple[float, float], float] = {}

    def step_s(
        self,
        prefill_tokens: float,
        prefill_sequences: float,
        prefill_cached_tokens: float,
        prefill_attention_pairs: float,
        decode_sequences: float,
        decode_context_tokens: float,
    ) -> float:
        """Total time of one step given its :class:`~servesize.core.steptime.StepWork` fields
        (validated by the caller: finite, ``>= 0``)."""
        tokens = prefill_tokens + decode_sequences
        sequences = prefill_sequences + decode_sequences
        table = self._tokens_prefill if prefill_tokens > 0 else self._tokens
        total = self._by_counts(table, tokens, sequences)
        dp = self._dp
        b = decode_sequences / dp
        s = prefill_sequences / dp
        t_p = prefill_tokens / dp
        # An inactive part is exactly 0.0 (see _ScalarAttention), so it is not evaluated.
        decode = b > 0
        prefill = s > 0 and t_p > 0
        if decode:
            ctx = decode_context_tokens / dp
        if prefill:
            cached = prefill_cached_tokens / dp
            pairs = prefill_attention_pairs / dp
        for att in self._attention:
            if decode:
                part = att.decode_s(b, ctx)
                if prefill:
                    part = part + att.prefill_s(s, t_p, cached, pairs)
            elif prefill:
                part = att.prefill_s(s, t_p, cached, pairs)
            else:
                continue
            total += part
        return total

    def _by_counts(self, table: _CountTable, tokens: float, sequences: float) -> float:
        """``T(tokens) + S(sequences)``: the terms tabulated over the step's token and sequence
        counts (``table`` is the token table for steps with or without a prefill)."""
        values = table.values
        i = int(tokens)
        by_tokens = values[i] if i == tokens and i < len(values) else _count(table, tokens)
        values = self._sequences.values
        i = int(sequences)
        if i == sequences and i < len(values):
            return by_tokens + values[i]
        return by_tokens + _count(self._sequences, sequences)

    def decode_steps_s(self, decode_sequences: float, contexts: list[float]) -> list[float]:
        """:meth:`step_s` of pure-decode steps of one batch size, one per decode context
        (the same sum in the same order, so each equals ``step_s(0, 0, 0, 0, B, C)`` exactly);
        the terms that depend only on the batch are looked up once."""
        base = self._by_counts(self._tokens, decode_sequences, decode_sequences)
        dp = self._dp
        b = decode_sequences / dp
        if not b > 0:
            return [base] * len(contexts)
        parts = [att.decode_s for att in self._attention]
        memo = self._decode_memo
        if len(memo) + len(contexts) > _DECODE_MEMO:
            memo.clear()
        out: list[float] = []
        append = out.append
        for context in contexts:
            key = (decode_sequences, context)
            total = memo.get(key)
            if total is None:
                total = base
                ctx = context / dp
                for decode_s in parts:
                    total += decode_s(b, ctx)
                memo[key] = total
            append(total)
        return out


def _count(table: _CountTable, count: float) -> float:
    """``table`` at ``count``: tabulated up to :data:`TABLE_LIMIT`, else evaluated."""
    i = int(count)
    if i == count and i <= TABLE_LIMIT:
        if i >= len(table.values):
            table.grow(i)
        return table.values[i]
    return table.at(count)


_cache: OrderedDict[int, FastStepTime] = OrderedDict()
_cache_lock = threading.Lock()


def fast_step_time(model: StepTimeModel) -> FastStepTime:
    """The :class:`FastStepTime` of ``model``, shared by callers that pass the same object
    (the last few models are kept)."""
    key = id(model)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit.model is model:
            _cache.move_to_end(key)
            return hit
        fast = FastStepTime(model)
        _cache[key] = fast
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        return fast
