"""SLO feasibility and capacity over HTTP (``/v1/slo/evaluate``, ``/v1/slo/capacity``).

Both routes are plain ``def``: FastAPI runs them in its threadpool, so simulations do not block
the event loop. The work is bounded: one evaluation is one simulation within the
``/v1/simulate`` limits; a capacity search runs at most ``max_probes + curve_points`` full
simulations (plus a short screening run before each), and their total requests and expected
tokens are capped (``MAX_SEARCH_REQUESTS``, ``MAX_SEARCH_TOKENS``) with a 422 that says so.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Body
from sqlalchemy.orm import Session

from servesize.api.deps import ReadAccess, SessionDep
from servesize.api.engine_model import EngineModel, request_engine_model
from servesize.api.errors import ApiError, UnprocessableError
from servesize.api.routes.models import CatalogIndex, CatalogIndexDep
from servesize.api.routes.simulate import latency_out
from servesize.api.simulation_runner import build_workload, length_distribution, run_simulation
from servesize.core.errors import UnstableQueueError
from servesize.core.simulation import SimulationSummary, percentile
from servesize.core.slo import (
    Check,
    CurvePoint,
    ServiceLevelObjective,
    SloEvaluation,
    curve_point,
    evaluate_analytic,
    evaluate_overload,
    evaluate_result,
    search_capacity,
    zero_load_latencies,
    zero_load_violations,
)
from servesize.core.steptime import OpenLoopEstimate, open_loop, resident_capacity
from servesize.core.traffic import Workload
from servesize.schemas.simulate import MAX_EXPECTED_TOKENS, MAX_REQUESTS, TrafficIn
from servesize.schemas.slo import (
    AnalyticScreenOut,
    CheckOut,
    CurvePointOut,
    SloCapacityRequest,
    SloCapacityResponse,
    SloEvaluateRequest,
    SloEvaluateResponse,
    SloIn,
)

router = APIRouter(prefix="/v1/slo", tags=["slo"], dependencies=[ReadAccess])

MAX_SEARCH_REQUESTS = 4 * MAX_REQUESTS
"""Most requests a capacity search may simulate over all its probes."""
MAX_SEARCH_TOKENS = 4 * MAX_EXPECTED_TOKENS
SHORT_FRACTION = 4
"""A screening run simulates a quarter of the requests."""
SATURATION_BRACKET = 1.05
CONFIRMATION_SEEDS = 2
"""Extra runs at the answer with other seeds (modeling.md §3.11: "confirm with 2-3 seeds")."""
CONFIRMATION_STEPS = 3
"""Times the answer may be lowered (by twice the tolerance) until every seed meets the SLO."""
CONFIRMATION_RUNS = CONFIRMATION_SEEDS + (CONFIRMATION_STEPS - 1) * (CONFIRMATION_SEEDS + 1)
"""The search starts just above Tier A's saturation rate (modeling.md §3.11)."""
TIER_A_BISECTIONS = 40
MAX_RATE_PER_S = 1_000_000.0
MAX_CONCURRENCY = 100_000

