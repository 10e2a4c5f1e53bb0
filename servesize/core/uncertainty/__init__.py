"""Prediction intervals from out-of-sample residuals and the validated domain's warnings."""

from servesize.core.uncertainty.domain import (
    FAMILIES,
    EngineDomain,
    ValidatedDomain,
    domain_warnings,
    model_family,
)
from servesize.core.uncertainty.intervals import (
    METRICS,
    Interval,
    PredictionIntervals,
    ResidualGroup,
    empirical_quantile,
    group_key,
    residual_group,
)

__all__ = [
    "FAMILIES",
    "METRICS",
    "EngineDomain",
    "Interval",
    "PredictionIntervals",
    "ResidualGroup",
    "ValidatedDomain",
    "domain_warnings",
    "empirical_quantile",
    "group_key",
    "model_family",
    "residual_group",
]
