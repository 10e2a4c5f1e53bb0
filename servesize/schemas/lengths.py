"""Token-length schemas: a number or a distribution (``traffic.input_tokens`` and
``output_tokens`` of ``/v1/simulate`` and ``/v1/slo/*``, and the per-turn lengths of
``traffic.sessions``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from servesize.schemas.base import RequestModel
from servesize.schemas.traces import MAX_LENGTH_TOKENS, TokenCount

MAX_HISTOGRAM_VALUES = 10_000


class _In(RequestModel):
    """Request parts whose attribute docstrings are their OpenAPI descriptions."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class FixedLengthIn(_In):
    """Every request has exactly ``tokens`` tokens."""

    kind: Literal["fixed"]
    tokens: int = Field(ge=1, le=MAX_LENGTH_TOKENS, examples=[1024])


class UniformLengthIn(_In):
    """Integers uniform on ``[low_tokens, high_tokens]``, both ends included."""

    kind: Literal["uniform"]
    low_tokens: int = Field(ge=1, le=MAX_LENGTH_TOKENS, examples=[512])
    high_tokens: int = Field(ge=1, le=MAX_LENGTH_TOKENS, examples=[1536])

    @model_validator(mode="after")
    def _ordered(self) -> UniformLengthIn:
        if self.high_tokens < self.low_tokens:
            raise ValueError(
                f"high_tokens ({self.high_tokens}) must be >= low_tokens ({self.low_tokens})"
            )
        return self


class _ClippedLengthIn(_In):
    min_tokens: int = Field(default=1, ge=1, le=MAX_LENGTH_TOKENS, examples=[16])
    """Lower clip."""
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_LENGTH_TOKENS, examples=[4096])
    """Upper clip; unset clips at the deployment's ``max_model_len`` (minus one token for the
    other side of the request)."""

    @model_validator(mode="after")
    def _bounds(self) -> _ClippedLengthIn:
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise ValueError(
                f"max_tokens ({self.max_tokens}) must be >= min_tokens ({self.min_tokens})"
            )
        return self


class NormalLengthIn(_ClippedLengthIn):
    """``round(N(mean_tokens, std_tokens²))`` clipped to ``[min_tokens, max_tokens]`` (the mean
    is before clipping)."""

    kind: Literal["normal"]
    mean_tokens: float = Field(gt=0, le=MAX_LENGTH_TOKENS, examples=[1024.0])
    std_tokens: float = Field(ge=0, le=MAX_LENGTH_TOKENS, examples=[256.0])


class LogNormalLengthIn(_ClippedLengthIn):
    """``round(X)``, ``X`` log-normal with mean ``mean_tokens`` and coefficient of variation
    ``cv``, clipped to ``[min_tokens, max_tokens]``."""

    kind: Literal["lognormal"]
    mean_tokens: float = Field(gt=0, le=MAX_LENGTH_TOKENS, examples=[1024.0])
    cv: float = Field(ge=0, le=100, examples=[0.5])


class HistogramLengthIn(_In):
    """An empirical distribution: ``tokens[k]`` with probability ``weights[k] / Σ weights``."""

    kind: Literal["histogram"]
    tokens: list[Annotated[int, Field(ge=1, le=MAX_LENGTH_TOKENS)]] = Field(
        min_length=1, max_length=MAX_HISTOGRAM_VALUES, examples=[[128, 512, 2048]]
    )
    """Observed lengths (repeats add their weights)."""
    weights: list[Annotated[float, Field(ge=0, le=1e12)]] | None = Field(
        default=None, max_length=MAX_HISTOGRAM_VALUES, examples=[[0.5, 0.3, 0.2]]
    )
    """Relative frequency of each of ``tokens`` (unset: equal)."""

    @property
    def min_tokens(self) -> int:
        """The shortest length drawn."""
        return min(self.tokens)

    @property
    def max_tokens(self) -> int:
        """The longest length drawn."""
        return max(self.tokens)

    @property
    def mean_tokens(self) -> float:
        """``Σ w t / Σ w``."""
        weights = self.weights if self.weights is not None else [1.0] * len(self.tokens)
        return sum(w * t for w, t in zip(weights, self.tokens, strict=True)) / sum(weights)

    @model_validator(mode="after")
    def _matching(self) -> HistogramLengthIn:
        if self.weights is not None:
            if len(self.weights) != len(self.tokens):
                raise ValueError(
                    f"weights has {len(self.weights)} entries, tokens has {len(self.tokens)}"
                )
            if sum(self.weights) <= 0:
                raise ValueError("weights must have a positive sum")
        return self


LengthDistributionIn = Annotated[
    FixedLengthIn | UniformLengthIn | NormalLengthIn | LogNormalLengthIn | HistogramLengthIn,
    Field(discriminator="kind"),
]
_TOKEN_COUNT: TypeAdapter[int] = TypeAdapter(TokenCount)
_BY_KIND: dict[str, type[RequestModel]] = {
    "fixed": FixedLengthIn,
    "uniform": UniformLengthIn,
    "normal": NormalLengthIn,
    "lognormal": LogNormalLengthIn,
    "histogram": HistogramLengthIn,
}


def _one_error(exc: ValidationError) -> PydanticCustomError:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    return PydanticCustomError("length_distribution", "{issues}", {"issues": "; ".join(parts)})


def _validate_length(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """Dispatch on ``kind`` so a mistake is reported at the length's own pointer (a plain
    union would report one error per alternative, under synthetic path segments)."""
    if isinstance(
        value,
        FixedLengthIn | UniformLengthIn | NormalLengthIn | LogNormalLengthIn | HistogramLengthIn,
    ):
        return value
    if isinstance(value, dict):
        kind = value.get("kind")
        model = _BY_KIND.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise PydanticCustomError(
                "length_kind",
                "kind must be one of fixed, uniform, normal, lognormal, histogram (got {kind})",
                {"kind": repr(kind)},
            )
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise _one_error(exc) from None
    try:
        return _TOKEN_COUNT.validate_python(value)
    except ValidationError as exc:
        raise _one_error(exc) from None


LengthIn = Annotated[TokenCount | LengthDistributionIn, WrapValidator(_validate_length)]
"""A token count, or a distribution ``{"kind": "fixed" | "uniform" | "normal" | "lognormal" |
"histogram", ...}``."""
