"""Find a hardware spec by profile id or read it inline."""

from __future__ import annotations

from sqlalchemy.orm import Session

from servesize.api.errors import NotFoundError
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.db.repository import HardwareRepository
from servesize.schemas.memory import HardwareRef, InlineHardware


def resolve_hardware(ref: HardwareRef, *, session: Session) -> HardwareSpec:
    """The spec ``ref`` names; 404 for an unknown profile id."""
    if isinstance(ref, InlineHardware):
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
        )
    row = HardwareRepository(session).get(ref)
    if row is None:
        raise NotFoundError(f"no hardware profile {ref!r}")
    return row.to_spec()