_SMALL: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"}
_OPEN_LOOP: dict[str, Any] = {
    "arrival": {"process": "poisson", "rate_per_s": 4},
    "input_tokens": 512,
    "output_tokens": 64,
    "num_requests": 200,
    "warmup_requests": 20,
}
EVALUATE_EXAMPLES: dict[str, dict[str, Any]] = {
    "percentiles": {
        "summary": "Open loop at 4 requests/s against p95 TTFT, p95 TPOT and p99 ITL targets",
        "value": _SMALL
        | {
            "traffic": _OPEN_LOOP,
            "slo": {
                "ttft_s": {"p95": 0.5},
                "tpot_s": {"p95": 0.05},
                "itl_s": {"p99": 0.1},
                "max_failure_rate": 0.01,
            },
        },
    },
    "attainment": {
        "summary": "DistServe attainment: 90 % of requests within 1 s TTFT and 50 ms TPOT, "
        "bursty arrivals, two replicas",
        "value": _SMALL
        | {
            "traffic": _OPEN_LOOP
            | {
                "arrival": {"process": "gamma", "rate_per_s": 8, "cv": 2},
                "input_tokens": {"kind": "lognormal", "mean_tokens": 512, "cv": 0.5},
                "timeout_s": 30,
            },
            "slo": {"attainment": {"goal": 0.9, "ttft_s": 1.0, "tpot_s": 0.05}},
            "replicas": 2,
            "routing": "least_loaded",
        },
    },
    "analytic": {
        "summary": "Tier A only: a verdict in milliseconds, without simulating",
        "value": _SMALL
        | {
            "traffic": _OPEN_LOOP | {"arrival": {"process": "poisson", "rate_per_s": 20}},
            "slo": {"ttft_s": {"p95": 0.5}, "tpot_s": {"p50": 0.03}},
            "tier": "analytic",
        },
    },
}
CAPACITY_EXAMPLES: dict[str, dict[str, Any]] = {
    "open_loop": {
        "summary": "Largest Poisson rate one replica sustains within p95 TTFT 0.5 s and "
        "p95 TPOT 50 ms, with a 2-point curve",
        "value": _SMALL
        | {
            "traffic": _OPEN_LOOP | {"num_requests": 150, "warmup_requests": 15},
            "slo": {"ttft_s": {"p95": 0.5}, "tpot_s": {"p95": 0.05}},
            "search": {"tolerance": 0.05, "max_probes": 8, "curve_points": 2},
        },
    },
    "closed_loop": {
        "summary": "Largest number of concurrent clients (1 s think time) within p95 TTFT 1 s",
        "value": _SMALL
        | {
            "traffic": {
                "mode": "closed_loop",
                "think_time_s": 1.0,
                "input_tokens": 512,
                "output_tokens": 64,
                "num_requests": 150,
                "warmup_requests": 15,
            },
            "slo": {"ttft_s": {"p95": 1.0}},
            "search": {"max_probes": 12, "curve_points": 2},
        },
    },
}


class SloInfeasibleError(ApiError):
    """A target below what the deployment achieves with no load at all."""

    status, slug = 422, "slo-infeasible"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _check_out(check: Check) -> CheckOut:
    return CheckOut(
        name=check.name,
        predicted=_finite(check.predicted),
        predicted_infinite=check.predicted == math.inf,
        limit=check.limit,
        direction=check.direction,
        margin=_finite(check.margin),
        relative_margin=_finite(check.relative_margin),
        holds=check.holds,
    )


def _mean_lengths(built: EngineModel, traffic: TrafficIn) -> tuple[int, int]:
    """Mean prompt and output lengths, rounded, for Tier A (which takes fixed lengths)."""
    clip = built.memory.max_model_len
    p = length_distribution(traffic.input_tokens, clip - 1).mean_tokens
    n = length_distribution(traffic.output_tokens, clip - 1).mean_tokens
    return max(1, round(p)), max(1, round(n))


def _open_loop(built: EngineModel, traffic: TrafficIn, rate_per_s: float) -> OpenLoopEstimate:
    """Tier A's mean-field estimate for one replica at ``rate_per_s``, at the mean lengths."""
    p, n = _mean_lengths(built, traffic)
    return open_loop(
        built.step_model,
        arrival_rate_per_s=rate_per_s,
        input_tokens=p,
        output_tokens=n,
        kv_capacity_tokens=built.memory.kv_capacity_tokens,
    )


def _zero_load_screen(
    built: EngineModel, traffic: TrafficIn, objective: ServiceLevelObjective
) -> tuple[Workload, float]:
    """Draw the requests (bounds and length checks as ``/v1/simulate``), refuse an SLO that an
    idle engine already misses, and return the zero-load p95 TTFT."""
    workload = build_workload(
        traffic, built.memory.max_model_len, np.random.SeedSequence(traffic.seed).spawn(2)[0]
    )
    zero = zero_load_latencies(
        built.step_model,
        prompt_tokens=workload.prompt_tokens,
        output_tokens=workload.output_tokens,
    )
    violations = zero_load_violations(objective, zero, timeout_s=traffic.timeout_s)
    if violations:
        errors = []
        for v in violations:
            pointer = (
                "/traffic/timeout_s" if v.name == "failure_rate" else "/slo" + SloIn.pointer(v.name)
            )
            errors.append(
                {
                    "location": "body",
                    "pointer": pointer,
                    "detail": v.detail,
                    "limit": v.limit,
                    "zero_load": v.zero_load,
                }
            )
        raise SloInfeasibleError(
            "; ".join(v.detail for v in violations)
            + " (zero load: request overhead plus prefill for TTFT, a batch-1 decode step for "
            "TPOT and ITL)",
            errors=errors,
        )
    return workload, percentile(zero.ttft_s, 95.0)


