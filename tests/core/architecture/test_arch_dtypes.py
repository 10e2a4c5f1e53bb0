"""Bytes per element by dtype name, sub-byte formats included."""

from __future__ import annotations

from fractions import Fraction

import pytest

from servesize.core.dtypes import bits_per_element, bytes_for, bytes_per_element, canonical_dtype


@pytest.mark.parametrize(
    ("name", "bits"),
    [
        ("fp32", 32),
        ("bf16", 16),
        ("fp16", 16),
        ("fp8", 8),
        ("fp8_e4m3", 8),
        ("fp8_e5m2", 8),
        ("int8", 8),
        ("int4", 4),
        ("fp4", 4),
        ("mxfp4", Fraction(17, 4)),  # 4 bits + an 8-bit E8M0 scale per 32 values
        ("nvfp4", Fraction(9, 2)),  # 4 bits + an 8-bit E4M3 scale per 16 values
    ],
)
def test_bits_per_element(name: str, bits: Fraction | int) -> None:
    assert bits_per_element(name) == bits
    assert bytes_per_element(name) == Fraction(bits) / 8


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32"), ("FP8_E4M3", "fp8_e4m3")],
)
def test_aliases(alias: str, canonical: str) -> None:
    assert canonical_dtype(alias) == canonical


def test_totals_are_whole_bytes_rounded_up() -> None:
    assert bytes_for(32, "mxfp4") == 17  # 32 * 4.25 bits = 136 bits = 17 bytes exactly
    assert bytes_for(33, "mxfp4") == 18  # 140.25 bits -> 17.53 bytes -> 18
    assert bytes_for(3, "int4") == 2
    assert bytes_for(0, "nvfp4") == 0


def test_unknown_dtype() -> None:
    with pytest.raises(KeyError, match="unknown dtype"):
        bits_per_element("fp6")
    with pytest.raises(ValueError, match=">= 0"):
        bytes_for(-1, "bf16")
