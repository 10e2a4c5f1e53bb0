"""The OpenAPI document, generated once per test process.

FastAPI builds it on an app's first ``/openapi.json`` (about 2 s: a type adapter per model
field) and caches it on that app only; the routes, and so the document, do not depend on the
settings or the database, so tests that only read it share one. ``test_health`` still fetches
it over HTTP from a client of each backend.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from servesize.api.app import create_app
from servesize.settings import Settings


@cache
def _document_text() -> str:
    app = create_app(Settings(database_url="sqlite:///:memory:", rate_limit_per_minute=0))
    return json.dumps(app.openapi())


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the document as ``/openapi.json`` serves it (callers may change it)."""
    document: dict[str, Any] = json.loads(_document_text())
    return document
