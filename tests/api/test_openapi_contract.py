"""The OpenAPI document is usable by machines: security schemes, a Problem schema on every
error, required headers marked required (and refused when absent), stable operation ids,
examples on every body that the service accepts, links between operations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.api.openapi import OPERATION_IDS, REQUEST_EXAMPLES
from servesize.security import Scope
from tests.api.openapi_document import openapi_document

Json = dict[str, Any]
METHODS = ("get", "put", "post", "patch", "delete")

# Written from the routes' dependencies (deps.AdminKey, ModelsWriteKey, ProfilesWriteKey).
WRITE_SCOPES = {
    ("post", "/v1/keys"): "admin",
    ("get", "/v1/keys"): "admin",
    ("delete", "/v1/keys/{key_id}"): "admin",
    ("post", "/v1/models"): "models:write",
    ("delete", "/v1/models/{model_id}"): "models:write",
    ("post", "/v1/hardware"): "admin",
    ("patch", "/v1/hardware/{profile_id}"): "admin",
    ("delete", "/v1/hardware/{profile_id}"): "admin",
    ("post", "/v1/hardware/{profile_id}/measurements"): "profiles:write",
    ("post", "/v1/jobs"): "jobs:write",
    ("delete", "/v1/hardware/{profile_id}/recalibration/{calibration_id}"): "profiles:write",
    ("post", "/v1/traces"): "traces:write",
    ("delete", "/v1/traces/{trace_id}"): "traces:write",
}


# Jobs are read and cancelled by their owner's key (or admin): a key is required, any scope.
KEY_OF_ANY_SCOPE = {
    ("get", "/v1/jobs"),
    ("get", "/v1/jobs/{job_id}"),
    ("delete", "/v1/jobs/{job_id}"),
    ("get", "/v1/jobs/{job_id}/result.csv"),
}


@pytest.fixture(scope="session")
def spec() -> Json:
    """The document, built once: it does not depend on the backend (checked below), so the
    tests that only read it run once; those that send requests run on every backend."""
    return openapi_document()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_the_served_document_is_the_shared_one(client: TestClient, spec: Json) -> None:
    assert client.get("/openapi.json").json() == spec


def operations(spec: Json) -> list[tuple[str, str, Json]]:
    return [
        (method, path, op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def test_the_bearer_scheme_is_declared_and_required_where_writes_need_a_key(spec: Json) -> None:
    scheme = spec["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert "security" not in spec  # no global requirement: each operation states its own
    for method, path, op in operations(spec):
        if (method, path) in WRITE_SCOPES:
            assert op["security"] == [{"bearerAuth": [WRITE_SCOPES[(method, path)]]}], path
        elif (method, path) in KEY_OF_ANY_SCOPE:
            assert op["security"] == [{"bearerAuth": []}], path  # 401 without a key
        elif path.startswith("/v1"):
            assert op["security"] == [{}, {"bearerAuth": []}], path  # a key is optional
        else:
            assert op["security"] == [], path  # probes


def test_every_error_response_is_a_problem(spec: Json) -> None:
    problem = spec["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail"}
    assert problem["properties"]["errors"]["items"] == {
        "$ref": "#/components/schemas/ProblemFieldError"
    }
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    errors = 0
    for _method, path, op in operations(spec):
        for code, response in op["responses"].items():
            if int(code) >= 400:
                errors += 1
                assert response["content"] == {
                    "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
                }, (path, code)
    assert errors > 100


def test_the_statuses_each_operation_can_answer_are_documented(spec: Json) -> None:
    documented = {
        (method, path): {int(c) for c in op["responses"]} for method, path, op in operations(spec)
    }
    for key in WRITE_SCOPES:
        assert {401, 403, 429, 503} <= documented[key], key
    assert {400, 401, 403, 404, 409, 413, 415, 422, 429} <= documented[
        ("post", "/v1/hardware/{profile_id}/measurements")
    ]
    assert {412, 428} <= documented[("patch", "/v1/hardware/{profile_id}")]
    assert {409, 412, 428} <= documented[("delete", "/v1/hardware/{profile_id}")]
    assert {409} <= documented[("post", "/v1/models")]
    assert {400, 404, 413, 415, 422} <= documented[("post", "/v1/memory")]
    assert documented[("get", "/livez")] == {200}


def _header(op: Json, name: str) -> Json:
    return next(p for p in op["parameters"] if p["in"] == "header" and p["name"] == name)


def test_required_headers_are_marked_required_and_refused_when_absent(
    spec: Json, client: TestClient, create_key: Callable[..., str]
) -> None:
    paths = spec["paths"]
    upload = paths["/v1/hardware/{profile_id}/measurements"]["post"]
    assert _header(upload, "idempotency-key")["required"] is True
    for method in ("patch", "delete"):
        assert _header(paths["/v1/hardware/{profile_id}"][method], "if-match")["required"] is True

    admin = {"Authorization": f"Bearer {create_key(Scope.ADMIN)}"}
    response = client.post(
        "/v1/hardware/h100-sxm/measurements",
        json=REQUEST_EXAMPLES["uploadMeasurement"]["h100"]["value"],
        headers=admin,
    )
    assert response.status_code == 400
    response = client.patch("/v1/hardware/h100-sxm", json={"notes": "x"}, headers=admin)
    assert response.status_code == 428


def test_operation_ids_are_the_hand_chosen_ones(spec: Json) -> None:
    ids = [op["operationId"] for _m, _p, op in operations(spec)]
    assert len(ids) == len(set(ids))
    assert set(ids) == set(OPERATION_IDS.values())
    by_route = {(m, p): op["operationId"] for m, p, op in operations(spec)}
    assert by_route[("post", "/v1/hardware/{profile_id}/measurements")] == "uploadMeasurement"
    assert by_route[("post", "/v1/sizing")] == "createSizing"


def test_schema_titles_are_unique(spec: Json) -> None:
    """Generators name a class per title; two ``SloIn`` classes collide."""
    schemas = spec["components"]["schemas"]
    titles = [s.get("title", name) for name, s in schemas.items()]
    assert len(titles) == len(set(titles))
    assert all("__" not in name for name in schemas)


def test_every_request_body_has_examples(spec: Json) -> None:
    for method, path, op in operations(spec):
        if "requestBody" in op:
            body = op["requestBody"]["content"]["application/json"]
            assert body.get("examples"), (method, path)


@pytest.mark.parametrize("operation_id", sorted(REQUEST_EXAMPLES))
def test_the_added_examples_are_accepted(
    spec: Json, client: TestClient, create_key: Callable[..., str], operation_id: str
) -> None:
    method, path = next(
        (m, p) for m, p, op in operations(spec) if op["operationId"] == operation_id
    )
    headers = {
        "Authorization": f"Bearer {create_key(Scope.ADMIN)}",
        "If-Match": "*",
        "Idempotency-Key": "example-1",
    }
    url = path.replace("{profile_id}", "h100-sxm")
    for name, example in REQUEST_EXAMPLES[operation_id].items():
        response = client.request(method.upper(), url, json=example["value"], headers=headers)
        assert response.status_code in {200, 201}, (name, response.text)


def test_links_lead_to_existing_operations_and_parameters(spec: Json) -> None:
    by_id = {op["operationId"]: op for _m, _p, op in operations(spec)}
    links = 0
    for _method, _path, op in operations(spec):
        for response in op["responses"].values():
            for link in response.get("links", {}).values():
                links += 1
                target = by_id[link["operationId"]]
                names = {(p["in"], p["name"].lower()) for p in target.get("parameters", [])}
                for parameter in link["parameters"]:
                    location, _, name = parameter.rpartition(".")
                    if location:
                        assert (location, name.lower()) in names, parameter
                    else:
                        assert any(n == name for _loc, n in names), parameter
    assert links >= 9
