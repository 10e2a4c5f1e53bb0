"""Uploaded request traces: store one (scope ``traces:write``), read its summary, delete it
(its owner or an ``admin`` key); ``/v1/simulate`` replays it by ``traffic.trace_id``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Response, status

from servesize.api.deps import ReadAccess, SessionDep, TracesWriteKey
from servesize.api.ownership import require_owner
from servesize.api.trace_views import load_trace, store_trace, trace_out
from servesize.db.repository import TraceRepository
from servesize.schemas.traces import TraceOut, TraceUpload

router = APIRouter(prefix="/v1/traces", tags=["traces"], dependencies=[ReadAccess])

EXAMPLES = {
    "azure": {
        "summary": "The first rows of Azure's conversation trace",
        "value": {
            "format": "azure",
            "name": "azure-conv",
            "file": (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                "2023-11-16 18:15:46.6805900,374,44\n"
                "2023-11-16 18:15:50.9951690,396,109\n"
                "2023-11-16 18:15:51.2224670,879,55\n"
            ),
        },
    }
}


@router.post("", status_code=status.HTTP_201_CREATED, response_model=TraceOut)
def upload_trace(
    body: Annotated[TraceUpload, Body(openapi_examples=EXAMPLES)],
    session: SessionDep,
    response: Response,
    key: TracesWriteKey,
) -> TraceOut:
    """Store a trace file (CSV, Mooncake or plain JSONL, Azure, vLLM ``--save-detailed``;
    scope ``traces:write``): 201 with its summary; a bad row is a 422 naming its line."""
    row = store_trace(session, body, key)
    response.headers["Location"] = f"/v1/traces/{row.id}"
    return trace_out(row)


@router.get("/{trace_id}", response_model=TraceOut)
def get_trace(trace_id: str, session: SessionDep) -> TraceOut:
    """A stored trace's summary: requests, duration, rate, input and output lengths."""
    return trace_out(load_trace(session, trace_id))


@router.delete("/{trace_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_trace(trace_id: str, session: SessionDep, key: TracesWriteKey) -> Response:
    """Delete a stored trace (scope ``traces:write``, and the key that uploaded it or an
    ``admin`` key)."""
    row = load_trace(session, trace_id)
    require_owner(row.owner_key_id, key, f"trace {trace_id!r}")
    TraceRepository(session).delete(row)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


__all__ = ["EXAMPLES", "router"]
