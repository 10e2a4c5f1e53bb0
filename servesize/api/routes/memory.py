"""The memory ledger and the KV-budget calculator."""

from __future__ import annotations

from fastapi import APIRouter, Request

from servesize.api.deps import ReadAccess, SessionDep
from servesize.api.hardware_resolver import resolve_hardware
from servesize.api.models_resolver import resolve_model
from servesize.api.routes.models import CatalogIndexDep
from servesize.core.memory import Deployment, kv_budget, plan_memory
from servesize.schemas.memory import (
    KvBudgetRequest,
    KvBudgetResponse,
    MemoryRequest,
    MemoryResponse,
)

router = APIRouter(prefix="/v1", tags=["memory"], dependencies=[ReadAccess])


@router.post("/memory", response_model=MemoryResponse)
def memory(body: MemoryRequest, session: SessionDep, index: CatalogIndexDep) -> MemoryResponse:
    """Line-by-line memory of the most loaded GPU, whether it fits, and the KV capacity."""
    model = resolve_model(body.model, catalog=index.catalog, session=session)
    hardware = resolve_hardware(body.hardware, session=session)
    deployment = Deployment(**body.deployment.model_dump())
    plan = plan_memory(
        model.architecture,
        hardware,
        deployment,
        request_lengths=body.request_lengths,
        request_weights=body.request_weights,
    )
    return MemoryResponse.model_validate(plan, from_attributes=True)


@router.post("/kv-budget", response_model=KvBudgetResponse)
def kv_budget_endpoint(
    body: KvBudgetRequest, session: SessionDep, index: CatalogIndexDep, request: Request
) -> KvBudgetResponse:
    """Bytes for B sequences of T tokens (``2·B·T·L·H_kv·D_h·s``), or the B or T that fit."""
    arch = (
        resolve_model(body.model, catalog=index.catalog, session=session).architecture
        if body.model is not None
        else None
    )
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
