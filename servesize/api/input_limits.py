"""Limits on what a request may contain, checked before any route sees it.

* JSON nesting: ``json.loads`` and pydantic recurse once per level, so a 6 KB body of 1,000
  nested arrays exhausts the interpreter's recursion limit (1,000 frames). Bodies nested deeper
  than :data:`MAX_JSON_DEPTH` are refused with 400 and the pointer of the first node too deep.
* NUL in path and query parameters: PostgreSQL ``text`` cannot hold U+0000, so a lookup by such
  an id would fail in the driver; it is a 422 naming the parameter instead. Body fields are
  checked by :class:`servesize.schemas.base.RequestModel`.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from servesize.api.errors import UnprocessableError, json_pointer
from servesize.schemas.base import NUL

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted (a ``config.json`` nests 4 levels)."""


class JsonTooDeepError(ValueError):
    """A body nested deeper than :data:`MAX_JSON_DEPTH`; ``pointer`` is where it went too deep
    (empty when the parser itself gave up)."""

    def __init__(self, pointer: str) -> None:
        super().__init__(f"the JSON body nests arrays and objects deeper than {MAX_JSON_DEPTH}")
        self.pointer = pointer


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def first_too_deep(document: Any, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """RFC 6901 pointer of the first array or object at depth ``max_depth + 1`` (the top-level
    container is depth 1), or ``None``. Iterative, so it cannot itself overflow the stack."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(document, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if depth > max_depth:
            return json_pointer(path)
        children = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((child, depth + 1, (*path, key)) for key, child in children)
    return None


def parse_strict_json(body: bytes) -> Any:
    """Parse RFC 8259 JSON: NaN and Infinity are refused (``ValueError``), and so is nesting
    deeper than :data:`MAX_JSON_DEPTH` (:class:`JsonTooDeepError`)."""
    try:
        document = json.loads(body, parse_constant=_reject_constant)
    except RecursionError:
        raise JsonTooDeepError("") from None
    pointer = first_too_deep(document)
    if pointer is not None:
        raise JsonTooDeepError(pointer)
    return document


def refuse_nul_parameters(request: Request) -> None:
    """422 for a path or query parameter holding U+0000, naming the parameter."""
    errors = [
        {"location": location, "pointer": f"/{name}", "detail": "must not contain U+0000"}
        for location, params in (
            ("path", request.path_params.items()),
            ("query", request.query_params.multi_items()),
        )
        for name, value in params
        if isinstance(value, str) and NUL in value
    ]
    if errors:
        names = ", ".join(e["pointer"].lstrip("/") for e in errors)
        raise UnprocessableError(
            f"the NUL character (U+0000) is not allowed in {names}",
            slug="validation-error",
            errors=errors,
        )