def _prepared(
    body: SloEvaluateRequest | SloCapacityRequest, session: Session, index: CatalogIndex
) -> tuple[EngineModel, ServiceLevelObjective, Workload, float]:
    """The engine model and the core objective of a request, after the zero-load screen: also
    the drawn requests and their zero-load p95 TTFT."""
    built = request_engine_model(body, catalog=index.catalog, session=session)
    objective = body.slo.to_core()
    workload, zero_ttft_p95 = _zero_load_screen(built, body.traffic, objective)
    return built, objective, workload, zero_ttft_p95


def _analytic(
    built: EngineModel,
    traffic: TrafficIn,
    objective: ServiceLevelObjective,
    *,
    rate_per_s: float,
    replicas: int,
) -> tuple[SloEvaluation, float]:
    """Tier A at ``rate_per_s / replicas`` per replica: the verdict and the saturation rate."""
    per_replica = rate_per_s / replicas
    try:
        estimate = _open_loop(built, traffic, per_replica)
    except UnstableQueueError as exc:
        saturation = per_replica / exc.utilization
        return (
            evaluate_overload(
                objective, rate_per_s=rate_per_s, saturation_rate_per_s=saturation * replicas
            ),
            saturation,
        )
    return (
        evaluate_analytic(estimate, objective, replicas=replicas),
        estimate.saturation_rate_per_s,
    )


def _screen_out(ev: SloEvaluation, saturation: float, utilization: float) -> AnalyticScreenOut:
    return AnalyticScreenOut(
        feasible=ev.feasible,
        checks=[_check_out(c) for c in ev.checks],
        binding_constraint=ev.binding,
        reason=ev.reason,
        goodput_requests_per_s=_finite(ev.goodput_requests_per_s),
        throughput_requests_per_s=_finite(ev.throughput_requests_per_s),
        saturation_rate_per_s=saturation,
        utilization=utilization,
        unscreened=list(ev.unscreened),
    )


def _evaluate_run(
    built: EngineModel,
    traffic: TrafficIn,
    objective: ServiceLevelObjective,
    *,
    replicas: int = 1,
    routing: Any = "round_robin",
    policy: Any = None,
) -> tuple[SimulationSummary, SloEvaluation, list[str]]:
    run = run_simulation(built, traffic, replicas=replicas, routing=routing, policy=policy)
    summary, ev = evaluate_result(run.result, objective)
    return summary, ev, list(run.warnings) + list(summary.warnings)


def _evaluation_out(
    built: EngineModel,
    ev: SloEvaluation,
    *,
    decided_by: Literal["analytic", "simulation"],
    screen_out: AnalyticScreenOut | None,
    warnings: list[str],
    summary: SimulationSummary | None = None,
) -> SloEvaluateResponse:
    """The verdict of the tier that decided; the simulated latency statistics when it was the
    simulation and the run was stable."""
    shown = summary if summary is not None and ev.stable else None
    return SloEvaluateResponse(
        model=built.model.id,
        hardware=built.hardware.id,
        engine=built.memory.deployment.engine,
        feasible=ev.feasible,
        decided_by=decided_by,
        checks=[_check_out(c) for c in ev.checks],
        binding_constraint=ev.binding,
        reason=ev.reason,
        headroom=_finite(ev.check(ev.binding).relative_margin),
        goodput_requests_per_s=_finite(ev.goodput_requests_per_s),
        throughput_requests_per_s=_finite(ev.throughput_requests_per_s),
        throughput_output_tokens_per_s=(
            _finite(summary.throughput_output_tokens_per_s) if summary is not None else None
        ),
        error_rate=ev.failure_rate,
        attainment=ev.attainment,
        stable=ev.stable,
        analytic_screen=screen_out,
        ttft_s=latency_out(shown.ttft_s) if shown is not None else None,
        itl_s=latency_out(shown.itl_s) if shown is not None else None,
        tpot_s=latency_out(shown.tpot_s) if shown is not None else None,
        e2e_s=latency_out(shown.e2e_s) if shown is not None else None,
        warnings=warnings,
    )


