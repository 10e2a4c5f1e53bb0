"""Find a hardware spec by profile id (through the lookup cache) or read it inline."""

from __future__ import annotations

from servesize.api.lookups import LookupCache
from servesize.core.hardware import HardwareSpec, Interconnect, InterNodeLink
from servesize.schemas.hardware import InterNodeIn
from servesize.schemas.memory import HardwareRef, InlineHardware


def inter_node_spec(link: InterNodeIn | None) -> InterNodeLink | None:
    """The core value of a link between nodes given in a request."""
    if link is None:
        return None
    return InterNodeLink(
        kind=link.kind,
        bandwidth_bytes_per_s=link.bandwidth_bytes_per_s,
        latency_s=link.latency_s,
        domain_gpus=link.domain_gpus,
    )


def inline_spec(ref: InlineHardware) -> HardwareSpec:
    """The spec of hardware described in the request."""
    link = ref.interconnect
    return HardwareSpec(
        id="inline",
        vendor=ref.vendor,
        name=ref.name,
        memory_bytes=ref.memory_bytes,
        memory_bandwidth_bytes_per_s=ref.memory_bandwidth_bytes_per_s,
        peak_tflop_per_s={str(k): v for k, v in ref.peak_tflop_per_s.items()},
        interconnect=(
            Interconnect(
                kind=link.kind,
                bandwidth_bytes_per_s=link.bandwidth_bytes_per_s,
                gpus_per_node=link.gpus_per_node,
            )
            if link
            else None
        ),
        inter_node=inter_node_spec(ref.inter_node),
        host_link_bytes_per_s=ref.host_link_bytes_per_s,
        host_memory_bytes=ref.host_memory_bytes,
    )


def resolve_hardware(ref: HardwareRef, *, lookups: LookupCache) -> HardwareSpec:
    """The spec ``ref`` names; 404 for an unknown profile id."""
    if isinstance(ref, InlineHardware):
        return inline_spec(ref)
    return lookups.require_hardware(ref).spec
