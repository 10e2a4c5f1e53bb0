"""The continuous-batching serving simulator over HTTP.

The route is a plain ``def``: FastAPI runs it in its threadpool, so a long simulation does not
block the event loop or other requests; the work one request may ask for is bounded by
``MAX_REQUESTS`` and ``MAX_EXPECTED_TOKENS`` (a 422 says which bound was hit).
"""

from __future__ import annotations

import math

import numpy as np
from fastapi import APIRouter

from service.api.deps import ReadAccess, SessionDep
from service.api.engine_model import engine_model
from service.api.errors import UnprocessableError
from service.api.routes.models import CatalogIndexDep
from service.core.simulation import (
    SLO,
    ClientOverheads,
    EngineConfig,
    LatencyStats,
    SimulationResult,
    simulate,
)
from service.core.simulation.adapters import steptime_adapter
from service.core.traffic import (
    FixedLength,
    LengthDistribution,
    LogNormalLength,
    NormalLength,
    UniformLength,
    Workload,
    closed_loop_workload,
    open_loop_workload,
)
from service.schemas.memory import AppliedDefaultOut
from service.schemas.simulate import (
    MAX_EXPECTED_TOKENS,
    TIME_SERIES_POINTS,
    EngineConfigOut,
    FixedLengthIn,
    LatencyOut,
    LengthIn,
    LittlesLawOut,
    NormalLengthIn,
    SimulateRequest,
    SimulateResponse,
    StatName,
    TimeSeriesOut,
    TrafficIn,
    UniformLengthIn,
)

router = APIRouter(prefix="/v1", tags=["simulation"], dependencies=[ReadAccess])
STAT_NAMES: tuple[StatName, ...] = ("mean", "p50", "p90", "p95", "p99")
UNSTABLE_WARNING = (
    "the run is unstable (the queue grows): latency percentiles depend on the run length and "
    "are withheld; lower the rate or add capacity"
)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def latency_out(stats: LatencyStats) -> LatencyOut:
    """JSON-safe statistics: +∞ (failures) becomes ``null`` and is named in ``infinite``."""
    values = {name: float(getattr(stats, name)) for name in STAT_NAMES}
    return LatencyOut(
        count=stats.count,
        mean=_finite(values["mean"]),
        p50=_finite(values["p50"]),
        p90=_finite(values["p90"]),
        p95=_finite(values["p95"]),
        p99=_finite(values["p99"]),
        infinite=[name for name in STAT_NAMES if values[name] == math.inf],
    )


def _distribution(spec: LengthIn, clip_tokens: int) -> LengthDistribution:
    """The core distribution; unset upper clips become ``clip_tokens``."""
    if isinstance(spec, int):
        return FixedLength(spec)
    if isinstance(spec, FixedLengthIn):
        return FixedLength(spec.tokens)
    if isinstance(spec, UniformLengthIn):
        return UniformLength(spec.low_tokens, spec.high_tokens)
    upper = spec.max_tokens if spec.max_tokens is not None else max(clip_tokens, spec.min_tokens)
    if isinstance(spec, NormalLengthIn):
        return NormalLength(
            mean_unclipped_tokens=spec.mean_tokens,
            std_tokens=spec.std_tokens,
            min_tokens=spec.min_tokens,
            max_tokens=upper,
        )
    return LogNormalLength(
        mean_unclipped_tokens=spec.mean_tokens,
        cv=spec.cv,
        min_tokens=spec.min_tokens,
        max_tokens=upper,
    )


def _min_tokens(spec: LengthIn) -> int:
    if isinstance(spec, int):
        return spec
    if isinstance(spec, FixedLengthIn):
        return spec.tokens
    if isinstance(spec, UniformLengthIn):
        return spec.low_tokens
    return spec.min_tokens


