"""``/v1/simulate``'s response: a simulated run rendered as JSON-safe figures."""

from __future__ import annotations

import math

import numpy as np

from servesize.api.resolved import ResolvedReplica
from servesize.api.simulation_runner import SimulationRun
from servesize.core.energy import run_energy
from servesize.core.simulation import SLO, LatencyStats, SimulationResult
from servesize.schemas.energy import EnergyOut
from servesize.schemas.histograms import HISTOGRAM_BINS, HistogramOut, LatencyHistogramsOut
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

__all__ = ["STAT_NAMES", "UNSTABLE_WARNING", "latency_out", "simulate_response"]

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
        preemptions=[int(v) for v in series.preemptions],
    )


def _histogram(values: np.ndarray, weights: np.ndarray | None = None) -> HistogramOut | None:
    keep = np.isfinite(values)
    if not keep.any():
        return None
    kept = values[keep]
    held = None if weights is None else weights[keep]
    lo, hi = float(kept.min()), float(kept.max())
    if hi - lo <= 1e-9 * max(abs(hi), 1e-30):  # (nearly) equal values: one bin holds them all
        total = int(kept.size if held is None else held.sum())
        return HistogramOut(edges_s=[lo, hi], counts=[total])
    counts, edges = np.histogram(kept, bins=HISTOGRAM_BINS, range=(lo, hi), weights=held)
    return HistogramOut(edges_s=[float(e) for e in edges], counts=[int(c) for c in counts])


def _histograms(result: SimulationResult) -> LatencyHistogramsOut:
    """TTFT of the measured requests that completed, and the pooled ITL gaps by weight."""
    ttft = result.ttft_s[result.in_window & result.ok]
    gaps, weights = result.itl_samples()
    return LatencyHistogramsOut(ttft_s=_histogram(ttft), itl_s=_histogram(gaps, weights))


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


def _scheduler_out(run: SimulationRun) -> SchedulerConfigOut:
    scheduler = run.scheduler
    return SchedulerConfigOut(
        policy=scheduler.policy,
        max_num_seqs=scheduler.max_num_seqs,
        max_num_batched_tokens=scheduler.max_num_batched_tokens,
        kv_block_size=scheduler.block_size_tokens,
        kv_blocks=scheduler.num_kv_blocks,
        engine_replicas=run.replicas,
        capacity_policy=scheduler.capacity_policy,
        prefix_caching=scheduler.prefix_caching,
    )


def _defaults_out(built: ResolvedReplica, run: SimulationRun) -> list[AppliedDefaultOut]:
    applied = [
        AppliedDefaultOut.model_validate(d, from_attributes=True)
        for d in built.memory.deployment.defaults
    ]
    if run.overheads_from_profile:
        applied.append(
            AppliedDefaultOut(
                field="overheads",
                value=f"preprocess_s={run.overhead_s:.6g}",
                reason="the engine profile's fitted request_overhead_s (HTTP, tokenisation "
                "and first-token streaming together), taken as preprocessing",
            )
        )
    return applied


def simulate_response(
    body: SimulateRequest, built: ResolvedReplica, run: SimulationRun
) -> SimulateResponse:
    """The response of one run: statistics withheld when the run is unstable, +∞ as null."""
    memory = built.memory
    result = run.result
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
        model=built.model.id,
        hardware=built.hardware.id,
        engine=memory.deployment.engine,
        mode=body.traffic.mode,
        engine_config=_scheduler_out(run),
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
        request_overhead_s=run.overhead_s,
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
        prefix_cache_hit_rate=result.prefix_hit_rate,
        host_kv_hit_rate=result.host_kv_hit_rate,
        memory_bytes_per_gpu=memory.total_bytes_per_gpu,
        littles_law=LittlesLawOut(
            mean_in_system=_finite(lam),
            throughput_times_residence=_finite(little),
            relative_error=little_error,
        ),
        window_start_s=summary.window_start_s,
        window_end_s=summary.window_end_s,
        time_series=_time_series(result),
        histograms=_histograms(result) if stable else None,
        defaults_applied=_defaults_out(built, run),
        warnings=warnings,
        energy=EnergyOut.of(
            None if built.power is None else run_energy(built.replica, built.power, result)
        ),
    )
