"""SLO verdicts and capacity plans as ``/v1/slo`` responses, and their problems.

Non-finite figures (an overloaded run's infinite latency) become ``null``; a check whose
prediction is infinite says so in ``predicted_infinite``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from servesize.api.errors import SloInfeasibleError, UnprocessableError
from servesize.api.resolved import ResolvedReplica
from servesize.api.simulate_views import latency_out
from servesize.core.simulation import SimulationSummary
from servesize.core.slo import (
    CapacityPlan,
    Check,
    CurvePoint,
    Infeasibility,
    SloEvaluation,
    ThroughputFloorUnreachableError,
    ThroughputOnlyObjectiveError,
)
from servesize.schemas.slo import (
    AnalyticScreenOut,
    CheckOut,
    CurvePointOut,
    SloCapacityResponse,
    SloEvaluateResponse,
    SloIn,
)


def finite(value: float | None) -> float | None:
    """``value``, or ``None`` when it is missing or not finite."""
    return value if value is not None and math.isfinite(value) else None


def check_out(check: Check) -> CheckOut:
    return CheckOut(
        name=check.name,
        predicted=finite(check.predicted),
        predicted_infinite=check.predicted == math.inf,
        limit=check.limit,
        direction=check.direction,
        margin=finite(check.margin),
        relative_margin=finite(check.relative_margin),
        holds=check.holds,
    )


def screen_out(ev: SloEvaluation, saturation: float, utilization: float) -> AnalyticScreenOut:
    """Tier A's verdict, with one replica's saturation rate and the utilization it implies."""
    return AnalyticScreenOut(
        feasible=ev.feasible,
        checks=[check_out(c) for c in ev.checks],
        binding_constraint=ev.binding,
        reason=ev.reason,
        goodput_requests_per_s=finite(ev.goodput_requests_per_s),
        throughput_requests_per_s=finite(ev.throughput_requests_per_s),
        saturation_rate_per_s=saturation,
        utilization=utilization,
        unscreened=list(ev.unscreened),
    )


def evaluation_out(
    built: ResolvedReplica,
    ev: SloEvaluation,
    *,
    decided_by: Literal["analytic", "simulation"],
    screen: AnalyticScreenOut | None,
    warnings: list[str],
    summary: SimulationSummary | None = None,
) -> SloEvaluateResponse:
    """The verdict of the tier that decided; the simulated latency statistics when it was the
    simulation and the run was stable."""
    shown = summary if summary is not None and ev.stable else None
    if built.calibration is not None and built.calibration.note() not in warnings:
        warnings = [*warnings, built.calibration.note()]
    return SloEvaluateResponse(
        model=built.model.id,
        hardware=built.hardware.id,
        engine=built.memory.deployment.engine,
        feasible=ev.feasible,
        decided_by=decided_by,
        checks=[check_out(c) for c in ev.checks],
        binding_constraint=ev.binding,
        reason=ev.reason,
        headroom=finite(ev.check(ev.binding).relative_margin),
        goodput_requests_per_s=finite(ev.goodput_requests_per_s),
        throughput_requests_per_s=finite(ev.throughput_requests_per_s),
        throughput_output_tokens_per_s=(
            finite(summary.throughput_output_tokens_per_s) if summary is not None else None
        ),
        error_rate=ev.failure_rate,
        attainment=ev.attainment,
        stable=ev.stable,
        analytic_screen=screen,
        ttft_s=latency_out(shown.ttft_s) if shown is not None else None,
        itl_s=latency_out(shown.itl_s) if shown is not None else None,
        tpot_s=latency_out(shown.tpot_s) if shown is not None else None,
        e2e_s=latency_out(shown.e2e_s) if shown is not None else None,
        warnings=warnings,
    )


def curve_point_out(pt: CurvePoint, *, closed_loop: bool) -> CurvePointOut:
    """One curve entry; latencies only for a stable run."""
    return CurvePointOut(
        rate_per_s=None if closed_loop else pt.load,
        concurrency=int(pt.load) if closed_loop else None,
        ttft_p50_s=finite(pt.ttft_p50_s) if pt.stable else None,
        ttft_p95_s=finite(pt.ttft_p95_s) if pt.stable else None,
        tpot_p50_s=finite(pt.tpot_p50_s) if pt.stable else None,
        tpot_p95_s=finite(pt.tpot_p95_s) if pt.stable else None,
        ttft_p99_s=finite(pt.ttft_p99_s) if pt.stable else None,
        tpot_p99_s=finite(pt.tpot_p99_s) if pt.stable else None,
        goodput_requests_per_s=finite(pt.goodput_requests_per_s),
        throughput_requests_per_s=finite(pt.throughput_requests_per_s),
        feasible=pt.feasible,
        stable=pt.stable,
        binding_constraint=pt.evaluation.binding,
    )


def capacity_out(
    built: ResolvedReplica,
    plan: CapacityPlan,
    *,
    zero_load_ttft_p95_s: float,
    simulated_requests: int,
    warnings: Sequence[str] = (),
) -> SloCapacityResponse:
    """A capacity plan: the answer in the loop's unit (rate or concurrency), its bracket, the
    curve and Tier A's figures."""
    closed, search = plan.closed_loop, plan.search
    return SloCapacityResponse(
        model=built.model.id,
        hardware=built.hardware.id,
        engine=built.memory.deployment.engine,
        mode="closed_loop" if closed else "open_loop",
        max_rate_per_s=None if closed or not plan.found else plan.max_load,
        max_concurrency=int(plan.max_load) if closed and plan.found else None,
        binding_constraint=plan.binding,
        converged=search.converged,
        bracket_low=search.low,
        bracket_high=finite(search.high),
        curve=[curve_point_out(pt, closed_loop=closed) for pt in search.curve],
        knee_rate_per_s=None if closed else search.knee_load,
        knee_concurrency=search.knee_load if closed else None,
        tier_a_saturation_rate_per_s=plan.tier_a_saturation_rate_per_s,
        tier_a_max_rate_per_s=plan.tier_a_max_rate_per_s,
        zero_load_ttft_p95_s=zero_load_ttft_p95_s,
        probes=search.probes,
        short_probes=search.short_probes,
        confirmation_seeds=plan.confirmation_seeds,
        confirmed_by_seeds=plan.confirmed_by_seeds,
        simulated_requests=simulated_requests,
        warnings=[*warnings, *plan.warnings],
    )