def _workload(
    traffic: TrafficIn, max_model_len: int, workload_seed: np.random.SeedSequence
) -> Workload:
    """Draw the requests, refusing runs that are too large or requests that cannot fit."""
    prompt = _distribution(traffic.input_tokens, max_model_len - _min_tokens(traffic.output_tokens))
    output = _distribution(traffic.output_tokens, max_model_len - _min_tokens(traffic.input_tokens))
    expected = traffic.num_requests * (prompt.mean_tokens + output.mean_tokens)
    if expected > MAX_EXPECTED_TOKENS:
        raise UnprocessableError(
            f"the run would process about {expected:,.0f} tokens; one simulation is limited to "
            f"{MAX_EXPECTED_TOKENS:,} (fewer requests or shorter lengths)",
            slug="simulation-too-large",
            errors=[
                {"location": "body", "pointer": "/traffic/num_requests", "detail": "too many"},
            ],
        )
    rng = np.random.default_rng(workload_seed)
    timeout_s = traffic.timeout_s if traffic.timeout_s is not None else math.inf
    workload: Workload
    if traffic.mode == "open_loop":
        workload = open_loop_workload(
            num_requests=traffic.num_requests,
            rate_per_s=traffic.arrival.rate_per_s,
            input_tokens=prompt,
            output_tokens=output,
            rng=rng,
            process=traffic.arrival.process,
            cv=traffic.arrival.cv,
            timeout_s=timeout_s,
            warmup_requests=traffic.warmup_requests,
        )
    else:
        workload = closed_loop_workload(
            clients=traffic.concurrency,
            num_requests=traffic.num_requests,
            input_tokens=prompt,
            output_tokens=output,
            rng=rng,
            think_time_s=traffic.think_time_s,
            timeout_s=timeout_s,
            warmup_requests=traffic.warmup_requests,
        )
    too_long = int(np.sum(workload.prompt_tokens + workload.output_tokens > max_model_len))
    if too_long:
        detail = (
            f"{too_long} drawn requests exceed max_model_len ({max_model_len} tokens of prompt "
            "plus output); shorten the lengths or set max_tokens"
        )
        raise UnprocessableError(
            detail,
            slug="request-too-long",
            errors=[
                {"location": "body", "pointer": "/traffic/input_tokens", "detail": detail},
                {"location": "body", "pointer": "/traffic/output_tokens", "detail": detail},
            ],
        )
    return workload


def _time_series(result: SimulationResult) -> TimeSeriesOut:
    series = result.time_series(TIME_SERIES_POINTS)
    total_blocks = float(np.sum(result.kv_blocks_total))
    return TimeSeriesOut(
        time_s=[float(t) for t in series.time_s],
        queue_length=[int(v) for v in series.num_waiting],
        running_batch=[int(v) for v in series.num_running],
        kv_blocks_used=[int(v) for v in series.kv_blocks_used],
        kv_utilization=[float(v) / total_blocks for v in series.kv_blocks_used],
    )


