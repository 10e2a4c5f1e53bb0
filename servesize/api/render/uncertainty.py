"""Prediction intervals and validated-domain warnings added to rendered responses.

Each helper takes a finished response and returns a copy with the ``*_interval`` fields set and
the domain warnings appended to ``warnings`` (:mod:`servesize.api.uncertainty`); every other
field is left as it was.
"""

from __future__ import annotations

from servesize.api.resolved import ResolvedReplica
from servesize.api.simulation_runner import length_distribution
from servesize.api.uncertainty import Uncertainty, uncertainty
from servesize.core.architecture import Architecture
from servesize.schemas.performance import PerformanceResponse, WorkloadPoint
from servesize.schemas.simulate import LatencyOut, SimulateRequest, SimulateResponse, TrafficIn
from servesize.schemas.sizing import PlanOut, SizingResponse
from servesize.schemas.slo import CurvePointOut, SloCapacityResponse
from servesize.schemas.uncertainty import PredictionIntervalOut

__all__ = ["capacity_bands", "performance_bands", "simulate_bands", "sizing_bands"]


def _version(built: ResolvedReplica) -> str:
    return built.memory.deployment.engine_version


def performance_bands(
    built: ResolvedReplica, work: WorkloadPoint, response: PerformanceResponse
) -> PerformanceResponse:
    """``/v1/performance``: TTFT, TPOT, E2E and both throughputs."""
    u = uncertainty(response.engine, built.model.id, built.model.architecture)
    warnings = u.warnings(
        gpu=built.hardware.name,
        engine_version=_version(built),
        input_tokens=[work.input_tokens],
        output_tokens=[work.output_tokens],
        concurrency=[work.concurrency],
    )
    if response.resident_sequences < work.concurrency:
        warnings.append(
            "the prediction intervals were validated on rows whose KV cache holds every client; "
            "with admission queueing the error is larger"
        )
    return response.model_copy(
        update={
            "ttft_s_interval": u.latency("ttft_s", response.ttft_s),
            "tpot_s_interval": u.latency("tpot_s", response.tpot_s),
            "e2e_s_interval": u.latency("e2e_s", response.e2e_s),
            "throughput_output_tokens_per_s_interval": u.rate(
                response.throughput_output_tokens_per_s
            ),
            "throughput_requests_per_s_interval": u.rate(response.throughput_requests_per_s),
            "warnings": [*response.warnings, *warnings],
        }
    )


def _mean_lengths(built: ResolvedReplica, traffic: TrafficIn) -> tuple[int, int]:
    clip = built.memory.max_model_len - 1
    p = length_distribution(traffic.input_tokens, clip).mean_tokens
    n = length_distribution(traffic.output_tokens, clip).mean_tokens
    return max(1, round(p)), max(1, round(n))


def _mean(stats: LatencyOut | None) -> float | None:
    return stats.mean if stats is not None else None


def simulate_bands(
    body: SimulateRequest, built: ResolvedReplica, response: SimulateResponse
) -> SimulateResponse:
    """``/v1/simulate``: the means of TTFT, TPOT and E2E; the closed loop's throughput. The
    bands come from the steady-state tier's residuals; the domain is checked at the mean
    lengths."""
    u = uncertainty(response.engine, built.model.id, built.model.architecture)
    closed = body.traffic.mode == "closed_loop"
    p, n = _mean_lengths(built, body.traffic)
    warnings = u.warnings(
        gpu=built.hardware.name,
        engine_version=_version(built),
        input_tokens=[p],
        output_tokens=[n],
        concurrency=[body.traffic.concurrency] if closed else [],
    )
    return response.model_copy(
        update={
            "ttft_s_interval": u.latency("ttft_s", _mean(response.ttft_s)),
            "tpot_s_interval": u.latency("tpot_s", _mean(response.tpot_s)),
            "e2e_s_interval": u.latency("e2e_s", _mean(response.e2e_s)),
            "throughput_output_tokens_per_s_interval": (
                u.rate(response.throughput_output_tokens_per_s) if closed else None
            ),
            "warnings": [*response.warnings, *warnings],
        }
    )


_CURVE_LATENCIES = tuple(
    (f"{metric}_{q}_s", f"{metric}_s") for metric in ("ttft", "tpot") for q in ("p50", "p95", "p99")
)
"""Curve fields with a band, and the latency whose residuals give it."""


def _curve_point(u: Uncertainty, point: CurvePointOut, *, closed: bool) -> CurvePointOut:
    """One curve point with a band on each latency percentile (the mean's multiplicative band,
    docs/modeling.md §5.7) and, in a closed loop, on its throughput (``C / E2E``)."""
    update: dict[str, PredictionIntervalOut | None] = {
        f"{field}_interval": u.latency(metric, getattr(point, field))
        for field, metric in _CURVE_LATENCIES
    }
    if closed:
        update["throughput_requests_per_s_interval"] = u.rate(point.throughput_requests_per_s)
    return point.model_copy(update=update)


def capacity_bands(built: ResolvedReplica, response: SloCapacityResponse) -> SloCapacityResponse:
    """``/v1/slo/capacity``: the open loop's max rate and every curve point."""
    u = uncertainty(response.engine, built.model.id, built.model.architecture)
    closed = response.mode == "closed_loop"
    concurrency = response.max_concurrency
    warnings = u.warnings(
        gpu=built.hardware.name,
        engine_version=_version(built),
        concurrency=[concurrency] if concurrency is not None else [],
    )
    return response.model_copy(
        update={
            "max_rate_per_s_interval": u.rate(response.max_rate_per_s),
            "curve": [_curve_point(u, p, closed=closed) for p in response.curve],
            "warnings": [*response.warnings, *warnings],
        }
    )


def _plan(plan: PlanOut, model: str, architecture: Architecture, engine_version: str) -> PlanOut:
    u = uncertainty(plan.engine, model, architecture)
    return plan.model_copy(
        update={
            "max_rate_per_replica_per_s_interval": u.rate(plan.max_rate_per_replica_per_s),
            "warnings": u.warnings(gpu=plan.hardware, engine_version=engine_version),
        }
    )


def sizing_bands(
    response: SizingResponse, architecture: Architecture, engine_versions: list[str]
) -> SizingResponse:
    """``/v1/sizing``: each plan's max rate per replica and its domain warnings (also listed
    once in the response's ``warnings``)."""
    plans = [
        _plan(p, response.model, architecture, v)
        for p, v in zip(response.plans, engine_versions, strict=True)
    ]
    extra = sorted({w for p in plans for w in p.warnings} - set(response.warnings))
    return response.model_copy(update={"plans": plans, "warnings": [*response.warnings, *extra]})
