"""The continuous-batching serving simulator over HTTP.

The route is a plain ``def``: FastAPI runs it in its threadpool, so a long simulation does not
block the event loop or other requests; the work one request may ask for is bounded by
``MAX_REQUESTS`` and ``MAX_EXPECTED_TOKENS`` (a 422 says which bound was hit).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Body

from servesize.api.deps import ReadAccess, SessionDep
from servesize.api.engine_model import request_engine_model
from servesize.api.errors import UnprocessableError
from servesize.api.routes.models import CatalogIndexDep
from servesize.api.simulation_runner import SimulationRun, run_simulation
from servesize.core.simulation import SLO, ClientOverheads, LatencyStats, SimulationResult
from servesize.schemas.memory import AppliedDefaultOut
from servesize.schemas.simulate import (
    TIME_SERIES_POINTS,
    DisaggregationOut,
    LatencyOut,
    LittlesLawOut,
    OverheadsOut,
    SchedulerConfigOut,
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


_SMALL: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"}
EXAMPLES: dict[str, dict[str, Any]] = {
    "poisson": {
        "summary": "Open loop, Poisson arrivals at 4 requests/s",
        "value": _SMALL
        | {
            "traffic": {
                "arrival": {"process": "poisson", "rate_per_s": 4},
                "input_tokens": 512,
                "output_tokens": 64,
                "num_requests": 200,
                "warmup_requests": 20,
            },
            "slo": {"ttft_s": 0.5, "tpot_s": 0.05},
        },
    },
    "bursty": {
        "summary": "Bursty gamma arrivals (cv 2), lengths from distributions and a histogram",
        "value": _SMALL
        | {
            "traffic": {
                "arrival": {"process": "gamma", "rate_per_s": 4, "cv": 2},
                "input_tokens": {"kind": "lognormal", "mean_tokens": 512, "cv": 0.5},
                "output_tokens": {
                    "kind": "histogram",
                    "tokens": [16, 64, 256],
                    "weights": [0.3, 0.5, 0.2],
                },
                "num_requests": 200,
                "warmup_requests": 20,
                "cooldown_requests": 20,
            },
            "overheads": {"preprocess_s": 0.005, "network_rtt_s": 0.02},
        },
    },
    "closed_loop": {
        "summary": "Closed loop: 8 clients, 1 s think time",
        "value": _SMALL
        | {
            "traffic": {
                "mode": "closed_loop",
                "concurrency": 8,
                "think_time_s": 1.0,
                "input_tokens": 512,
                "output_tokens": 64,
                "num_requests": 120,
                "warmup_requests": 16,
            }
        },
    },
    "trace": {
        "summary": "Replay an inline trace",
        "value": _SMALL
        | {
            "traffic": {
                "trace": {
                    "arrival_s": [0.0, 0.1, 0.25, 0.4, 0.9],
                    "input_tokens": [512, 2048, 128, 1024, 300],
                    "output_tokens": [64, 256, 32, 128, 16],
                }
            }
        },
    },
    "trace_file": {
        "summary": "Replay a Mooncake JSONL trace file (its text)",
        "value": _SMALL
        | {
            "traffic": {
                "trace": {
                    "format": "jsonl",
                    "file": (
                        '{"timestamp": 0, "input_length": 655, "output_length": 52}\n'
                        '{"timestamp": 350, "input_length": 672, "output_length": 26}\n'
                        '{"timestamp": 900, "input_length": 655, "output_length": 52}\n'
                    ),
                }
            }
        },
    },
    "disaggregated": {
        "summary": "Prefill/decode disaggregation: 1 prefill and 2 decode replicas",
        "value": _SMALL
        | {
            "traffic": {
                "arrival": {"process": "poisson", "rate_per_s": 4},
                "input_tokens": 1024,
                "output_tokens": 64,
                "num_requests": 200,
                "warmup_requests": 20,
            },
            "disaggregation": {
                "prefill_replicas": 1,
                "decode_replicas": 2,
                "kv_transfer": {"latency_s": 0.001},
            },
        },
    },
}


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


def _overheads_out(run: SimulationRun) -> OverheadsOut:
    o = run.overheads
    return OverheadsOut(
        preprocess_s=o.preprocess_s,
        output_processing_s=o.output_processing_s,
        network_rtt_s=o.network_rtt_s,
        total_s=o.total_s,
        source="engine_profile" if run.overheads_from_profile else "request",
    )


def _disaggregation_out(body: SimulateRequest, run: SimulationRun) -> DisaggregationOut | None:
    spec, transfer = body.disaggregation, run.transfer
    if spec is None or transfer is None:
        return None
    r = run.result
    moved = r.in_window & np.isfinite(r.transfer_start_s) & np.isfinite(r.transfer_end_s)
    assert transfer.kv_bytes_per_token is not None
    return DisaggregationOut(
        prefill_replicas=spec.prefill_replicas,
        decode_replicas=spec.decode_replicas,
        kv_bytes_per_token=int(transfer.kv_bytes_per_token),
        bandwidth_bytes_per_s=transfer.bandwidth_bytes_per_s,
        latency_s=transfer.latency_s,
        bandwidth_source="hardware_interconnect"
        if run.transfer_bandwidth_from_hardware
        else "request",
        transfer_s=latency_out(
            LatencyStats.of(np.asarray(r.transfer_end_s[moved] - r.transfer_start_s[moved]))
        ),
    )


@router.post("/simulate", response_model=SimulateResponse)
def simulate_serving(
    body: Annotated[SimulateRequest, Body(openapi_examples=EXAMPLES)],
    session: SessionDep,
    index: CatalogIndexDep,
) -> SimulateResponse:
    """Simulate a continuous-batching engine iteration by iteration under the given traffic
    (Poisson, gamma, constant, closed loop or a replayed trace): TTFT, ITL, TPOT and E2E
    distributions — client-observed and engine-internal — throughput, goodput, failures,
    stability; optionally prefill/decode disaggregation."""
    if body.disaggregation is not None and body.replicas != 1:
        raise UnprocessableError(
            "with disaggregation the pools set the replicas; leave replicas at 1",
            slug="invalid-replicas",
            errors=[{"location": "body", "pointer": "/replicas", "detail": "must be 1"}],
        )
    built = request_engine_model(body, catalog=index.catalog, session=session)
    model, hardware, memory = built.model, built.hardware, built.memory
    res = memory.deployment
    run = run_simulation(
        built,
        body.traffic,
        replicas=body.replicas,
        routing=body.routing,
        policy=body.policy,
        overheads=(
            ClientOverheads(**body.overheads.model_dump()) if body.overheads is not None else None
        ),
        disaggregation=body.disaggregation,
    )
    engine, result, overhead_s, replicas = run.engine, run.result, run.overhead_s, run.replicas
    warnings = list(run.warnings)
    slo = body.slo
    summary = result.summary(
        SLO(ttft_s=slo.ttft_s, tpot_s=slo.tpot_s, e2e_s=slo.e2e_s) if slo is not None else None
    )
    warnings.extend(summary.warnings)
    stable, stability_reason = summary.stable, summary.stability_reason
    conclusive = summary.stability_conclusive
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
        engine_config=SchedulerConfigOut(
            policy=engine.policy,
            max_num_seqs=engine.max_num_seqs,
            max_num_batched_tokens=engine.max_num_batched_tokens,
            kv_block_size=engine.block_size_tokens,
            kv_blocks=engine.num_kv_blocks,
            engine_replicas=replicas,
        ),
        stable=stable,
        stability_reason=stability_reason,
        stability_conclusive=conclusive,
        ttft_s=latency_out(summary.ttft_s) if stable else None,
        itl_s=latency_out(summary.itl_s) if stable else None,
        tpot_s=latency_out(summary.tpot_s) if stable else None,
        e2e_s=latency_out(summary.e2e_s) if stable else None,
        engine_ttft_s=latency_out(result.latency("engine_ttft")) if stable else None,
        engine_e2e_s=latency_out(result.latency("engine_e2e")) if stable else None,
        queueing_delay_s=latency_out(summary.queueing_delay_completed_s) if stable else None,
        request_overhead_s=overhead_s,
        overheads=_overheads_out(run),
        disaggregation=_disaggregation_out(body, run),
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
        ]
        + (
            [
                AppliedDefaultOut(
                    field="overheads",
                    value=f"preprocess_s={overhead_s:.6g}",
                    reason="the engine profile's fitted request_overhead_s (HTTP, tokenisation "
                    "and first-token streaming together), taken as preprocessing",
                )
            ]
            if run.overheads_from_profile
            else []
        ),
        warnings=warnings,
    )
