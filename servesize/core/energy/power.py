"""GPU power as a function of what a step keeps busy (docs/modeling.md, "Energy and power").

A GPU draws static power whenever it is on and dynamic power in proportion to circuit
activity (the split the ML.ENERGY Leaderboard v3.0 analysis reasons with, "Static Power
Wastage", https://ml.energy/blog, 2026-01-13)::

    P(a) = P_idle + (P_busy − P_idle) · a,        0 <= a <= 1

``P_busy`` is the board power under a compute-bound load: the datasheet TDP (a dense GEMM or a
long prefill runs at the power limit), or the mean of NVML samples the agent took under its
GEMM probe. ``a`` is the activity of a step, from the step-time model's split of the step
(:class:`~servesize.core.steptime.StepTime`)::

    a = (t_compute + α_mem · t_memory + α_comm · t_communication) / t_total

Compute-bound kernels count fully; memory-bound kernels (weights and KV streaming, the bulk of
decode) draw a fraction ``α_mem`` of the dynamic range; the engine's fixed overheads (CPU
scheduling, launches) leave the GPU at static power.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import StepTime

__all__ = [
    "COMMUNICATION_ACTIVITY",
    "IDLE_POWER_FRACTION",
    "MEMORY_ACTIVITY",
    "PowerProfile",
    "power_profile",
    "step_activity",
]

FloatArray = NDArray[np.float64]

IDLE_POWER_FRACTION = 0.115
"""Static (idle) power over TDP when no idle figure is measured: an H200 SXM idles at 80.3 W
of its 700 W (Serial Alice GPU energy benchmark, NVML, retrieved 2026-12-03:
http://api.serialalice.pt/alice-benchmark); H100 SXM boards idle at 60–90 W of 700 W."""

MEMORY_ACTIVITY = 0.35
"""Share of the dynamic range an HBM-bound kernel draws: memory-bound decode on a 700 W H200
draws 137–300 W (Ma et al., "The Illusion of Power Capping in LLM Decode", arXiv 2605.11999,
2026-05-12); with 80 W idle the saturated end is (300 − 80) / (700 − 80) = 0.35."""

COMMUNICATION_ACTIVITY = MEMORY_ACTIVITY
"""NCCL collectives stream buffers through HBM and the links, as memory-bound kernels do."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerProfile:
    """Power of one GPU: ``busy_w`` under a compute-bound load, ``idle_w`` with nothing to do."""

    busy_w: float
    idle_w: float
    source: str
    """``datasheet-tdp`` or ``measurement:<id>``; idle ``…+idle-default`` when defaulted."""

    def __post_init__(self) -> None:
        if not 0 <= self.idle_w <= self.busy_w:
            raise ValueError(f"need 0 <= idle_w <= busy_w, got {self.idle_w} and {self.busy_w}")

    def power_w(self, activity: float) -> float:
        """``P_idle + (P_busy − P_idle) · a`` for ``a`` clipped to [0, 1]."""
        a = min(max(activity, 0.0), 1.0)
        return self.idle_w + (self.busy_w - self.idle_w) * a


def power_profile(
    hardware: HardwareSpec,
    *,
    measured_busy_w: float | None = None,
    measured_idle_w: float | None = None,
    measurement: str | None = None,
) -> PowerProfile | None:
    """The GPU's power: measured figures where given, else the datasheet TDP with idle at
    :data:`IDLE_POWER_FRACTION` of it; ``None`` when neither a TDP nor a measured busy power
    is known."""
    busy = measured_busy_w if measured_busy_w is not None else hardware.tdp_w
    if busy is None or busy <= 0:
        return None
    source = measurement if measured_busy_w is not None and measurement else "datasheet-tdp"
    if measured_idle_w is not None and measured_idle_w <= busy:
        idle = measured_idle_w
        if measured_busy_w is None and measurement:
            source = f"datasheet-tdp+idle-{measurement}"
    else:
        idle = IDLE_POWER_FRACTION * busy
        if source != "datasheet-tdp":
            source = f"{source}+idle-default"
    return PowerProfile(busy_w=float(busy), idle_w=float(idle), source=source)


def step_activity(step: StepTime) -> FloatArray:
    """Activity ``a`` of each step (module docstring); 0 for an empty step."""
    busy = (
        step.compute_s
        + MEMORY_ACTIVITY * step.memory_s
        + COMMUNICATION_ACTIVITY * step.communication_s
    )
    total = step.total_s
    safe = np.where(total > 0, total, 1.0)
    return np.asarray(np.where(total > 0, np.clip(busy / safe, 0.0, 1.0), 0.0), dtype=np.float64)
