"""Models as the planners see them: parse an inline config, summarise a model (looking one
up by id is :meth:`servesize.api.lookups.LookupCache.model`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from servesize.catalog import UnknownModelError
from servesize.core.architecture import (
    Architecture,
    ArchitectureSummary,
    parse_architecture,
    summarize,
)
from servesize.core.errors import FieldIssue, InvalidArchitectureError
from servesize.schemas.models import ModelSummaryOut


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


def tags(summary: ArchitectureSummary) -> list[str]:
    """Filterable labels: ``dense``/``moe``, ``mla``, ``sliding_window``, ``hybrid``, ..."""
    out = ["moe" if summary.num_experts else "dense"]
    kinds = summary.layer_kinds
    if "mla" in kinds:
        out.append("mla")
    if "sliding_attention" in kinds or "chunked_attention" in kinds:
        out.append("sliding_window")
    if "linear_attention" in kinds or "mamba" in kinds:
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
    "summary_out",
    "tags",
]
