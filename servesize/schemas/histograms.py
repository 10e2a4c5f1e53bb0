"""Histograms of a simulated run's per-request latencies, for plots."""

from __future__ import annotations

from servesize.schemas.base import ResponseModel

__all__ = ["HISTOGRAM_BINS", "HistogramOut", "LatencyHistogramsOut"]

HISTOGRAM_BINS = 30
"""Equal-width bins between the smallest and the largest value (one bin when they are equal to
within 1e-9, as in a closed loop of identical requests on an idle engine)."""


class HistogramOut(ResponseModel):
    """``counts[i]`` values lie in ``[edges_s[i], edges_s[i + 1])`` (the last bin is closed);
    ``len(edges_s) == len(counts) + 1``. Failed requests (no finite value) are not counted."""

    edges_s: list[float]
    counts: list[int]


class LatencyHistogramsOut(ResponseModel):
    """TTFT over the measured requests that completed; ITL over every streamed gap of the
    measured requests, each gap counted once per token it delivered (the pooled ITL's
    weights), so the ITL counts add up to the tokens behind ``itl_s``."""

    ttft_s: HistogramOut | None
    itl_s: HistogramOut | None
