"""SLO feasibility and capacity over HTTP (``/v1/slo/evaluate``, ``/v1/slo/capacity``).

Both routes hand their work to the heavy gate (:mod:`servesize.api.compute`): a worker thread,
so simulations do not block the event loop, a deadline, and no database session while they
run. The work is bounded: one evaluation is one simulation within the
``/v1/simulate`` limits; a capacity search (:func:`servesize.core.slo.plan_capacity`) runs at
most ``max_search_runs`` full simulations (plus a short screening run before each), and their
total requests and expected tokens are capped (``MAX_SEARCH_REQUESTS``, ``MAX_SEARCH_TOKENS``)
with a 422 that says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Body, Request

from servesize.api.compute import GatesDep
from servesize.api.deps import LookupsDep, ReadAccess
from servesize.api.errors import UnprocessableError
from servesize.api.render.slo import (
    capacity_out,
    evaluation_out,
    floor_problem,
    screen_out,
    throughput_only_problem,
    zero_load_problem,
)
from servesize.api.render.uncertainty import capacity_bands
from servesize.api.replica_resolver import (
    ReplicaInputs,
    ResolvedReplica,
    request_inputs,
    request_replica,
)
from servesize.api.simulation_runner import build_workload, length_distribution, run_simulation
from servesize.core.replica import steady_prompt_tokens, warm_prompt_tokens
from servesize.core.simulation import SimulationSummary, percentile
from servesize.core.slo import (
    CapacityPlan,
    CurvePoint,
    ServiceLevelObjective,
    SloEvaluation,
    ThroughputFloorUnreachableError,
    ThroughputOnlyObjectiveError,
    TierAEstimate,
    curve_point,
    evaluate_result,
    max_search_runs,
    plan_capacity,
    tier_a_verdict,
    zero_load_latencies,
    zero_load_violations,
)
from servesize.core.steptime import OpenLoopEstimate, open_loop, resident_capacity
from servesize.core.traffic import Workload
from servesize.schemas.prefix import prefix_traffic
from servesize.schemas.simulate import MAX_EXPECTED_TOKENS, MAX_REQUESTS, TrafficIn
from servesize.schemas.slo import (
    AnalyticScreenOut,
    SloCapacityRequest,
    SloCapacityResponse,
    SloEvaluateRequest,
    SloEvaluateResponse,
)

router = APIRouter(prefix="/v1/slo", tags=["slo"], dependencies=[ReadAccess])

MAX_SEARCH_REQUESTS = 4 * MAX_REQUESTS
"""Most requests a capacity search may simulate over all its probes."""
MAX_SEARCH_TOKENS = 4 * MAX_EXPECTED_TOKENS
SHORT_FRACTION = 4
"""A screening run simulates a quarter of the requests."""

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


def _mean_lengths(built: ResolvedReplica, traffic: TrafficIn) -> tuple[int, int]:
    """Mean prompt and output lengths, rounded, for Tier A (which takes fixed lengths)."""
    clip = built.memory.max_model_len
    p = length_distribution(traffic.input_tokens, clip - 1).mean_tokens
    n = length_distribution(traffic.output_tokens, clip - 1).mean_tokens
    return max(1, round(p)), max(1, round(n))


def _tier_a(built: ResolvedReplica, traffic: TrafficIn) -> TierAEstimate:
    """Tier A's mean-field estimate for one replica at a rate, at the mean lengths, under the
    traffic's burstiness (gamma gaps of CV > 1; Poisson otherwise), prefilling what a warm
    prefix cache leaves of the prompt."""
    p, n = _mean_lengths(built, traffic)
    p = steady_prompt_tokens(built.replica, prefix_traffic(traffic.prefix), p, n)
    arrival = traffic.arrival
    cv = arrival.cv if arrival.process == "gamma" else 1.0

    def estimate(rate_per_s: float) -> OpenLoopEstimate:
        return open_loop(
            built.step_model,
            arrival_rate_per_s=rate_per_s,
            input_tokens=p,
            output_tokens=n,
            kv_capacity_tokens=built.replica.kv_capacity_tokens,
            arrival_cv=cv,
        )

    return estimate


def _resident_sequences(built: ResolvedReplica, traffic: TrafficIn) -> float:
    """Most sequences one replica keeps resident at the mean lengths (closed-loop bracket)."""
    p, n = _mean_lengths(built, traffic)
    return float(
        resident_capacity(
            built.step_model,
            input_tokens=p,
            output_tokens=n,
            kv_capacity_tokens=built.replica.kv_capacity_tokens,
        )[0]
    )


def _zero_load_screen(
    built: ResolvedReplica, traffic: TrafficIn, objective: ServiceLevelObjective
) -> tuple[Workload, float]:
    """Draw the requests (bounds and length checks as ``/v1/simulate``), refuse an SLO that an
    idle engine already misses (its prefix cache warm), and return the zero-load p95 TTFT."""
    workload = build_workload(
        traffic, built.memory.max_model_len, np.random.SeedSequence(traffic.seed).spawn(2)[0]
    )
    zero = zero_load_latencies(
        built.step_model,
        prompt_tokens=warm_prompt_tokens(built.replica, workload),
        output_tokens=workload.output_tokens,
    )
    violations = zero_load_violations(objective, zero, timeout_s=traffic.timeout_s)
    if violations:
        raise zero_load_problem(violations)
    return workload, percentile(zero.ttft_s, 95.0)


def _prepared(
    body: SloEvaluateRequest | SloCapacityRequest, inputs: ReplicaInputs
) -> tuple[ResolvedReplica, ServiceLevelObjective, Workload, float]:
    """The engine model and the core objective of a request, after the zero-load screen: also
    the drawn requests and their zero-load p95 TTFT."""
    if body.traffic.sessions is not None:
        raise UnprocessableError(
            "session traffic is planned by /v1/simulate and /v1/performance; the SLO tiers "
            "take independent requests (give the sessions' mean lengths and request rate)",
            slug="tier-unavailable",
            errors=[{"location": "body", "pointer": "/traffic/sessions", "detail": "not here"}],
        )
    built = request_replica(body, inputs)
    objective = body.slo.to_core()
    workload, zero_ttft_p95 = _zero_load_screen(built, body.traffic, objective)
    return built, objective, workload, zero_ttft_p95


def _evaluate_run(
    built: ResolvedReplica,
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


def _check_tier(body: SloEvaluateRequest) -> None:
    if body.tier == "analytic" and body.traffic.mode != "open_loop":
        raise UnprocessableError(
            "the analytic tier models an open loop only; use tier simulation or auto",
            slug="tier-unavailable",
            errors=[{"location": "body", "pointer": "/tier", "detail": "open loop only"}],
        )


def _tier_a_screen(
    body: SloEvaluateRequest, built: ResolvedReplica, objective: ServiceLevelObjective
) -> tuple[SloEvaluation | None, AnalyticScreenOut | None, list[str]]:
    """Tier A's verdict at the offered rate (open loop, tiers ``auto`` and ``analytic``), its
    rendering and what it leaves out."""
    traffic = body.traffic
    if body.tier == "simulation" or traffic.mode != "open_loop":
        return None, None, []
    rate = traffic.arrival.rate_per_s
    screen, saturation = tier_a_verdict(
        _tier_a(built, traffic), objective, rate_per_s=rate, replicas=body.replicas
    )
    warnings: list[str] = []
    if traffic.arrival.process != "poisson":
        warnings.append("Tier A assumes Poisson arrivals; the screen ignores burstiness")
    if screen.unscreened:
        warnings.append("Tier A does not model " + ", ".join(screen.unscreened) + ": not screened")
    return screen, screen_out(screen, saturation, rate / body.replicas / saturation), warnings


@router.post("/evaluate", response_model=SloEvaluateResponse)
async def evaluate_slo(
    body: Annotated[SloEvaluateRequest, Body(openapi_examples=EVALUATE_EXAMPLES)],
    request: Request,
    lookups: LookupsDep,
    gates: GatesDep,
) -> SloEvaluateResponse:
    """Check an SLO for a deployment under a traffic forecast: each target with its predicted
    value and margin, the binding constraint, goodput next to throughput, and which tier
    decided."""
    return await gates.heavy.run(
        request, lambda inputs: _evaluate(body, inputs), lambda: request_inputs(body, lookups)
    )


def _evaluate(body: SloEvaluateRequest, inputs: ReplicaInputs) -> SloEvaluateResponse:
    built, objective, _, _ = _prepared(body, inputs)
    _check_tier(body)
    screen, screened, warnings = _tier_a_screen(body, built, objective)
    if body.tier == "analytic":
        assert screen is not None
        return evaluation_out(
            built, screen, decided_by="analytic", screen=screened, warnings=warnings
        )
    summary, ev, run_warnings = _evaluate_run(
        built,
        body.traffic,
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
    return evaluation_out(
        built, ev, decided_by="simulation", screen=screened, warnings=warnings, summary=summary
    )


def search_runs(body: SloCapacityRequest) -> int:
    """Most simulations a capacity search may run: the full-length ones
    (:func:`~servesize.core.slo.max_search_runs`), each with a screening run when ``screen``."""
    runs = max_search_runs(body.search.max_probes, body.search.curve_points)
    return runs * (2 if body.search.screen else 1)


def _search_bounds(body: SloCapacityRequest, workload: Workload) -> None:
    """Refuse a search whose probes together could simulate too much."""
    traffic, search = body.traffic, body.search
    runs = max_search_runs(search.max_probes, search.curve_points)
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


class _Prober:
    """The capacity search's probe (:data:`servesize.core.slo.SeededProbe`): one replica
    simulated at a load (a quarter of the requests when short, the seed moved by the offset),
    counting the requests simulated."""

    def __init__(
        self,
        built: ResolvedReplica,
        traffic: TrafficIn,
        policy: Any,
        on_probe: Callable[[int], None] | None = None,
    ) -> None:
        self.built, self.traffic, self.policy = built, traffic, policy
        self.simulated_requests = 0
        self.runs = 0
        """Simulations run (full-length and screening)."""
        self.on_probe = on_probe

    def __call__(
        self, load: float, short: bool, seed_offset: int, objective: ServiceLevelObjective
    ) -> CurvePoint:
        traffic = self.traffic
        update: dict[str, Any] = _short(traffic) if short else {}
        if seed_offset:
            update["seed"] = (traffic.seed + seed_offset) % 2**63
        self.simulated_requests += update.get("num_requests", traffic.num_requests)
        if traffic.mode == "closed_loop":
            update["concurrency"] = int(load)
        else:
            update["arrival"] = traffic.arrival.model_copy(update={"rate_per_s": load})
        summary, ev, _ = _evaluate_run(
            self.built, traffic.model_copy(update=update), objective, policy=self.policy
        )
        self.runs += 1
        if self.on_probe is not None:
            self.on_probe(self.runs)
        return curve_point(load, summary, ev, short=short)


def _plan(
    body: SloCapacityRequest,
    built: ResolvedReplica,
    objective: ServiceLevelObjective,
    probe: _Prober,
    zero_load_ttft_p95_s: float,
) -> CapacityPlan:
    """The core capacity plan of a request; its objective errors as problems."""
    traffic, search = body.traffic, body.search
    closed = traffic.mode == "closed_loop"
    try:
        return plan_capacity(
            probe,
            objective,
            tier_a=None if closed else _tier_a(built, traffic),
            resident_sequences=_resident_sequences(built, traffic) if closed else None,
            tolerance=search.tolerance,
            max_probes=search.max_probes,
            screen=search.screen,
            curve_points=search.curve_points,
            zero_load_ttft_p95_s=zero_load_ttft_p95_s,
        )
    except ThroughputOnlyObjectiveError as exc:
        raise throughput_only_problem(exc) from None
    except ThroughputFloorUnreachableError as exc:
        raise floor_problem(exc) from None


@router.post("/capacity", response_model=SloCapacityResponse)
async def slo_capacity(
    body: Annotated[SloCapacityRequest, Body(openapi_examples=CAPACITY_EXAMPLES)],
    request: Request,
    lookups: LookupsDep,
    gates: GatesDep,
) -> SloCapacityResponse:
    """The largest arrival rate (open loop) or concurrency (closed loop) one replica sustains
    within the SLO: Tier A brackets, the simulator decides by bisection with common random
    numbers, other seeds confirm; with the latency-vs-load curve and its knee."""
    return await gates.heavy.run(
        request, lambda inputs: _capacity(body, inputs), lambda: request_inputs(body, lookups)
    )


def _capacity(
    body: SloCapacityRequest,
    inputs: ReplicaInputs,
    on_probe: Callable[[int], None] | None = None,
) -> SloCapacityResponse:
    """The capacity answer; ``on_probe(runs)`` after each simulation (jobs report progress)."""
    built, objective, workload, zero_ttft_p95 = _prepared(body, inputs)
    _search_bounds(body, workload)
    probe = _Prober(built, body.traffic, body.policy, on_probe)
    plan = _plan(body, built, objective, probe, zero_ttft_p95)
    response = capacity_out(
        built,
        plan,
        zero_load_ttft_p95_s=zero_ttft_p95,
        simulated_requests=probe.simulated_requests,
    )
    return capacity_bands(built, response)
