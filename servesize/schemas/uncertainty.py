"""Prediction intervals attached to predicted figures."""

from __future__ import annotations

from pydantic import Field

from servesize.schemas.base import ResponseModel


class PredictionIntervalOut(ResponseModel):
    """``[low, high]`` held the measured value in ``coverage`` of the held-out serving rows
    (multiplicative band of out-of-sample residuals, docs/modeling.md §5.7)."""

    low: float = Field(examples=[0.081])
    high: float = Field(examples=[0.142])
    coverage: float = Field(examples=[0.8])
    basis: str = Field(examples=["vllm/dense (130 held-out rows)"])
    """The residual group the band comes from and its number of held-out rows."""
