"""Reject measurements no real device could produce (issue list, never partial acceptance)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servesize.core.errors import FieldIssue
from servesize.core.hardware.internode import nvlink_domain_gpus
from servesize.core.hardware.spec import HardwareSpec

MAX_ACHIEVED_OVER_PEAK = 1.15
"""Largest achieved/peak ratio accepted: boost clocks and datasheet rounding stay under it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmSample:
    dtype: str
    achieved_tflop_per_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthSample:
    achieved_bytes_per_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveSample:
    num_gpus: int
    bus_bandwidth_bytes_per_s: float


def _bad_number(value: float) -> bool:
    return not math.isfinite(value) or value <= 0


def implausible_values(
    spec: HardwareSpec,
    *,
    gemm: Sequence[GemmSample] = (),
    bandwidth: Sequence[BandwidthSample] = (),
    collectives: Sequence[CollectiveSample] = (),
) -> list[FieldIssue]:
    """Every value that exceeds ``MAX_ACHIEVED_OVER_PEAK`` × the datasheet, or names a dtype
    the profile has no peak for, as JSON-pointer issues into the upload."""
    issues: list[FieldIssue] = []
    for i, g in enumerate(gemm):
        pointer = f"/gemm/{i}/achieved_tflop_per_s"
        peak = spec.peak_tflop_per_s.get(g.dtype)
        if _bad_number(g.achieved_tflop_per_s):
            issues.append(FieldIssue(pointer, "must be a positive finite number"))
        elif peak is None:
            issues.append(
                FieldIssue(
                    f"/gemm/{i}/dtype",
                    f"{spec.name} has no {g.dtype} peak (unsupported or not on record)",
                )
            )
        elif g.achieved_tflop_per_s > MAX_ACHIEVED_OVER_PEAK * peak:
            issues.append(
                FieldIssue(
                    pointer,
                    f"{g.achieved_tflop_per_s:.6g} TFLOP/s exceeds {MAX_ACHIEVED_OVER_PEAK} × "
                    f"the {g.dtype} peak of {peak:.6g} TFLOP/s",
                )
            )
    for i, b in enumerate(bandwidth):
        pointer = f"/memory_bandwidth/{i}/achieved_bytes_per_s"
        ceiling = MAX_ACHIEVED_OVER_PEAK * spec.memory_bandwidth_bytes_per_s
        if _bad_number(b.achieved_bytes_per_s):
            issues.append(FieldIssue(pointer, "must be a positive finite number"))
        elif b.achieved_bytes_per_s > ceiling:
            issues.append(
                FieldIssue(
                    pointer,
                    f"{b.achieved_bytes_per_s:.6g} B/s exceeds {MAX_ACHIEVED_OVER_PEAK} × the "
                    f"datasheet bandwidth of {spec.memory_bandwidth_bytes_per_s:.6g} B/s",
                )
            )
    link = spec.interconnect
    for i, c in enumerate(collectives):
        pointer = f"/collectives/{i}/bus_bandwidth_bytes_per_s"
        if _bad_number(c.bus_bandwidth_bytes_per_s):
            issues.append(FieldIssue(pointer, "must be a positive finite number"))
        elif (
            link is not None
            and link.bandwidth_bytes_per_s is not None
            and c.bus_bandwidth_bytes_per_s > MAX_ACHIEVED_OVER_PEAK * link.bandwidth_bytes_per_s
        ):
            issues.append(
                FieldIssue(
                    pointer,
                    f"{c.bus_bandwidth_bytes_per_s:.6g} B/s exceeds "
                    f"{MAX_ACHIEVED_OVER_PEAK} × the per-direction {link.kind} bandwidth "
                    f"of {link.bandwidth_bytes_per_s:.6g} B/s",
                )
            )
        domain = nvlink_domain_gpus(spec)
        if link is not None and domain is not None and c.num_gpus > domain:
            issues.append(
                FieldIssue(
                    f"/collectives/{i}/num_gpus",
                    f"{c.num_gpus} GPUs exceed the {domain} of one NVLink domain",
                )
            )
    return issues
