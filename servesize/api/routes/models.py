"""Model architectures: the catalogue, custom registrations and inspection."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response, status

from servesize.api.deps import LookupsDep, ModelsWriteKey, ReadAccess, SessionDep
from servesize.api.errors import ConflictError, NotFoundError
from servesize.api.models_resolver import parse_inline, summary_out
from servesize.api.ownership import require_owner
from servesize.api.pagination import PageDep
from servesize.catalog import ModelCatalog
from servesize.core.architecture import Architecture
from servesize.db.repository import CustomModelRepository
from servesize.schemas.base import Page
from servesize.schemas.models import (
    InspectRequest,
    ModelListItem,
    ModelOut,
    ModelRegister,
    ModelSummaryOut,
)

router = APIRouter(prefix="/v1/models", tags=["models"], dependencies=[ReadAccess])


class CatalogIndex:
    """The catalogue with its list entries computed once (the files do not change at run time)."""

    def __init__(self, catalog: ModelCatalog) -> None:
        self.catalog = catalog

    @cached_property
    def items(self) -> list[ModelListItem]:
        return [
            _list_item(model_id, "catalogue", self.catalog.architecture(model_id))
            for model_id in self.catalog.ids()
        ]


def _list_item(
    model_id: str, source: Literal["catalogue", "custom"], arch: Architecture
) -> ModelListItem:
    summary, labels = summary_out(arch)
    return ModelListItem(
        id=model_id,
        source=source,
        family=summary.family,
        model_type=summary.model_type,
        tags=labels,
        parameters_total=summary.parameters_total,
        parameters_active=summary.parameters_active,
        num_layers=summary.num_layers,
    )


async def get_catalog_index(request: Request) -> CatalogIndex:
    index = request.app.state.catalog_index
    assert isinstance(index, CatalogIndex)
    return index


CatalogIndexDep = Annotated[CatalogIndex, Depends(get_catalog_index)]


@router.get("", response_model=Page[ModelListItem])
def list_models(
    lookups: LookupsDep,
    index: CatalogIndexDep,
    page: PageDep,
    family: Annotated[str | None, Query(max_length=64, description="e.g. llama, qwen3_moe")] = None,
    tag: Annotated[
        str | None,
        Query(
            max_length=32,
            alias="type",
            description="dense, moe, mla, sliding_window, hybrid, multimodal, quantized, mtp",
        ),
    ] = None,
) -> Page[ModelListItem]:
    """Catalogue and custom models, by id (custom ones through the lookup cache: parsed once
    per registration, the database read only when the cache is due a check)."""
    custom = [_list_item(m.id, "custom", m.architecture) for m in lookups.custom_models()]
    items = sorted([*index.items, *custom], key=lambda item: item.id.lower())
    if family is not None:
        items = [i for i in items if i.family == family or i.model_type == family]
    if tag is not None:
        items = [i for i in items if tag in i.tags]
    return page.page(items[page.offset : page.offset + page.limit], len(items))


@router.post("/inspect", response_model=ModelSummaryOut)
def inspect_model(body: InspectRequest) -> ModelSummaryOut:
    """Summarise an inline ``config.json``; nothing is stored."""
    arch = parse_inline(body.hf_config, name=body.name or "inline", pointer="/hf_config")
    summary, _ = summary_out(arch)
    return summary


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ModelOut)
def register_model(
    body: ModelRegister,
    session: SessionDep,
    index: CatalogIndexDep,
    response: Response,
    key: ModelsWriteKey,
) -> ModelOut:
    """Register a custom architecture (scope ``models:write``); 409 if the id is taken."""
    arch = parse_inline(body.hf_config, name=body.id, pointer="/hf_config")
    repo = CustomModelRepository(session)
    if body.id in index.catalog or repo.get(body.id) is not None:
        raise ConflictError(f"a model {body.id!r} exists already")
    repo.add(model_id=body.id, config=body.hf_config, created_by=key.id)
    summary, labels = summary_out(arch)
    response.headers["Location"] = f"/v1/models/{body.id}"
    return ModelOut(
        id=body.id, source="custom", tags=labels, config=body.hf_config, summary=summary
    )


@router.get("/{model_id:path}", response_model=ModelOut)
def get_model(model_id: str, lookups: LookupsDep) -> ModelOut:
    """A model's stored ``config.json`` and its derived summary."""
    resolved = lookups.model(model_id)
    summary, labels = summary_out(resolved.architecture)
    source = "catalogue" if resolved.source == "catalogue" else "custom"
    return ModelOut(
        id=resolved.id, source=source, tags=labels, config=resolved.config, summary=summary
    )


@router.delete("/{model_id:path}", status_code=status.HTTP_204_NO_CONTENT)
def delete_model(
    model_id: str, session: SessionDep, index: CatalogIndexDep, key: ModelsWriteKey
) -> Response:
    """Delete a custom model (scope ``models:write``, and the key that registered it or an
    ``admin`` key); catalogue models are read-only."""
    if model_id in index.catalog:
        raise ConflictError(f"{model_id!r} is a catalogue model and cannot be deleted")
    repo = CustomModelRepository(session)
    row = repo.get(model_id)
    if row is None:
        raise NotFoundError(f"no custom model {model_id!r}")
    require_owner(row.owner_key_id, key, f"custom model {model_id!r}")
    repo.delete(row)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
