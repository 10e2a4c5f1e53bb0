"""Bytes of one weight matrix in each storage format vLLM loads, scales and zero points included.

For a linear layer with ``N`` output and ``K`` input features on one GPU (after sharding),
``shards`` the number of logical matrices fused into it (3 for QKV, 2 for gate_up) and
``g`` the group size:

============================  ============================================================
format                        bytes (parameter names as vLLM creates them)
============================  ============================================================
bf16 / fp16 / fp32            ``N·K·s``
fp8 / int8 per-tensor         ``N·K + 4·shards`` (+ ``4·shards`` static ``input_scale``)
fp8 / int8 per-channel        ``N·K + 4·N`` (``weight_scale[N, 1]`` fp32)
fp8 block ``bn x bk``         ``N·K + 4·⌈N/bn⌉·⌈K/bk⌉`` (``weight_scale_inv``)
AWQ int4, group g             ``N·K/2 + 2·(K/g)·N + 4·(K/g)·(N/8)`` (qweight, scales, qzeros)
GPTQ int4, group g            the AWQ terms ``+ 4·K`` (``g_idx``; GPTQ always allocates
                              qzeros)
MXFP4                         ``N·K/2 + N·⌈K/32⌉`` (E2M1 pairs, E8M0 scale per 32)
NVFP4                         ``N·K/2 + N·⌈K/16⌉ + 8·shards`` (E4M3 scale per 16, fp32
                              ``weight_scale_2`` and ``input_scale`` per shard)
bitsandbytes nf4              ``N·K/2 + 4·⌈N·K/64⌉`` (fp32 absmax per 64; no double quant)
============================  ============================================================

Sources (vllm-project/vllm): vllm/model_executor/layers/quantization/fp8.py,
awq.py (``AWQLinearMethod.create_weights``, ``pack_factor = 32 // bits``), gptq.py,
mxfp4.py (``mxfp4_block = 32``, uint8 weights and scales), modelopt.py
(``ModelOptFp4LinearMethod``), compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from servesize.core.dtypes import bytes_for
from servesize.core.memory.units import cdiv

__all__ = ["FormatKind", "WeightFormat", "dense_format", "element_text"]


class FormatKind(StrEnum):
    DENSE = "dense"
    FP8_TENSOR = "fp8_per_tensor"
    FP8_CHANNEL = "fp8_per_channel"
    INT8_CHANNEL = "int8_per_channel"
    FP8_BLOCK = "fp8_block"
    INT_GROUP = "int_group"
    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"
    BNB4 = "bnb_nf4"


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightFormat:
    """How one quantized (or plain) weight matrix is stored."""

    kind: FormatKind
    label: str
    """Short human name, e.g. ``"fp8 block 128x128"`` or ``"AWQ int4 g128"``."""
    dense_dtype: str = "bf16"
    """Element dtype of DENSE matrices (and of unquantized parts of the model)."""
    bits: int = 16
    group_size: int | None = None
    """Quantization group along K; None means one group per output channel."""
    block_shape: tuple[int, int] = (128, 128)
    zero_points: bool = False
    g_idx: bool = False
    static_input_scale: bool = False

    def tensor_bytes(self, rows: int, cols: int, *, shards: int = 1) -> int:
        """Bytes of a ``rows x cols`` (``N x K``) matrix on one GPU in this format."""
        return _priced(self, rows, cols, shards)[0]

    def formula(self, rows: int, cols: int, *, shards: int = 1) -> str:
        """The byte terms of :meth:`tensor_bytes` with the numbers substituted."""
        return _priced(self, rows, cols, shards)[1]

    def priced(self, rows: int, cols: int, *, shards: int = 1) -> tuple[int, str]:
        """:meth:`tensor_bytes` and :meth:`formula` together (memoised: a model repeats the
        same few shapes in every layer, and searches price the same model many times)."""
        return _priced(self, rows, cols, shards)

    def _terms(self, n: int, k: int, shards: int) -> list[tuple[str, int]]:
        kind = self.kind
        if kind is FormatKind.DENSE:
            size = bytes_for(n * k, self.dense_dtype)
            return [(f"{n}·{k}·{element_text(self.dense_dtype)} B", size)]
        if kind is FormatKind.FP8_TENSOR:
            terms = [(f"{n}·{k}·1 B", n * k), (f"4·{shards} B scales", 4 * shards)]
            if self.static_input_scale:
                terms.append((f"4·{shards} B input scales", 4 * shards))
            return terms
        if kind in (FormatKind.FP8_CHANNEL, FormatKind.INT8_CHANNEL):
            terms = [(f"{n}·{k}·1 B", n * k), (f"4·{n} B channel scales", 4 * n)]
            if self.static_input_scale:
                terms.append((f"4·{shards} B input scales", 4 * shards))
            return terms
        if kind is FormatKind.FP8_BLOCK:
            bn, bk = self.block_shape
            blocks = cdiv(n, bn) * cdiv(k, bk)
            return [
                (f"{n}·{k}·1 B", n * k),
                (f"4·⌈{n}/{bn}⌉·⌈{k}/{bk}⌉ B block scales", 4 * blocks),
            ]
        if kind is FormatKind.INT_GROUP:
            groups = 1 if self.group_size is None else cdiv(k, self.group_size)
            g_text = "1" if self.group_size is None else f"⌈{k}/{self.group_size}⌉"
            terms = [
                (f"{n}·{k}·{self.bits}/8 B", cdiv(n * k * self.bits, 8)),
                (f"2·{g_text}·{n} B scales", 2 * groups * n),
            ]
            if self.zero_points:
                per_word = 32 // self.bits
                zeros = 4 * groups * cdiv(n, per_word)
                terms.append((f"4·{g_text}·⌈{n}/{per_word}⌉ B zeros", zeros))
            if self.g_idx:
                terms.append((f"4·{k} B g_idx", 4 * k))
            return terms
        if kind is FormatKind.MXFP4:
            return [(f"{n}·{k}/2 B", cdiv(n * k, 2)), (f"{n}·⌈{k}/32⌉ B scales", n * cdiv(k, 32))]
        if kind is FormatKind.NVFP4:
            return [
                (f"{n}·{k}/2 B", cdiv(n * k, 2)),
                (f"{n}·⌈{k}/16⌉ B scales", n * cdiv(k, 16)),
                (f"8·{shards} B global scales", 8 * shards),
            ]
        return [(f"{n}·{k}/2 B", cdiv(n * k, 2)), (f"4·⌈{n}·{k}/64⌉ B absmax", 4 * cdiv(n * k, 64))]


@lru_cache(maxsize=4096)
def _priced(fmt: WeightFormat, n: int, k: int, shards: int) -> tuple[int, str]:
    terms = fmt._terms(n, k, shards)
    return sum(b for _, b in terms), " + ".join(text for text, _ in terms)


@lru_cache(maxsize=64)
def element_text(dtype: str) -> str:
    """Bytes per element of ``dtype`` as printed in formulas (``"2"``, ``"0.5"``)."""
    return f"{bytes_for(8, dtype) / 8:g}"


def dense_format(dtype: str) -> WeightFormat:
    """Plain storage in ``dtype`` (bf16, fp16 or fp32).

    >>> dense_format("bf16").tensor_bytes(4096, 4096)
    33554432
    """
    return WeightFormat(kind=FormatKind.DENSE, label=dtype, dense_dtype=dtype, bits=16)
