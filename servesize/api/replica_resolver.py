"""Request → resolved model, hardware and measurements → compiled replica (shared by the
planners): the IO around :func:`servesize.core.replica.compile_replica`, which makes every
modelling choice. The lookup (:func:`lookup_inputs`, which may read the database) and the
compilation (:func:`compile_inputs`, pure computation) are separate steps, so a route closes
its database session before it computes (:mod:`servesize.api.compute`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from servesize.api.hardware_resolver import inline_spec
from servesize.api.lookups import ActiveCalibration, LookupCache
from servesize.api.measured import scaled_tables
from servesize.api.models_resolver import ResolvedModel
from servesize.api.resolved import ResolvedReplica
from servesize.core.architecture import Architecture
from servesize.core.energy import PowerProfile, power_profile
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment
from servesize.core.replica import ReplicaCache
from servesize.core.speculative import with_draft
from servesize.core.steptime import (
    EngineProfile,
    MeasuredProfile,
    engine_profile,
    simulator_constants,
)
from servesize.schemas.memory import DeploymentIn, HardwareRef
from servesize.schemas.models import ModelRef
from servesize.schemas.speculative import speculative_decoding

__all__ = [
    "REPLICAS",
    "ReplicaInputs",
    "ReplicaRequest",
    "ResolvedReplica",
    "compile_inputs",
    "deployment_with_draft",
    "lookup_inputs",
    "recalibrated_engine",
    "request_inputs",
    "request_replica",
]

REPLICAS = ReplicaCache()
"""Compiled replicas of this process by their inputs: the lookup cache hands out the same model,
spec and measurement objects while they are unchanged and new ones after a change, so a
repeated request reuses the compiled replica (its step-time tables and estimates) and a changed
profile or custom model compiles anew."""


@dataclass(frozen=True, slots=True)
class ReplicaInputs:
    """What a request's references resolve to (the lookup, before any computation)."""

    model: ResolvedModel
    hardware: HardwareSpec
    measurements: MeasuredProfile | None
    calibrations: dict[str, ActiveCalibration] = field(default_factory=dict)
    """The stored profile's applied recalibrations by engine (none for inline hardware)."""
    power: PowerProfile | None = None
    """The GPU's board power (measured or datasheet); None without a TDP or measurement."""
    draft: ResolvedModel | None = None
    """``deployment.speculative.draft_model`` resolved (method ``draft_model`` only)."""


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


def request_inputs(body: ReplicaRequest, lookups: LookupCache) -> ReplicaInputs:
    """:func:`lookup_inputs` of a request's ``model`` and ``hardware`` (and its speculative
    draft model)."""
    inputs = lookup_inputs(
        lookups,
        model_ref=body.model,
        hardware_ref=body.hardware,
        use_measurements=body.use_measurements,
    )
    spec = body.deployment.speculative
    if spec is None or spec.method != "draft_model" or spec.draft_model is None:
        return inputs
    draft = lookups.model(spec.draft_model, pointer="/deployment/speculative/draft_model")
    return replace(inputs, draft=draft)


def request_replica(body: ReplicaRequest, inputs: ReplicaInputs) -> ResolvedReplica:
    """:func:`compile_inputs` with a request's ``deployment`` and ``calibrated``."""
    return compile_inputs(inputs, body.deployment, calibrated=body.calibrated)


def lookup_inputs(
    lookups: LookupCache,
    *,
    model_ref: ModelRef,
    hardware_ref: HardwareRef,
    use_measurements: bool = True,
    model_pointer: str = "/model",
) -> ReplicaInputs:
    """Resolve the references (404 for an unknown id) through the lookup cache: the database
    is read only for an entry that is missing or due a check."""
    model = lookups.model(model_ref, pointer=model_pointer)
    calibrations: dict[str, ActiveCalibration] = {}
    if isinstance(hardware_ref, str):
        entry = lookups.require_hardware(hardware_ref)
        hardware, measured = entry.spec, entry.measured
        calibrations = entry.calibrations
        power = entry.power if use_measurements else power_profile(hardware)
    else:
        hardware = inline_spec(hardware_ref)
        measured = scaled_tables(hardware) if use_measurements else None
        power = power_profile(hardware)
    return ReplicaInputs(
        model=model,
        hardware=hardware,
        measurements=measured if use_measurements else None,
        calibrations=calibrations,
        power=power,
    )


def deployment_with_draft(
    architecture: Architecture, deployment_in: DeploymentIn, lookups: LookupCache
) -> Deployment:
    """The core deployment of ``deployment_in`` with its speculative draft's memory (what
    ``/v1/memory`` plans; the draft model resolved through ``lookups``)."""
    deployment = deployment_in.core()
    spec_in = deployment_in.speculative
    if spec_in is None:
        return deployment
    draft = None
    if spec_in.method == "draft_model" and spec_in.draft_model is not None:
        ref = spec_in.draft_model
        draft = lookups.model(ref, pointer="/deployment/speculative/draft_model").architecture
    spec = speculative_decoding(spec_in, draft)
    assert spec is not None
    return with_draft(deployment, architecture, spec)[0]


def recalibrated_engine(engine: str, calibration: ActiveCalibration) -> EngineProfile:
    """The engine's simulator profile with a stored recalibration's constants in place."""
    base = simulator_constants(engine_profile(engine))
    constants: dict[str, Any] = dict(calibration.constants)
    return replace(
        base,
        provenance=(
            f"recalibration {calibration.id} of {calibration.created_at.date().isoformat()} "
            f"for this hardware profile"
        ),
        **constants,
    )


def compile_inputs(
    inputs: ReplicaInputs, deployment_in: DeploymentIn, *, calibrated: bool = True
) -> ResolvedReplica:
    """Compile the replica (a plan that does not fit is the core's ``InsufficientMemoryError``,
    a 422), with the profile's measured tables when the lookup kept them. With ``calibrated``
    and a recalibration applied to the profile for the deployment's engine, the replica steps
    with its constants and its memory plan's warnings name it (so every answer says so).
    Compiled once per distinct inputs (:data:`REPLICAS`)."""
    calibration = inputs.calibrations.get(deployment_in.engine) if calibrated else None
    replica = REPLICAS.compile(
        inputs.model.architecture,
        inputs.hardware,
        deployment_in.core(),
        inputs.measurements,
        recalibrated_engine(deployment_in.engine, calibration) if calibration else None,
        calibrated=calibrated,
        speculative=speculative_decoding(
            deployment_in.speculative, inputs.draft.architecture if inputs.draft else None
        ),
    )
    if calibration is not None:
        memory = replace(replica.memory, warnings=(*replica.memory.warnings, calibration.note()))
        replica = replace(replica, memory=memory)
    return ResolvedReplica(
        model=inputs.model, replica=replica, calibration=calibration, power=inputs.power
    )
