"""Turn hardware rows into responses: summaries, efficiencies with their sources."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servesize.api.measured import measured_power
from servesize.core.hardware import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_GEMM_EFFICIENCY,
    bandwidth_efficiency,
    gemm_efficiency_curves,
    host_link_bandwidth,
    inter_node_link,
)
from servesize.db.models import HardwareMeasurement, HardwareProfile
from servesize.schemas.hardware import (
    Efficiencies,
    EfficiencyPointOut,
    HardwareProfileOut,
    HardwareProfileSummary,
    InterconnectOut,
    InterNodeOut,
    MeasurementOut,
    MeasurementSummary,
    PowerProfileOut,
    PriceOut,
    SourcedValue,
)

DATASHEET_DEFAULT = "datasheet-default"


def _interconnect(row: HardwareProfile) -> InterconnectOut | None:
    if row.interconnect_kind is None:
        return None
    return InterconnectOut(
        kind=row.interconnect_kind,
        bandwidth_bytes_per_s=row.interconnect_bandwidth_bytes_per_s,
        gpus_per_node=row.gpus_per_node,
    )


def _inter_node(row: HardwareProfile) -> InterNodeOut | None:
    link = inter_node_link(row.to_spec())
    if link is None:
        return None
    return InterNodeOut(
        kind=link.kind,
        bandwidth_bytes_per_s=link.bandwidth_bytes_per_s,
        latency_s=link.latency_s,
        domain_gpus=link.domain_gpus,
        default=row.inter_node is None,
    )


def _price(row: HardwareProfile) -> PriceOut | None:
    if row.price_per_gpu_hour is None:
        return None
    return PriceOut(
        per_gpu_hour=row.price_per_gpu_hour,
        currency=row.price_currency or "USD",
        as_of=row.price_as_of,
        source=row.price_source,
    )


def profile_summary(row: HardwareProfile, measurement_count: int) -> HardwareProfileSummary:
    return HardwareProfileSummary(
        id=row.id,
        kind="datasheet" if row.kind == "datasheet" else "custom",
        vendor=row.vendor,
        name=row.name,
        memory_bytes=row.memory_bytes,
        memory_bandwidth_bytes_per_s=row.memory_bandwidth_bytes_per_s,
        peak_tflop_per_s=dict(row.peak_tflop_per_s),
        interconnect=_interconnect(row),
        inter_node=_inter_node(row),
        price=_price(row),
        measurement_count=measurement_count,
        version=row.version,
    )


def measurement_summary(row: HardwareMeasurement) -> MeasurementSummary:
    payload = row.payload
    return MeasurementSummary(
        id=row.id,
        received_at=row.received_at,
        measured_at=row.measured_at,
        agent_version=row.agent_version,
        method_version=row.method_version,
        host=row.host,
        device=row.device,
        gpu_name=row.gpu_name,
        gpu_uuid=row.gpu_uuid,
        gemm_results=len(payload.get("gemm", [])),
        bandwidth_results=len(payload.get("memory_bandwidth", [])),
        collective_results=len(payload.get("collectives", [])),
        endpoint_benchmarks=len(payload.get("endpoint_benchmarks", [])),
    )


def measurement_out(row: HardwareMeasurement) -> MeasurementOut:
    return MeasurementOut(
        **measurement_summary(row).model_dump(), profile_id=row.profile_id, payload=row.payload
    )


def _latest_with(
    measurements: Sequence[HardwareMeasurement], key: str
) -> HardwareMeasurement | None:
    """The newest measurement (``measurements`` are newest first) that carries ``key``."""
    return next((m for m in measurements if m.payload.get(key)), None)


def efficiencies(row: HardwareProfile, measurements: Sequence[HardwareMeasurement]) -> Efficiencies:
    """Measured curves where the profile has them, datasheet defaults elsewhere."""
    gemm_source = _latest_with(measurements, "gemm")
    curves: dict[str, list[EfficiencyPointOut]] = {}
    if gemm_source is not None:
        rows = [
            (g["dtype"], int(g["m"]), float(g["achieved_tflop_per_s"]))
            for g in gemm_source.payload["gemm"]
        ]
        for dtype, points in gemm_efficiency_curves(rows, row.peak_tflop_per_s).items():
            curves[dtype] = [
                EfficiencyPointOut.model_validate(p, from_attributes=True) for p in points
            ]
    bandwidth_source = _latest_with(measurements, "memory_bandwidth")
    if bandwidth_source is not None:
        achieved = [
            float(b["achieved_bytes_per_s"]) for b in bandwidth_source.payload["memory_bandwidth"]
        ]
        bandwidth = SourcedValue(
            value=bandwidth_efficiency(achieved, row.memory_bandwidth_bytes_per_s),
            source=f"measurement:{bandwidth_source.id}",
        )
    else:
        bandwidth = SourcedValue(value=DEFAULT_BANDWIDTH_EFFICIENCY, source=DATASHEET_DEFAULT)
    launch_source = _latest_with(measurements, "kernel_launch_overhead_s")
    launch = (
        SourcedValue(
            value=float(launch_source.payload["kernel_launch_overhead_s"]),
            source=f"measurement:{launch_source.id}",
        )
        if launch_source is not None
        else None
    )
    collective_source = _latest_with(measurements, "collectives")
    collectives: list[dict[str, Any]] = []
    if collective_source is not None:
        collectives = [
            {**c, "source": f"measurement:{collective_source.id}"}
            for c in collective_source.payload["collectives"]
        ]
    return Efficiencies(
        gemm=curves,
        gemm_source=f"measurement:{gemm_source.id}" if gemm_source else DATASHEET_DEFAULT,
        gemm_default=SourcedValue(value=DEFAULT_GEMM_EFFICIENCY, source=DATASHEET_DEFAULT),
        memory_bandwidth=bandwidth,
        kernel_launch_overhead_s=launch,
        collective_bus_bandwidth=collectives,
    )


def profile_out(
    row: HardwareProfile, recent: Sequence[HardwareMeasurement], measurement_count: int
) -> HardwareProfileOut:
    """``recent`` are the newest measurements, newest first; each derived figure comes from
    the newest one that carries it."""
    summary = profile_summary(row, measurement_count)
    return HardwareProfileOut(
        **summary.model_dump(),
        memory_type=row.memory_type,
        tdp_w=row.tdp_w,
        host_link_bytes_per_s=host_link_bandwidth(row.to_spec())[0],
        host_link_default=row.host_link_bytes_per_s is None,
        host_memory_bytes=row.host_memory_bytes,
        identity_tokens=list(row.identity_tokens),
        source=row.source,
        notes=row.notes,
        unverified_fields=list(row.unverified_fields),
        created_at=row.created_at,
        updated_at=row.updated_at,
        latest_measurement=measurement_summary(recent[0]) if recent else None,
        efficiencies=efficiencies(row, recent),
        power=_power_out(row, recent),
    )


def _power_out(
    row: HardwareProfile, recent: Sequence[HardwareMeasurement]
) -> PowerProfileOut | None:
    power = measured_power(row.to_spec(), [(m.id, m.payload) for m in recent])
    if power is None:
        return None
    return PowerProfileOut(busy_w=power.busy_w, idle_w=power.idle_w, source=power.source)
