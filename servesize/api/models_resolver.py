"""Find a model by id (catalogue, then custom) or read it inline; summarise it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy.orm import Session

from servesize.api.errors import NotFoundError
from servesize.catalog import ModelCatalog, UnknownModelError
from servesize.core.architecture import (
    Architecture,
    ArchitectureSummary,
    parse_architecture,
    summarize,
)
from servesize.core.errors import FieldIssue, InvalidArchitectureError
from servesize.db.repository import CustomModelRepository
from servesize.schemas.models import InlineModel, ModelRef, ModelSummaryOut


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    id: str
    source: Literal["catalogue", "custom", "inline"]
    config: dict[str, Any]
    architecture: Architecture


def parse_inline(config: dict[str, Any], *, name: str, pointer: str) -> Architecture:
    """Parse a config sent in a request; issues point into the request body at ``pointer``."""
    try:
        return parse_architecture(config, name=name)
    except InvalidArchitectureError as exc:
        raise InvalidArchitectureError(
            exc.model, [FieldIssue(pointer + i.field, i.problem) for i in exc.issues]
        ) from None


def resolve_model(
    ref: ModelRef, *, catalog: ModelCatalog, session: Session, pointer: str = "/model"
) -> ResolvedModel:
    """The architecture ``ref`` names; 404 for an unknown id."""
    if isinstance(ref, InlineModel):
        name = ref.name or "inline"
        arch = parse_inline(ref.hf_config, name=name, pointer=f"{pointer}/hf_config")
        return ResolvedModel(id=name, source="inline", config=ref.hf_config, architecture=arch)
    if ref in catalog:
        return ResolvedModel(
            id=ref,
            source="catalogue",
            config=catalog.config(ref),
            architecture=catalog.architecture(ref),
        )
    row = CustomModelRepository(session).get(ref)
    if row is None:
        raise NotFoundError(f"no model {ref!r} in the catalogue or among custom models")
    return ResolvedModel(
        id=ref,
        source="custom",
        config=dict(row.config),
        architecture=parse_architecture(row.config, name=ref),
    )


def tags(summary: ArchitectureSummary) -> list[str]:
    """Filterable labels: ``dense``/``moe``, ``mla``, ``sliding_window``, ``hybrid``, ..."""
    out = ["moe" if summary.num_experts else "dense"]
    kinds = summary.layer_kinds
    if "mla" in kinds:
        out.append("mla")
    if "sliding_attention" in kinds or "chunked_attention" in kinds:
        out.append("sliding_window")
    if "linear_attention" in kinds:
        out.append("hybrid")
    if summary.multimodal:
        out.append("multimodal")
    if summary.quantization is not None:
        out.append("quantized")
    if summary.mtp_layers:
        out.append("mtp")
    return out


def summary_out(arch: Architecture) -> tuple[ModelSummaryOut, list[str]]:
    summary = summarize(arch)
    return ModelSummaryOut.model_validate(summary, from_attributes=True), tags(summary)


__all__ = [
    "ResolvedModel",
    "UnknownModelError",
    "parse_inline",
    "resolve_model",
    "summary_out",
    "tags",
]
