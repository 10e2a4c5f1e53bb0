"""Byte units and integer helpers shared by the memory ledger.

Binary units only where the text says so: ``GIB = 2**30`` bytes is printed as "GiB", never as
"GB". Byte counts stay ``int`` end to end; only human-readable text is rounded.

>>> cdiv(4097, 16), round_up(128257, 64), gib_text(2**31)
(257, 128320, '2.00 GiB')
"""

from __future__ import annotations

__all__ = ["GIB", "KIB", "MIB", "cdiv", "gib_text", "int_text", "round_up"]

KIB = 2**10
MIB = 2**20
GIB = 2**30


def cdiv(numerator: int, denominator: int) -> int:
    """Ceiling division of non-negative integers (``vllm.utils.cdiv``)."""
    return -(-numerator // denominator)


def round_up(value: int, multiple: int) -> int:
    """Smallest multiple of ``multiple`` that is ``>= value``."""
    return cdiv(value, multiple) * multiple


def gib_text(num_bytes: int | float, digits: int = 2) -> str:
    """``num_bytes`` as binary gigabytes, labelled "GiB" (2^30 bytes)."""
    return f"{num_bytes / GIB:.{digits}f} GiB"


def int_text(value: int) -> str:
    """An integer with thousands separators, as vLLM logs token counts."""
    return f"{value:,}"
