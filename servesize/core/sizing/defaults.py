"""Domain defaults of a sizing request: the longest request a length spec draws and the context
length that holds it (shared by ``/v1/sizing`` and ``servesize size``).

A length spec is a token count or a distribution given by its fields, as the API's schema
spells them: ``fixed`` (``tokens``), ``uniform`` (``low_tokens``, ``high_tokens``), ``normal``
and ``lognormal`` (``mean_tokens``, ``min_tokens``, ``max_tokens`` or None), ``histogram``
(``tokens``; its ``max_tokens`` the largest).
"""

from __future__ import annotations

import math
from typing import Literal, Protocol

__all__ = ["UNCLIPPED_MEAN_MULTIPLE", "LengthSpec", "default_max_model_len", "upper_tokens"]

UNCLIPPED_MEAN_MULTIPLE = 4
"""An unclipped normal or log-normal length is taken to reach this many times its mean."""
MIN_DEFAULT_MAX_MODEL_LEN = 2048


class _Fixed(Protocol):
    @property
    def kind(self) -> Literal["fixed"]: ...
    @property
    def tokens(self) -> int: ...


class _Uniform(Protocol):
    @property
    def kind(self) -> Literal["uniform"]: ...
    @property
    def high_tokens(self) -> int: ...


class _Clipped(Protocol):
    @property
    def kind(self) -> Literal["normal", "lognormal"]: ...
    @property
    def mean_tokens(self) -> float: ...
    @property
    def min_tokens(self) -> int: ...
    @property
    def max_tokens(self) -> int | None: ...


class _Histogram(Protocol):
    @property
    def kind(self) -> Literal["histogram"]: ...
    @property
    def max_tokens(self) -> int: ...


LengthSpec = int | _Fixed | _Uniform | _Clipped | _Histogram


def upper_tokens(spec: LengthSpec) -> int:
    """The longest length a spec draws (unclipped normal/log-normal: four times the mean).

    >>> from types import SimpleNamespace as NS
    >>> upper_tokens(512), upper_tokens(NS(kind="uniform", low_tokens=1, high_tokens=900))
    (512, 900)
    >>> upper_tokens(NS(kind="lognormal", mean_tokens=300.5, min_tokens=1, max_tokens=None))
    1202
    """
    if isinstance(spec, int):
        return spec
    if spec.kind == "fixed":
        return spec.tokens
    if spec.kind == "uniform":
        return spec.high_tokens
    if spec.kind == "histogram":
        return spec.max_tokens
    if spec.max_tokens is not None:
        return spec.max_tokens
    return max(spec.min_tokens, math.ceil(UNCLIPPED_MEAN_MULTIPLE * spec.mean_tokens))


def default_max_model_len(input_tokens: LengthSpec, output_tokens: LengthSpec) -> int:
    """The smallest power of two (at least 2048) that holds the longest request.

    >>> default_max_model_len(512, 128), default_max_model_len(3000, 1200)
    (2048, 8192)
    """
    longest = upper_tokens(input_tokens) + upper_tokens(output_tokens)
    return max(MIN_DEFAULT_MAX_MODEL_LEN, 1 << (longest - 1).bit_length())
