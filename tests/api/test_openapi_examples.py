"""OpenAPI of the planning endpoints (/v1/simulate, /v1/queueing, /v1/slo/evaluate,
/v1/slo/capacity, /v1/sizing): every documented example answers 200 and shows what it is named
for, and every request field, shared models included, has an example or a description."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.openapi_document import openapi_document

Json = dict[str, Any]

# The examples each route must document at least.
EXAMPLES: dict[str, set[str]] = {
    "/v1/simulate": {"poisson", "bursty", "closed_loop", "trace", "trace_file", "disaggregated"},
    "/v1/queueing": set(),
    "/v1/slo/evaluate": {"percentiles", "attainment"},
    "/v1/slo/capacity": {"open_loop", "closed_loop"},
    "/v1/sizing": {"three_gpus", "disaggregated"},
}
ROUTES = tuple(EXAMPLES)


def _check_names(request: Json, answer: Json) -> None:
    """Every percentile target of the request is checked, in the answer's order."""
    slo = request["slo"]
    asked = {f"{m}.{s}" for m in ("ttft_s", "itl_s", "tpot_s", "e2e_s") for s in slo.get(m, {})}
    assert len(asked) >= 2
    assert asked <= {c["name"] for c in answer["checks"]}
    assert answer["decided_by"] == "simulation"


def _attainment(request: Json, answer: Json) -> None:
    assert "attainment" in {c["name"] for c in answer["checks"]}
    assert 0 <= answer["attainment"] <= 1
    assert answer["analytic_screen"] is not None  # an open loop is screened by Tier A too


def _open_loop_capacity(request: Json, answer: Json) -> None:
    assert answer["mode"] == "open_loop"
    assert answer["max_rate_per_s"] > 0
    assert answer["max_concurrency"] is None
    assert len(answer["curve"]) >= request["search"]["curve_points"]


def _closed_loop_capacity(request: Json, answer: Json) -> None:
    assert answer["mode"] == "closed_loop"
    assert answer["max_rate_per_s"] is None
    assert answer["max_concurrency"] >= 1
    assert answer["converged"]


def _priced_gpus(request: Json, answer: Json) -> None:
    """Every GPU is considered, and plans cost the request's prices, not the profiles'."""
    prices = request["prices"]
    assert len(prices) >= 2
    considered = {p["hardware"] for p in answer["plans"]}
    considered |= {r["candidate"].split()[0] for r in answer["rejected"]}
    assert considered == set(prices) == set(request["candidates"]["hardware"])
    assert answer["plans"]
    for plan in answer["plans"]:
        assert plan["cost_per_hour"] == pytest.approx(plan["total_gpus"] * prices[plan["hardware"]])


def _disaggregated(request: Json, answer: Json) -> None:
    """Aggregated and disaggregated plans are ranked together."""
    assert {p["kind"] for p in answer["plans"]} == {"aggregated", "disaggregated"}
    split = next(p for p in answer["plans"] if p["kind"] == "disaggregated")
    assert split["prefill_replicas"] >= 1
    assert split["decode_replicas"] >= 1
    assert split["kv_transfer_s"] > 0


SHOWS: dict[tuple[str, str], Callable[[Json, Json], None]] = {
    ("/v1/slo/evaluate", "percentiles"): _check_names,
    ("/v1/slo/evaluate", "attainment"): _attainment,
    ("/v1/slo/capacity", "open_loop"): _open_loop_capacity,
    ("/v1/slo/capacity", "closed_loop"): _closed_loop_capacity,
    ("/v1/sizing", "three_gpus"): _priced_gpus,
    ("/v1/sizing", "disaggregated"): _disaggregated,
}


_SPEC: list[Json] = []


def _spec() -> Json:
    """The OpenAPI document (the same for every backend; built once a process)."""
    if not _SPEC:
        _SPEC.append(openapi_document())
    return _SPEC[0]


def _body(spec: Json, path: str) -> Json:
    content: Json = spec["paths"][path]["post"]["requestBody"]["content"]
    return dict(content["application/json"])


def _models(spec: Json, node: Any, seen: set[str]) -> list[tuple[str, Json]]:
    """Every object schema reachable from ``node`` (by name), once."""
    found: list[tuple[str, Json]] = []
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


@pytest.mark.parametrize("path", ROUTES)
def test_every_documented_example_answers(client: TestClient, path: str) -> None:
    spec = _spec()
    examples = _body(spec, path)["examples"]
    assert examples, path
    assert set(examples) >= EXAMPLES[path]
    for name, example in examples.items():
        response = client.post(path, json=example["value"])
        assert response.status_code == 200, (path, name, response.text)
        show = SHOWS.get((path, name))
        if show is not None:
            show(example["value"], response.json())


def test_every_named_example_is_checked() -> None:
    named = {(path, name) for path, names in EXAMPLES.items() for name in names}
    assert set(SHOWS) <= named


@pytest.mark.parametrize("path", ROUTES)
def test_every_request_field_has_an_example_or_a_description(path: str) -> None:
    spec = _spec()
    models = _models(spec, _body(spec, path)["schema"], set())
    shared = {"InlineModel"} if path == "/v1/sizing" else {"DeploymentIn", "InlineModel"}
    shared |= {"InlineHardware", "InterconnectIn"} if path != "/v1/sizing" else set()
    assert shared <= {name for name, _ in models}  # the shared models are checked too
    undocumented = []
    for name, schema in models:
        for field, prop in schema.get("properties", {}).items():
            documented = {"examples", "description", "example", "const"} & set(prop)
            if not documented and len(prop.get("enum", ())) != 1:  # a discriminator names itself
                undocumented.append(f"{name}.{field}")
    assert undocumented == []