@router.post("/evaluate", response_model=SloEvaluateResponse)
def evaluate_slo(
    body: Annotated[SloEvaluateRequest, Body(openapi_examples=EVALUATE_EXAMPLES)],
    session: SessionDep,
    index: CatalogIndexDep,
) -> SloEvaluateResponse:
    """Check an SLO for a deployment under a traffic forecast: each target with its predicted
    value and margin, the binding constraint, goodput next to throughput, and which tier
    decided."""
    built, objective, _, _ = _prepared(body, session, index)
    traffic = body.traffic
    warnings: list[str] = []
    open_loop_traffic = traffic.mode == "open_loop"
    if body.tier == "analytic" and not open_loop_traffic:
        raise UnprocessableError(
            "the analytic tier models an open loop only; use tier simulation or auto",
            slug="tier-unavailable",
            errors=[{"location": "body", "pointer": "/tier", "detail": "open loop only"}],
        )
    screen: SloEvaluation | None = None
    screen_out: AnalyticScreenOut | None = None
    if body.tier != "simulation" and open_loop_traffic:
        rate = traffic.arrival.rate_per_s
        screen, saturation = _analytic(
            built, traffic, objective, rate_per_s=rate, replicas=body.replicas
        )
        screen_out = _screen_out(screen, saturation, rate / body.replicas / saturation)
        if traffic.arrival.process != "poisson":
            warnings.append("Tier A assumes Poisson arrivals; the screen ignores burstiness")
        if screen.unscreened:
            warnings.append(
                "Tier A does not model " + ", ".join(screen.unscreened) + ": not screened"
            )
    if body.tier == "analytic":
        assert screen is not None
        return _evaluation_out(
            built, screen, decided_by="analytic", screen_out=screen_out, warnings=warnings
        )
    summary, ev, run_warnings = _evaluate_run(
        built,
        traffic,
        objective,
        replicas=body.replicas,
        routing=body.routing,
        policy=body.policy,
    )
    warnings.extend(run_warnings)
    if screen is not None and screen.feasible != ev.feasible:
        warnings.append(
            f"Tier A and the simulation disagree (Tier A: {screen.reason}); the simulation decides"
        )
    return _evaluation_out(
        built,
        ev,
        decided_by="simulation",
        screen_out=screen_out,
        warnings=warnings,
        summary=summary,
    )


def _search_bounds(body: SloCapacityRequest, workload: Workload) -> None:
    """Refuse a search whose probes together could simulate too much."""
    traffic, search = body.traffic, body.search
    runs = search.max_probes + search.curve_points + CONFIRMATION_RUNS
    per_probe = traffic.num_requests * (1.0 + (1.0 / SHORT_FRACTION if search.screen else 0.0))
    requests = math.ceil(runs * per_probe)
    mean_tokens = float(np.mean(workload.prompt_tokens + workload.output_tokens))
    tokens = requests * mean_tokens
    if requests > MAX_SEARCH_REQUESTS or tokens > MAX_SEARCH_TOKENS:
        detail = (
            f"the search may simulate {requests:,} requests (~{tokens:,.0f} tokens) over "
            f"{runs} probes; a search is limited to {MAX_SEARCH_REQUESTS:,} requests and "
            f"{MAX_SEARCH_TOKENS:,} tokens (fewer probes or fewer requests)"
        )
        raise UnprocessableError(
            detail,
            slug="search-too-large",
            errors=[
                {"location": "body", "pointer": "/search/max_probes", "detail": detail},
                {"location": "body", "pointer": "/traffic/num_requests", "detail": detail},
            ],
        )


