"""OpenAPI of /v1/simulate and /v1/queueing: every documented example answers 200, and every
request field has an example or a description."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

ROUTES = ("/v1/simulate", "/v1/queueing")
# Shared with other endpoints and documented with them.
SHARED = {"DeploymentIn", "InlineModel", "InlineHardware", "InterconnectIn"}
SIMULATE_EXAMPLES = {"poisson", "bursty", "closed_loop", "trace", "trace_file", "disaggregated"}


def _body(spec: dict[str, Any], path: str) -> dict[str, Any]:
    content: dict[str, Any] = spec["paths"][path]["post"]["requestBody"]["content"]
    return dict(content["application/json"])


def _resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    name = ref.rsplit("/", 1)[-1]
    return dict(spec["components"]["schemas"][name])


def _models(spec: dict[str, Any], node: Any, seen: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every object schema reachable from ``node`` (by name), once."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                schema = spec["components"]["schemas"][name]
                found.append((name, schema))
                found += _models(spec, schema, seen)
            return found
        for value in node.values():
            found += _models(spec, value, seen)
    elif isinstance(node, list):
        for value in node:
            found += _models(spec, value, seen)
    return found


def test_every_documented_example_answers(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    names = set(_body(spec, "/v1/simulate")["examples"])
    assert names >= SIMULATE_EXAMPLES
    for path in ROUTES:
        examples = _body(spec, path)["examples"]
        assert examples, path
        for name, example in examples.items():
            response = client.post(path, json=example["value"])
            assert response.status_code == 200, (path, name, response.text)


@pytest.mark.parametrize("path", ROUTES)
def test_every_request_field_has_an_example_or_a_description(client: TestClient, path: str) -> None:
    spec = client.get("/openapi.json").json()
    undocumented = []
    for name, schema in _models(spec, _body(spec, path)["schema"], set()):
        if name in SHARED:
            continue
        for field, prop in schema.get("properties", {}).items():
            documented = {"examples", "description", "example", "const"} & set(prop)
            if not documented and len(prop.get("enum", ())) != 1:  # a discriminator names itself
                undocumented.append(f"{name}.{field}")
    assert undocumented == []