@router.post("/simulate", response_model=SimulateResponse)
def simulate_serving(
    body: SimulateRequest, session: SessionDep, index: CatalogIndexDep
) -> SimulateResponse:
    """Simulate a continuous-batching engine iteration by iteration under the given traffic:
    TTFT, ITL, TPOT and E2E distributions, throughput, goodput, failures, stability."""
    built = engine_model(
        model_ref=body.model,
        hardware_ref=body.hardware,
        deployment_in=body.deployment,
        catalog=index.catalog,
        session=session,
        use_measurements=body.use_measurements,
        calibrated=body.calibrated,
    )
    model, hardware, memory, step_model = (
        built.model,
        built.hardware,
        built.memory,
        built.step_model,
    )
    res = memory.deployment
    warnings = list(memory.warnings)
    # The step-time model splits a step's work evenly over the data-parallel ranks, so one
    # simulated engine stands for the DP group, with every rank's limits and KV blocks pooled.
    dp = res.data_parallel_size
    max_num_seqs = res.max_num_seqs
    if max_num_seqs is None:
        max_num_seqs = memory.kv_blocks
        warnings.append(
            f"{res.engine} sizes its running batch from the KV pool; the simulation bounds it by "
            "KV blocks only"
        )
    engine = EngineConfig(
        max_num_batched_tokens=res.max_num_batched_tokens * dp,
        max_num_seqs=max_num_seqs * dp,
        block_size_tokens=memory.kv_block_size,
        num_kv_blocks=memory.kv_blocks * dp,
        policy=body.policy,
    )
    # Independent streams for the requests and the router, both fixed by the seed.
    workload_seed, routing_seed = np.random.SeedSequence(body.traffic.seed).spawn(2)
    workload = _workload(body.traffic, memory.max_model_len, workload_seed)
    replicas = body.replicas
    routing_rng = np.random.default_rng(routing_seed)
    overhead_s = step_model.engine.request_overhead_s
    result = simulate(
        workload,
        engine,
        steptime_adapter(step_model),
        replicas=replicas,
        routing=body.routing,
        routing_rng=routing_rng,
        overheads=ClientOverheads(preprocess_s=overhead_s),
    )
    slo = body.slo
    summary = result.summary(
        SLO(ttft_s=slo.ttft_s, tpot_s=slo.tpot_s, e2e_s=slo.e2e_s) if slo is not None else None
    )
    warnings.extend(summary.warnings)
    stable, stability_reason = summary.stable, summary.stability_reason
    if body.traffic.mode == "closed_loop":
        # At most ``concurrency`` requests are ever in the system, so no queue can grow; the
        # open-loop test (throughput vs send rate) only sees the last requests still running.
        stable = True
        stability_reason = (
            f"closed loop: at most {body.traffic.concurrency} requests are in the system, so the "
            "queue cannot grow (overload shows as latency)"
        )
    if not stable:
        warnings.append(UNSTABLE_WARNING)
    lam, little = summary.mean_in_system, summary.littles_law_in_system
    little_error = (
        abs(lam - little) / max(lam, little)
        if math.isfinite(lam) and math.isfinite(little) and max(lam, little) > 0
        else None
    )
    return SimulateResponse(
        model=model.id,
        hardware=hardware.id,
        engine=res.engine,
        mode=body.traffic.mode,
        engine_config=EngineConfigOut(
            policy=engine.policy,
            max_num_seqs=engine.max_num_seqs,
            max_num_batched_tokens=engine.max_num_batched_tokens,
            kv_block_size=engine.block_size_tokens,
            kv_blocks=engine.num_kv_blocks,
            engine_replicas=replicas,
        ),
        stable=stable,
        stability_reason=stability_reason,
        ttft_s=latency_out(summary.ttft_s) if stable else None,
        itl_s=latency_out(summary.itl_s) if stable else None,
        tpot_s=latency_out(summary.tpot_s) if stable else None,
        e2e_s=latency_out(summary.e2e_s) if stable else None,
        queueing_delay_s=latency_out(summary.queueing_delay_completed_s) if stable else None,
        request_overhead_s=overhead_s,
        offered_rate_per_s=_finite(summary.offered_rate_per_s),
        throughput_requests_per_s=_finite(summary.throughput_requests_per_s),
        throughput_output_tokens_per_s=_finite(summary.throughput_output_tokens_per_s),
        goodput_requests_per_s=(
            _finite(summary.goodput_requests_per_s)
            if summary.goodput_requests_per_s is not None
            else None
        ),
        slo_attainment=summary.slo_attainment,
        measured=summary.measured,
        completed=summary.completed,
        failed=summary.failed,
        timed_out=summary.timed_out,
        rejected=summary.rejected,
        preemptions=summary.preemptions,
        peak_kv_utilization=summary.peak_kv_utilization,
        memory_bytes_per_gpu=memory.total_bytes_per_gpu,
        littles_law=LittlesLawOut(
            mean_in_system=_finite(lam),
            throughput_times_residence=_finite(little),
            relative_error=little_error,
        ),
        window_start_s=summary.window_start_s,
        window_end_s=summary.window_end_s,
        time_series=_time_series(result),
        defaults_applied=[
            AppliedDefaultOut.model_validate(d, from_attributes=True) for d in res.defaults
        ],
        warnings=warnings,
    )
