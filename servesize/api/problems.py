"""RFC 9457 problem details (``application/problem+json``): the one shape of every error."""

from __future__ import annotations

import json
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from starlette.responses import Response

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_PREFIX = "urn:servesize:problem:"


def problem_body(
    status: int, slug: str, detail: str, *, instance: str | None = None, **extensions: Any
) -> dict[str, Any]:
    """The problem document: ``type``, ``title``, ``status``, ``detail``, ``instance`` + extras."""
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_PREFIX + slug,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if instance is not None:
        body["instance"] = instance
    body.update({k: v for k, v in extensions.items() if v is not None})
    return body


def problem_response(
    status: int,
    slug: str,
    detail: str,
    *,
    instance: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> Response:
    body = problem_body(status, slug, detail, instance=instance, **extensions)
    content = json.dumps(body, ensure_ascii=False, allow_nan=False, default=str).encode()
    return Response(content, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)
