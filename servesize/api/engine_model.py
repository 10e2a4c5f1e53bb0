"""Model + hardware + deployment → memory plan and step-time model (shared by the planners)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.orm import Session

from servesize.api.hardware_resolver import resolve_hardware
from servesize.api.measured import measured_profile
from servesize.api.models_resolver import ResolvedModel, resolve_model
from servesize.catalog import ModelCatalog
from servesize.core.errors import InsufficientMemoryError
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment, MemoryPlan, plan_memory
from servesize.core.steptime import StepTimeModel, build_step_model
from servesize.db.repository import HardwareRepository
from servesize.schemas.memory import DeploymentIn, HardwareRef
from servesize.schemas.models import ModelRef

RECENT_UPLOADS = 20
"""Measurements searched for the newest GEMM table of a profile."""


@dataclass(frozen=True, slots=True)
class EngineModel:
    model: ResolvedModel
    hardware: HardwareSpec
    memory: MemoryPlan
    step_model: StepTimeModel


class EngineRequest(Protocol):
    """The request fields that choose an engine model (``/v1/simulate``, ``/v1/slo/*``)."""

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


def request_engine_model(
    body: EngineRequest, *, catalog: ModelCatalog, session: Session
) -> EngineModel:
    """:func:`engine_model` of a request's ``model``, ``hardware`` and ``deployment``."""
    return engine_model(
        model_ref=body.model,
        hardware_ref=body.hardware,
        deployment_in=body.deployment,
        catalog=catalog,
        session=session,
        use_measurements=body.use_measurements,
        calibrated=body.calibrated,
    )


def engine_model(
    *,
    model_ref: ModelRef,
    hardware_ref: HardwareRef,
    deployment_in: DeploymentIn,
    catalog: ModelCatalog,
    session: Session,
    use_measurements: bool = True,
    calibrated: bool = True,
    model_pointer: str = "/model",
) -> EngineModel:
    """Resolve the inputs, plan memory (422 when it does not fit) and compile the step model
    with the profile's measured tables when asked to."""
    model = resolve_model(model_ref, catalog=catalog, session=session, pointer=model_pointer)
    hardware = resolve_hardware(hardware_ref, session=session)
    deployment = Deployment(**deployment_in.model_dump())
    memory = plan_memory(model.architecture, hardware, deployment)
    if not memory.fits:
        raise InsufficientMemoryError("; ".join(memory.reasons) or "the deployment does not fit")
    res = memory.deployment
    measured = None
    if use_measurements and isinstance(hardware_ref, str):
        uploads = [
            (m.id, m.payload)
            for m in HardwareRepository(session).measurements(hardware_ref, limit=RECENT_UPLOADS)
        ]
        measured = measured_profile(hardware_ref, uploads)
    online_fp8 = model.architecture.quantization is None and deployment.quantization == "fp8"
    step_model = build_step_model(
        model.architecture,
        hardware,
        engine=res.engine,
        tensor_parallel_size=res.tensor_parallel_size,
        pipeline_parallel_size=res.pipeline_parallel_size,
        data_parallel_size=res.data_parallel_size,
        expert_parallel_size=res.expert_parallel_size,
        weight_dtype="fp8" if online_fp8 else None,
        kv_dtype=res.kv_cache.element_dtype,
        cuda_graphs=not res.enforce_eager,
        measured=measured,
        calibrated=calibrated,
    )
    return EngineModel(model=model, hardware=hardware, memory=memory, step_model=step_model)
