"""The memory ledger and the KV-budget calculator.

``async`` routes that need no database session: references resolve through the lookup cache
and the work runs on the estimate gate (:mod:`servesize.api.compute`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from servesize.api.compute import GatesDep
from servesize.api.deps import LookupsDep, ReadAccess
from servesize.api.hardware_resolver import resolve_hardware
from servesize.api.launch_views import deployment_launch
from servesize.api.lookups import LookupCache
from servesize.api.models_resolver import ResolvedModel
from servesize.api.replica_resolver import deployment_with_draft
from servesize.core.architecture import Architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment, kv_budget, plan_memory
from servesize.core.replica import host_tier
from servesize.schemas.memory import (
    HostKVTierOut,
    KvBudgetRequest,
    KvBudgetResponse,
    MemoryRequest,
    MemoryResponse,
)

router = APIRouter(prefix="/v1", tags=["memory"], dependencies=[ReadAccess])


@router.post("/memory", response_model=MemoryResponse)
async def memory(
    body: MemoryRequest, request: Request, lookups: LookupsDep, gates: GatesDep
) -> MemoryResponse:
    """Line-by-line memory of the most loaded GPU, whether it fits, and the KV capacity."""

    def lookup() -> tuple[ResolvedModel, HardwareSpec, Deployment]:
        model = lookups.model(body.model)
        deployment = deployment_with_draft(model.architecture, body.deployment, lookups)
        return model, resolve_hardware(body.hardware, lookups=lookups), deployment

    def compute(inputs: tuple[ResolvedModel, HardwareSpec, Deployment]) -> MemoryResponse:
        model, hardware, deployment = inputs
        plan = plan_memory(
            model.architecture,
            hardware,
            deployment,
            request_lengths=body.request_lengths,
            request_weights=body.request_weights,
        )
        response = MemoryResponse.model_validate(plan, from_attributes=True)
        tier = host_tier(hardware, plan)
        if tier is not None:
            response.host_kv_tier = HostKVTierOut.model_validate(tier, from_attributes=True)
        response.launch, response.launch_unsupported = deployment_launch(
            model.id, model.architecture, hardware, plan, body.deployment.speculative
        )
        return response

    return await gates.estimate.run(request, compute, lookup)


def _kv_budget(body: KvBudgetRequest, arch: Architecture | None) -> KvBudgetResponse:
    result = kv_budget(
        num_layers=body.num_layers,
        num_kv_heads=body.num_kv_heads,
        head_dim=body.head_dim,
        bytes_per_element=body.bytes_per_element,
        model=arch,
        kv_cache_dtype=body.kv_cache_dtype,
        tensor_parallel_size=body.tensor_parallel_size,
        concurrency=body.concurrency,
        tokens_per_sequence=body.tokens_per_sequence,
        memory_bytes=body.memory_bytes,
        block_size=body.block_size,
    )
    return KvBudgetResponse.model_validate(result, from_attributes=True)


def _architecture(body: KvBudgetRequest, lookups: LookupCache) -> Architecture | None:
    return lookups.model(body.model).architecture if body.model is not None else None


@router.post("/kv-budget", response_model=KvBudgetResponse)
async def kv_budget_endpoint(
    body: KvBudgetRequest, request: Request, lookups: LookupsDep, gates: GatesDep
) -> KvBudgetResponse:
    """Bytes for B sequences of T tokens (``2·B·T·L·H_kv·D_h·s``), or the B or T that fit."""
    return await gates.estimate.run(
        request,
        lambda arch: _kv_budget(body, arch),
        lambda: _architecture(body, lookups),
    )
