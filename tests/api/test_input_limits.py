"""Inputs that used to be server errors: each is a 4xx problem naming the field, on both
databases, and writes no error log line."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.api.openapi import REQUEST_EXAMPLES
from servesize.security import Scope

JSON = {"content-type": "application/json"}


def nested_objects(depth: int) -> str:
    """``{"a": {"a": ... 1 ...}}`` with ``depth`` objects."""
    return '{"a":' * depth + "1" + "}" * depth


def nested_arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def _no_error_logged(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]


def _problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize(
    ("path", "body"),
    [
        # The reported cases: 1,000 nested objects (6 KB) and 1,000 nested arrays.
        ("/v1/models/inspect", '{"hf_config":' + nested_objects(1000) + "}"),
        ("/v1/memory", '{"model":' + nested_arrays(1000) + "}"),
        ("/v1/queueing", nested_arrays(5000)),
    ],
)
def test_deeply_nested_json_is_a_400(
    client: TestClient, caplog: pytest.LogCaptureFixture, path: str, body: str
) -> None:
    with caplog.at_level(logging.INFO):
        problem = _problem(client.post(path, content=body, headers=JSON), 400)
    assert problem["type"] == "urn:servesize:problem:json-too-deep"
    assert problem["max_depth"] == 64
    _no_error_logged(caplog)


def test_the_depth_limit_names_the_first_node_too_deep(client: TestClient) -> None:
    # Top-level object = depth 1; "hf_config" holds depth 2; 63 more "a" keys reach depth 65.
    too_deep = '{"hf_config":' + nested_objects(64) + "}"
    problem = _problem(client.post("/v1/models/inspect", content=too_deep, headers=JSON), 400)
    assert problem["errors"][0]["pointer"] == "/hf_config" + "/a" * 63
    # 64 levels are accepted by the guard (and refused by the architecture parser instead).
    deep_enough = '{"hf_config":' + nested_objects(63) + "}"
    response = client.post("/v1/models/inspect", content=deep_enough, headers=JSON)
    assert response.status_code == 422
    assert response.json()["type"] != "urn:servesize:problem:json-too-deep"


@pytest.mark.parametrize(
    "path",
    ["/v1/hardware", "/v1/models", "/v1/hardware/h100-sxm/measurements"],
)
def test_an_offset_beyond_any_integer_column_is_a_422(
    client: TestClient, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    with caplog.at_level(logging.INFO):
        problem = _problem(client.get(path, params={"offset": "25539668288256843776"}), 422)
    assert [(e["location"], e["pointer"]) for e in problem["errors"]] == [("query", "/offset")]
    _no_error_logged(caplog)
    # The largest offset accepted is an empty page, not an error.
    page = client.get(path, params={"offset": 2**31 - 1}).json()
    assert page["items"] == []
    assert page["offset"] == 2**31 - 1


@pytest.mark.parametrize(
    "measurement_id",
    [
        "99999999999999999999",  # beyond SQLite's 64-bit INTEGER
        "455169384564",  # beyond PostgreSQL's 32-bit INTEGER (found by Schemathesis)
        str(2**31),
    ],
)
def test_a_measurement_id_beyond_the_id_column_is_a_422(
    client: TestClient, caplog: pytest.LogCaptureFixture, measurement_id: str
) -> None:
    with caplog.at_level(logging.INFO):
        response = client.get(f"/v1/hardware/h100-sxm/measurements/{measurement_id}")
    problem = _problem(response, 422)
    assert [(e["location"], e["pointer"]) for e in problem["errors"]] == [
        ("path", "/measurement_id")
    ]
    _no_error_logged(caplog)
    # The largest id the column holds is an ordinary 404.
    assert client.get(f"/v1/hardware/h100-sxm/measurements/{2**31 - 1}").status_code == 404


@pytest.mark.parametrize("model", ["ggc", "mmc", "mg1"])
def test_a_subnormal_service_time_is_a_422_naming_the_inputs(
    client: TestClient, caplog: pytest.LogCaptureFixture, model: str
) -> None:
    # c / S = 1 / 5e-324 overflows a double: the saturation rate has no finite value.
    body = {"model": model, "arrival_rate_per_s": 5e-324, "service_time_s": 5e-324}
    with caplog.at_level(logging.INFO):
        problem = _problem(client.post("/v1/queueing", json=body), 422)
    assert problem["type"] == "urn:servesize:problem:numeric-overflow"
    assert {e["pointer"] for e in problem["errors"]} == {"/arrival_rate_per_s", "/service_time_s"}
    _no_error_logged(caplog)


def test_a_subnormal_arrival_rate_has_a_correct_answer(client: TestClient) -> None:
    # M/M/1 with λ = 5e-324 /s, S = 1 s: ρ = λS = 5e-324, P(wait) = ρ, Wq = ρS/(1-ρ) = 5e-324 s.
    body = {"model": "mmc", "arrival_rate_per_s": 5e-324, "service_time_s": 1.0}
    answer = client.post("/v1/queueing", json=body).json()
    assert answer["utilization"] == 5e-324
    assert answer["saturation_rate_per_s"] == 1.0
    assert answer["mean_wait_s"] == 5e-324
    assert answer["mean_response_s"] == 1.0


@pytest.mark.parametrize(
    ("path", "body", "pointer"),
    [
        ("/v1/keys", {"name": "ci\u0000uploader", "scopes": ["admin"]}, "/name"),
        (
            "/v1/models",
            {"id": "acme/nul", "hf_config": {"model_type": "llama", "x\u0000": 1}},
            "/hf_config",
        ),
        (
            "/v1/hardware",
            {
                "id": "nul-gpu",
                "vendor": "acme",
                "name": "NUL GPU",
                "memory_bytes": 10**9,
                "memory_bandwidth_bytes_per_s": 10**12,
                "peak_tflop_per_s": {"bf16": 100.0},
                "notes": "a\u0000b",
            },
            "/notes",
        ),
        ("/v1/memory", {"model": "meta-llama/Llama-3.1-8B\u0000", "hardware": "h100-sxm"}, None),
    ],
)
def test_a_nul_character_in_a_body_is_a_422_naming_the_field(
    client: TestClient,
    create_key: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
    path: str,
    body: dict[str, Any],
    pointer: str | None,
) -> None:
    """PostgreSQL text and jsonb cannot store U+0000; the failed insert was a 500 whose log
    line carried the SQL parameters."""
    key = create_key(Scope.ADMIN)
    with caplog.at_level(logging.DEBUG):
        problem = _problem(
            client.post(path, json=body, headers={"Authorization": f"Bearer {key}"}), 422
        )
    pointers = [e["pointer"] for e in problem["errors"]]
    if pointer is not None:
        assert pointers == [pointer]
    else:  # a model reference is a union (id or inline config): the id member names it
        assert all(p.startswith("/model") for p in pointers)
    assert any("U+0000" in e["detail"] for e in problem["errors"])
    _no_error_logged(caplog)
    assert not any(key.rsplit("_", 1)[1] in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("url", "location", "pointer"),
    [
        ("/v1/models/acme%00x", "path", "/model_id"),
        ("/v1/hardware/h100%00sxm", "path", "/profile_id"),
        ("/v1/hardware?vendor=nv%00idia", "query", "/vendor"),
    ],
)
def test_a_nul_character_in_a_parameter_is_a_422_naming_it(
    client: TestClient, caplog: pytest.LogCaptureFixture, url: str, location: str, pointer: str
) -> None:
    with caplog.at_level(logging.INFO):
        problem = _problem(client.get(url), 422)
    assert [(e["location"], e["pointer"]) for e in problem["errors"]] == [(location, pointer)]
    _no_error_logged(caplog)


@pytest.mark.parametrize(
    "field", ["vendor", "name", "memory_bytes", "memory_bandwidth_bytes_per_s", "peak_tflop_per_s"]
)
def test_nulling_a_field_every_profile_has_is_a_422(
    client: TestClient, create_key: Callable[..., str], caplog: pytest.LogCaptureFixture, field: str
) -> None:
    """A null here was a NOT NULL violation (409) or ``dict(None)`` (500)."""
    admin = {"Authorization": f"Bearer {create_key(Scope.ADMIN)}", "If-Match": "*"}
    profile = {
        "id": "lab-gpu",
        "vendor": "acme",
        "name": "Lab GPU",
        "memory_bytes": 80 * 10**9,
        "memory_bandwidth_bytes_per_s": 3 * 10**12,
        "peak_tflop_per_s": {"bf16": 900.0},
    }
    assert client.post("/v1/hardware", json=profile, headers=admin).status_code == 201
    with caplog.at_level(logging.INFO):
        response = client.patch("/v1/hardware/lab-gpu", json={field: None}, headers=admin)
    problem = _problem(response, 422)
    assert [e["pointer"] for e in problem["errors"]] == [f"/{field}"]
    _no_error_logged(caplog)
    assert client.get("/v1/hardware/lab-gpu").json()[field] == profile[field]


def test_a_method_version_beyond_its_column_is_a_422(
    client: TestClient, create_key: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    """``method_version`` is a 32-bit INTEGER column: 2^31 was a PostgreSQL 500."""
    body = copy.deepcopy(REQUEST_EXAMPLES["uploadMeasurement"]["h100"]["value"])
    body["provenance"]["method_version"] = 2**31
    headers = {
        "Authorization": f"Bearer {create_key(Scope.PROFILES_WRITE)}",
        "Idempotency-Key": "method-version",
    }
    with caplog.at_level(logging.INFO):
        response = client.post("/v1/hardware/h100-sxm/measurements", json=body, headers=headers)
    problem = _problem(response, 422)
    assert [e["pointer"] for e in problem["errors"]] == ["/provenance/method_version"]
    _no_error_logged(caplog)


def test_an_interconnect_bandwidth_beyond_bigint_is_a_422(
    client: TestClient, create_key: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    """The column is a 64-bit BIGINT; 2^63 failed in the driver. The bound is 10^15 B/s, as
    for memory bandwidth (NVLink 5 is 9e11 B/s per GPU and direction)."""
    body = copy.deepcopy(REQUEST_EXAMPLES["createHardwareProfile"]["lab_h100"]["value"])
    body["interconnect"] = {"kind": "nvlink", "bandwidth_bytes_per_s": 2**63}
    headers = {"Authorization": f"Bearer {create_key(Scope.ADMIN)}"}
    with caplog.at_level(logging.INFO):
        response = client.post("/v1/hardware", json=body, headers=headers)
    problem = _problem(response, 422)
    assert [e["pointer"] for e in problem["errors"]] == ["/interconnect/bandwidth_bytes_per_s"]
    _no_error_logged(caplog)