def zero_load_problem(violations: Sequence[Infeasibility]) -> SloInfeasibleError:
    """Targets an idle engine already misses, each with its zero-load value."""
    errors: list[dict[str, Any]] = [
        {
            "location": "body",
            "pointer": (
                "/traffic/timeout_s" if v.name == "failure_rate" else "/slo" + SloIn.pointer(v.name)
            ),
            "detail": v.detail,
            "limit": v.limit,
            "zero_load": v.zero_load,
        }
        for v in violations
    ]
    return SloInfeasibleError(
        "; ".join(v.detail for v in violations)
        + " (zero load: request overhead plus prefill for TTFT, a batch-1 decode step for "
        "TPOT and ITL)",
        errors=errors,
    )


def floor_problem(exc: ThroughputFloorUnreachableError) -> SloInfeasibleError:
    """A minimum throughput beyond one replica's saturation rate."""
    detail = f"{exc}; size several replicas with /v1/sizing instead"
    return SloInfeasibleError(
        detail,
        errors=[
            {
                "location": "body",
                "pointer": "/slo/min_throughput_requests_per_s",
                "detail": detail,
                "limit": exc.min_throughput_requests_per_s,
                "saturation": exc.saturation_rate_per_s,
            }
        ],
    )


def throughput_only_problem(exc: ThroughputOnlyObjectiveError) -> UnprocessableError:
    """A capacity search asked for with a minimum throughput as its only target."""
    return UnprocessableError(
        str(exc),
        slug="slo-invalid",
        errors=[{"location": "body", "pointer": "/slo", "detail": str(exc)}],
    )
