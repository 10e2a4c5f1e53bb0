"""Prediction intervals and validated-domain warnings for API responses.

Reads ``servesize/data/prediction_intervals.json`` (written by
``python -m bench.accuracy --write-intervals``) once; the interval logic is
:mod:`servesize.core.uncertainty`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from servesize.core.architecture import Architecture
from servesize.core.uncertainty import (
    Interval,
    PredictionIntervals,
    ValidatedDomain,
    domain_warnings,
    model_family,
)
from servesize.schemas.uncertainty import PredictionIntervalOut

__all__ = ["COVERAGE", "INTERVALS_JSON", "Uncertainty", "uncertainty"]

INTERVALS_JSON = Path(__file__).resolve().parent.parent / "data" / "prediction_intervals.json"
COVERAGE = 0.8
"""Coverage of the intervals the responses show."""


@lru_cache(maxsize=1)
def _tables() -> tuple[PredictionIntervals, ValidatedDomain]:
    data = json.loads(INTERVALS_JSON.read_text())
    return PredictionIntervals.from_mapping(data), ValidatedDomain.from_mapping(data["domain"])


class Uncertainty:
    """Bands and domain warnings for one engine, model and GPU."""

    def __init__(self, *, engine: str, model: str, architecture: Architecture) -> None:
        self.engine = engine
        self.model = model
        self.family = model_family(architecture)
        self.intervals, self.domain = _tables()

    def latency(self, metric: str, value: float | None) -> PredictionIntervalOut | None:
        """The band of a latency ``metric`` (``ttft_s``, ``tpot_s``, ``e2e_s``) prediction."""
        if value is None:
            return None
        return _out(
            self.intervals.latency(
                metric,
                value,
                engine=self.engine,
                family=self.family,
                coverage=COVERAGE,
                model=self.model,
            )
        )

    def rate(self, value: float | None) -> PredictionIntervalOut | None:
        """The band of a rate (throughput, max rate) inversely proportional to the E2E time."""
        if value is None:
            return None
        return _out(
            self.intervals.rate(
                "e2e_s",
                value,
                engine=self.engine,
                family=self.family,
                coverage=COVERAGE,
                model=self.model,
            )
        )

    def warnings(
        self,
        *,
        gpu: str,
        engine_version: str | None,
        input_tokens: Sequence[int] = (),
        output_tokens: Sequence[int] = (),
        concurrency: Sequence[int] = (),
    ) -> list[str]:
        """Where the request lies outside the validated domain."""
        return list(
            domain_warnings(
                self.domain,
                gpu=gpu,
                engine=self.engine,
                engine_version=engine_version,
                family=self.family,
                model=self.model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                concurrency=concurrency,
            )
        )


def _out(interval: Interval | None) -> PredictionIntervalOut | None:
    if interval is None:
        return None
    return PredictionIntervalOut(
        low=interval.low, high=interval.high, coverage=interval.coverage, basis=interval.basis
    )


def uncertainty(engine: str, model: str, architecture: Architecture) -> Uncertainty:
    """The bands and warnings of ``engine`` serving ``model`` (catalogue id or name)."""
    return Uncertainty(engine=engine, model=model, architecture=architecture)