def _short(traffic: TrafficIn) -> dict[str, int]:
    n = max(traffic.num_requests // SHORT_FRACTION, 1)
    warm = traffic.warmup_requests // SHORT_FRACTION
    return {"num_requests": n, "warmup_requests": min(warm, n - 1)}


def _tier_a_max_rate(
    built: EngineModel, traffic: TrafficIn, objective: ServiceLevelObjective, saturation: float
) -> float | None:
    """Tier A's largest rate meeting its screened targets (bisection; None when even a light
    load misses)."""
    low, high = 0.0, saturation
    for _ in range(TIER_A_BISECTIONS):
        mid = 0.5 * (low + high)
        ev, _ = _analytic(built, traffic, objective, rate_per_s=mid, replicas=1)
        low, high = (mid, high) if ev.feasible else (low, mid)
        if high - low <= 1e-3 * high:
            break
    return low if low > 0 else None


def _confirm(probe: Any, load: float, integer: bool, tolerance: float) -> tuple[float, int, bool]:
    """``(answer, seeds that meet the SLO there, lowered?)``.

    The bisection follows one sample path (common random numbers); runs with other seeds at its
    answer show how much of it is that path's luck. While some miss, the answer steps down by
    twice the tolerance (one concurrency in a closed loop), at most ``CONFIRMATION_STEPS - 1``
    times, and the search's own seed is checked again there.
    """
    answer, lowered = load, False
    confirmed = 0
    for step in range(CONFIRMATION_STEPS):
        if step:
            lower = answer - 1 if integer else answer * (1 - 2 * tolerance)
            if lower < (1 if integer else 0) or not probe(lower, False).feasible:
                break
            answer, lowered = lower, True
        confirmed = sum(probe(answer, False, k).feasible for k in range(1, CONFIRMATION_SEEDS + 1))
        if confirmed == CONFIRMATION_SEEDS:
            break
    return answer, confirmed, lowered


@router.post("/capacity", response_model=SloCapacityResponse)
def slo_capacity(
    body: Annotated[SloCapacityRequest, Body(openapi_examples=CAPACITY_EXAMPLES)],
    session: SessionDep,
    index: CatalogIndexDep,
) -> SloCapacityResponse:
    """The largest arrival rate (open loop) or concurrency (closed loop) one replica sustains
    within the SLO: Tier A brackets, the simulator decides by bisection with common random
    numbers; with the latency-vs-load curve and its knee."""
    built, objective, workload, zero_ttft_p95 = _prepared(body, session, index)
    traffic = body.traffic
    _search_bounds(body, workload)
    warnings: list[str] = []
    closed = traffic.mode == "closed_loop"
    # A minimum throughput holds only *above* a load, the other targets only below one: search
    # the highest load that meets the rest, then check the minimum against it.
    min_throughput = objective.min_throughput_requests_per_s
    if min_throughput is not None:
        if not objective.targets and objective.attainment is None:
            detail = (
                "a capacity search needs a latency or attainment target: a minimum throughput "
                "alone holds for every load from it up to saturation"
            )
            raise UnprocessableError(
                detail,
                slug="slo-invalid",
                errors=[{"location": "body", "pointer": "/slo", "detail": detail}],
            )
        objective = dataclasses.replace(objective, min_throughput_requests_per_s=None)
    saturation: float | None = None
    tier_a_max: float | None = None
    if closed:
        p, n = _mean_lengths(built, traffic)
        cap = float(
            resident_capacity(
                built.step_model,
                input_tokens=p,
                output_tokens=n,
                kv_capacity_tokens=built.memory.kv_capacity_tokens,
            )[0]
        )
        initial_high = max(1.0, cap)
        warnings.append(
            "closed loop: the offered load falls as the service slows, which can hide overload; "
            "the open-loop capacity is the safer figure for user-facing traffic"
        )
    else:
        saturation = _open_loop(built, traffic, 1e-6).saturation_rate_per_s
        if min_throughput is not None and min_throughput >= saturation:
            detail = (
                f"min_throughput_requests_per_s {min_throughput:g} is at or above the replica's "
                f"saturation rate {saturation:.4g}/s (Tier A): no load can deliver it; size "
                "several replicas with /v1/sizing instead"
            )
            raise SloInfeasibleError(
                detail,
                errors=[
                    {
                        "location": "body",
                        "pointer": "/slo/min_throughput_requests_per_s",
                        "detail": detail,
                        "limit": min_throughput,
                        "saturation": saturation,
                    }
                ],
            )
        initial_high = SATURATION_BRACKET * saturation
        tier_a_max = _tier_a_max_rate(built, traffic, objective, saturation)

    simulated = 0

    def probe(load: float, short: bool, seed_offset: int = 0) -> CurvePoint:
        nonlocal simulated
        update: dict[str, Any] = _short(traffic) if short else {}
        if seed_offset:
            update["seed"] = (traffic.seed + seed_offset) % 2**63
        simulated += update.get("num_requests", traffic.num_requests)
        if closed:
            update["concurrency"] = int(load)
        else:
            update["arrival"] = traffic.arrival.model_copy(update={"rate_per_s": load})
        summary, ev, _ = _evaluate_run(
            built, traffic.model_copy(update=update), objective, policy=body.policy
        )
        return curve_point(load, summary, ev, short=short)

    m = body.search.curve_points
    # Spread from light load (where p95 TTFT is near zero-load) to 80 % of the answer.
    fractions = tuple(0.1 + 0.7 * k / (m - 1) for k in range(m)) if m > 1 else (0.5,) * m
    result = search_capacity(
        probe,
        initial_high=initial_high,
        tolerance=body.search.tolerance,
        max_probes=body.search.max_probes,
        integer=closed,
        first_guess=tier_a_max,
        max_load=float(MAX_CONCURRENCY) if closed else MAX_RATE_PER_S,
        screen=body.search.screen,
        curve_fractions=fractions,
        zero_load_ttft_p95_s=zero_ttft_p95,
    )
    warnings.extend(result.warnings)
    first_miss = [pt for pt in result.curve if not pt.feasible and pt.load > result.max_load]
    if first_miss and not first_miss[0].stable:
        warnings.append(
            f"the search stopped at a run judged unstable ({first_miss[0].evaluation.reason}); "
            "with few requests a steady queue can look unstable, so more requests per probe "
            "may raise the answer"
        )
    binding = result.binding
    if first_miss and not first_miss[0].stable:
        binding = "stability"
    found = result.max_load > 0
    answer, confirmed = result.max_load, 0
    if found:
        answer, confirmed, lowered = _confirm(probe, result.max_load, closed, body.search.tolerance)
        if lowered:
            warnings.append(
                f"the bisection's answer {result.max_load:.4g} was lowered to {answer:.4g} so "
                f"that runs with {CONFIRMATION_SEEDS} other seeds meet the SLO too"
            )
        if confirmed < CONFIRMATION_SEEDS:
            warnings.append(
                f"at the answer, {CONFIRMATION_SEEDS - confirmed} of {CONFIRMATION_SEEDS} runs "
                "with other seeds miss the SLO: the figure carries sampling noise beyond the "
                "search tolerance; simulate more requests per probe for a firmer answer"
            )
    if min_throughput is not None and not closed and found and answer < min_throughput:
        warnings.append(
            f"the other targets hold only up to {answer:.4g} requests/s, below the minimum "
            f"throughput {min_throughput:g}/s: no single-replica load meets the whole SLO"
        )
        found, binding = False, "min_throughput_requests_per_s"
    curve = [
        CurvePointOut(
            rate_per_s=None if closed else pt.load,
            concurrency=int(pt.load) if closed else None,
            ttft_p50_s=_finite(pt.ttft_p50_s) if pt.stable else None,
            ttft_p95_s=_finite(pt.ttft_p95_s) if pt.stable else None,
            tpot_p50_s=_finite(pt.tpot_p50_s) if pt.stable else None,
            tpot_p95_s=_finite(pt.tpot_p95_s) if pt.stable else None,
            goodput_requests_per_s=_finite(pt.goodput_requests_per_s),
            throughput_requests_per_s=_finite(pt.throughput_requests_per_s),
            feasible=pt.feasible,
            stable=pt.stable,
            binding_constraint=pt.evaluation.binding,
        )
        for pt in result.curve
    ]
    return SloCapacityResponse(
        model=built.model.id,
        hardware=built.hardware.id,
        engine=built.memory.deployment.engine,
        mode=traffic.mode,
        max_rate_per_s=None if closed or not found else answer,
        max_concurrency=int(answer) if closed and found else None,
        binding_constraint=binding,
        converged=result.converged,
        bracket_low=result.low,
        bracket_high=_finite(result.high),
        curve=curve,
        knee_rate_per_s=None if closed else result.knee_load,
        knee_concurrency=result.knee_load if closed else None,
        tier_a_saturation_rate_per_s=saturation,
        tier_a_max_rate_per_s=tier_a_max,
        zero_load_ttft_p95_s=zero_ttft_p95,
        probes=result.probes,
        short_probes=result.short_probes,
        confirmation_seeds=CONFIRMATION_SEEDS if found else 0,
        confirmed_by_seeds=confirmed,
        simulated_requests=simulated,
        warnings=warnings,
    )
