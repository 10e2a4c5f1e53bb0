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
from service.api.routes.models import CatalogIndexDep
from service.api.simulation_runner import run_simulation
from service.core.simulation import SLO, LatencyStats, SimulationResult
from service.schemas.memory import AppliedDefaultOut
from service.schemas.simulate import (
    TIME_SERIES_POINTS,
    EngineConfigOut,
    LatencyOut,
    LittlesLawOut,
    SimulateRequest,
    SimulateResponse,
    StatName,
    TimeSeriesOut,
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
    model, hardware, memory = built.model, built.hardware, built.memory
    res = memory.deployment
    run = run_simulation(
        built,
        body.traffic,
        replicas=body.replicas,
        routing=body.routing,
        policy=body.policy,
    )
    engine, result, overhead_s, replicas = run.engine, run.result, run.overhead_s, run.replicas
    warnings = list(run.warnings)
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
