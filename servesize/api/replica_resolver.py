"""Request → resolved model, hardware and measurements → compiled replica (shared by the
planners): the IO around :func:`servesize.core.replica.compile_replica`, which makes every
modelling choice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.orm import Session

from servesize.api.hardware_resolver import resolve_hardware
from servesize.api.measured import measured_profile, scaled_tables
from servesize.api.models_resolver import ResolvedModel, resolve_model
from servesize.catalog import ModelCatalog
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment, MemoryPlan
from servesize.core.replica import Replica, compile_replica
from servesize.core.steptime import MeasuredProfile, StepTimeModel
from servesize.db.repository import HardwareRepository
from servesize.schemas.memory import DeploymentIn, HardwareRef
from servesize.schemas.models import ModelRef

__all__ = [
    "RECENT_UPLOADS",
    "ReplicaRequest",
    "ResolvedReplica",
    "request_measurements",
    "request_replica",
    "resolve_replica",
]

RECENT_UPLOADS = 20
"""Measurements searched for the newest GEMM table of a profile."""


@dataclass(frozen=True, slots=True)
class ResolvedReplica:
    """The model a request named and the replica compiled for it."""

    model: ResolvedModel
    replica: Replica

    @property
    def hardware(self) -> HardwareSpec:
        return self.replica.hardware

    @property
    def memory(self) -> MemoryPlan:
        return self.replica.memory

    @property
    def step_model(self) -> StepTimeModel:
        return self.replica.step_model


class ReplicaRequest(Protocol):
    """The request fields that choose a replica (``/v1/performance``, ``/v1/simulate``,
    ``/v1/slo/*``)."""

    @property
    def model(self) -> ModelRef: ...
    @property
    def hardware(self) -> HardwareRef: ...
    @property
    def deployment(self) -> DeploymentIn: ...
    @property
    def use_measurements(self) -> bool: ...
    @property
    def calibrated(self) -> bool: ...


def request_replica(
    body: ReplicaRequest, *, catalog: ModelCatalog, session: Session
) -> ResolvedReplica:
    """:func:`resolve_replica` of a request's ``model``, ``hardware`` and ``deployment``."""
    return resolve_replica(
        model_ref=body.model,
        hardware_ref=body.hardware,
        deployment_in=body.deployment,
        catalog=catalog,
        session=session,
        use_measurements=body.use_measurements,
        calibrated=body.calibrated,
    )


def request_measurements(
    hardware_ref: HardwareRef, session: Session, hardware: HardwareSpec | None = None
) -> MeasuredProfile | None:
    """The kernel tables of a GPU: the shipped H100 ones, scaled to ``hardware`` when it is
    another GPU (docs/modeling.md §2.11), with a stored profile's newest uploaded GEMM tables
    in place of theirs."""
    if not isinstance(hardware_ref, str):
        return scaled_tables(hardware) if hardware is not None else None
    stored = HardwareRepository(session).measurements(hardware_ref, limit=RECENT_UPLOADS)
    uploads = [(m.id, m.payload) for m in stored]
    return measured_profile(hardware_ref, uploads, hardware)


def resolve_replica(
    *,
    model_ref: ModelRef,
    hardware_ref: HardwareRef,
    deployment_in: DeploymentIn,
    catalog: ModelCatalog,
    session: Session,
    use_measurements: bool = True,
    calibrated: bool = True,
    model_pointer: str = "/model",
) -> ResolvedReplica:
    """Resolve the inputs and compile the replica (a plan that does not fit is the core's
    ``InsufficientMemoryError``, a 422), with the profile's measured tables when asked to."""
    model = resolve_model(model_ref, catalog=catalog, session=session, pointer=model_pointer)
    hardware = resolve_hardware(hardware_ref, session=session)
    measurements = (
        request_measurements(hardware_ref, session, hardware) if use_measurements else None
    )
    replica = compile_replica(
        model.architecture,
        hardware,
        Deployment(**deployment_in.model_dump()),
        measurements,
        calibrated=calibrated,
    )
    return ResolvedReplica(model=model, replica=replica)
