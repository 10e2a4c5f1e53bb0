"""A compiled replica with the model a request named: what the planners' renderers read
(importable without the server stack, like :mod:`servesize.api.exceptions`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from servesize.api.models_resolver import ResolvedModel
from servesize.core.energy import PowerProfile
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import MemoryPlan
from servesize.core.replica import Replica
from servesize.core.steptime import StepTimeModel

if TYPE_CHECKING:
    from servesize.api.lookups import ActiveCalibration

__all__ = ["ResolvedReplica"]


@dataclass(frozen=True, slots=True)
class ResolvedReplica:
    """The model a request named and the replica compiled for it."""

    model: ResolvedModel
    replica: Replica
    calibration: ActiveCalibration | None = None
    """The recalibration whose constants the replica steps with, if any."""
    power: PowerProfile | None = None
    """The GPU's board power the energy figures use (None: no TDP and no measurement)."""

    @property
    def hardware(self) -> HardwareSpec:
        return self.replica.hardware

    @property
    def memory(self) -> MemoryPlan:
        return self.replica.memory

    @property
    def step_model(self) -> StepTimeModel:
        return self.replica.step_model
