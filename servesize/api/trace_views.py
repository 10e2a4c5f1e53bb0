"""Stored traces: parse and summarise an upload, store it, read it back, and put a stored
trace in place of ``traffic.trace_id`` before a simulation runs."""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from servesize.api.exceptions import NotFoundError, UnprocessableError
from servesize.core.traffic import Trace, TraceError, parse_trace
from servesize.db.connection import transaction
from servesize.db.models import ApiKey, StoredTrace
from servesize.db.repository import TraceRepository
from servesize.db.types import utc_now
from servesize.schemas.simulate import MAX_REQUESTS, SimulateRequest
from servesize.schemas.traces import TokenStatsOut, TraceIn, TraceOut, TraceUpload

__all__ = ["load_trace", "store_trace", "trace_out", "trace_summary", "with_stored_trace"]


def _stats(values: np.ndarray) -> dict[str, Any]:
    p50, p90, p99 = np.percentile(values, [50, 90, 99]).tolist()
    return {
        "mean": float(np.mean(values)),
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "min": int(values.min()),
        "max": int(values.max()),
    }


def trace_summary(trace: Trace) -> dict[str, Any]:
    """Requests, the span from the first send to the last, the replay's rate
    ``(n − 1) / span`` (None for a zero span) and length statistics (linear-interpolated
    percentiles)."""
    span = float(trace.arrival_s[-1] - trace.arrival_s[0])
    return {
        "requests": trace.size,
        "duration_s": span,
        "rate_per_s": (trace.size - 1) / span if span > 0 else None,
        "input_tokens": _stats(trace.input_tokens),
        "output_tokens": _stats(trace.output_tokens),
    }


def store_trace(session: Session, body: TraceUpload, key: ApiKey | None) -> StoredTrace:
    """Parse ``body.file`` (a 422 names the line of the first bad row at ``/file``), then
    store it with its summary, owned by ``key`` (None, from the CLI: ``admin`` keys only)."""
    try:
        trace = parse_trace(body.file, body.format, max_rows=MAX_REQUESTS)
    except TraceError as exc:
        raise UnprocessableError(
            str(exc),
            slug="invalid-trace",
            errors=[{"location": "body", "pointer": "/file", "detail": str(exc)}],
        ) from None
    row = StoredTrace(
        id=f"trc_{secrets.token_hex(8)}",
        owner_key_id=key.id if key is not None else None,
        created_at=utc_now(),
        name=body.name,
        format=body.format,
        content=body.file,
        size_bytes=len(body.file.encode("utf-8")),
        summary=trace_summary(trace),
    )
    return TraceRepository(session).add(row)


def load_trace(session: Session, trace_id: str) -> StoredTrace:
    """The stored trace, or 404."""
    row = TraceRepository(session).get(trace_id)
    if row is None:
        raise NotFoundError(f"no stored trace {trace_id!r}")
    return row


def trace_out(row: StoredTrace) -> TraceOut:
    """The summary of a stored trace."""
    summary = row.summary
    return TraceOut(
        id=row.id,
        name=row.name,
        format=row.format,
        created_at=row.created_at,
        size_bytes=row.size_bytes,
        requests=summary["requests"],
        duration_s=summary["duration_s"],
        rate_per_s=summary["rate_per_s"],
        input_tokens=TokenStatsOut(**summary["input_tokens"]),
        output_tokens=TokenStatsOut(**summary["output_tokens"]),
    )


def with_stored_trace(body: SimulateRequest, factory: sessionmaker[Session]) -> SimulateRequest:
    """``body`` with ``traffic.trace_id`` replaced by the stored file (as ``traffic.trace``);
    404 for an unknown id. Unchanged without a ``trace_id``."""
    trace_id = body.traffic.trace_id
    if trace_id is None:
        return body
    with transaction(factory) as session:
        row = TraceRepository(session).get(trace_id)
        if row is None:
            raise NotFoundError(f"no stored trace {trace_id!r} (traffic.trace_id)")
        spec = TraceIn.model_validate({"format": row.format, "file": row.content})
    traffic = body.traffic.model_copy(update={"trace": spec, "trace_id": None})
    return body.model_copy(update={"traffic": traffic})
