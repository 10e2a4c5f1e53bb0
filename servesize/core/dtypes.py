"""Storage size of one element, by dtype name.

Sizes are exact rationals (``fractions.Fraction``) in bits per element, so sub-byte formats
stay exact; only a *total* is rounded, once, up to whole bytes (:func:`bytes_for`).

Sub-byte formats carry their block scales in the per-element cost:

- ``int4`` and ``fp4`` (E2M1): 4 bits, no scale (group scales of AWQ/GPTQ checkpoints depend on
  the group size and belong to the quantization spec, not to the dtype).
- ``mxfp4`` (OCP Microscaling): 4-bit E2M1 values plus one 8-bit E8M0 scale per block of 32
  elements, ``4 + 8/32 = 17/4`` bits.
- ``nvfp4``: 4-bit E2M1 values plus one FP8 (E4M3) scale per block of 16 elements,
  ``4 + 8/16 = 9/2`` bits. The single FP32 per-tensor scale is not included.

>>> bits_per_element("bf16")
Fraction(16, 1)
>>> bytes_for(1000, "mxfp4")  # 1000 * 4.25 bits = 531.25 bytes, rounded up
532
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = [
    "DTYPE_ALIASES",
    "KNOWN_DTYPES",
    "bits_per_element",
    "bytes_for",
    "bytes_per_element",
    "canonical_dtype",
]

_BITS: dict[str, Fraction] = {
    "fp32": Fraction(32),
    "bf16": Fraction(16),
    "fp16": Fraction(16),
    "fp8": Fraction(8),
    "fp8_e4m3": Fraction(8),
    "fp8_e5m2": Fraction(8),
    "int8": Fraction(8),
    "int4": Fraction(4),
    "fp4": Fraction(4),
    "mxfp4": Fraction(4) + Fraction(8, 32),
    "nvfp4": Fraction(4) + Fraction(8, 16),
}

KNOWN_DTYPES: tuple[str, ...] = tuple(_BITS)
"""Canonical dtype names, in decreasing width."""

DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "e5m2": "fp8_e5m2",
    "uint8": "int8",
    "e2m1": "fp4",
}
"""Other spellings (PyTorch dtype names, HF ``torch_dtype`` values) and their canonical names."""


def canonical_dtype(name: str) -> str:
    """Return the canonical name for ``name`` (case-insensitive), or raise ``KeyError``.

    >>> canonical_dtype("bfloat16")
    'bf16'
    """
    key = name.strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    if key not in _BITS:
        raise KeyError(f"unknown dtype {name!r}; known: {', '.join(KNOWN_DTYPES)}")
    return key


def bits_per_element(name: str) -> Fraction:
    """Exact storage cost of one element of dtype ``name``, in bits (block scales included)."""
    return _BITS[canonical_dtype(name)]


def bytes_per_element(name: str) -> Fraction:
    """Exact storage cost of one element of dtype ``name``, in bytes (may be fractional)."""
    return bits_per_element(name) / 8


def bytes_for(num_elements: int, name: str) -> int:
    """Whole bytes needed to store ``num_elements`` elements of dtype ``name`` (rounded up).

    >>> bytes_for(131_072 // 2, "fp16")
    131072
    """
    if num_elements < 0:
        raise ValueError(f"num_elements must be >= 0, got {num_elements}")
    return math.ceil(num_elements * bits_per_element(name) / 8)
