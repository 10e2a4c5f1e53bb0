"""Saved plans on both database backends: store, read back with every input, deployment
artifacts that validate against the Kubernetes schemas, stored benchmarks listed by plan, and
plan against measured with the ``vllm bench serve`` fixture (figures read off the file)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.agent.ingest import ingest_files
from servesize.security import Scope
from tests.api.test_hardware import bearer, h100_upload, upload
from tests.core.deploy.test_deploy_manifests import DEPLOYMENT, SERVICE, _errors
from tests.core.deploy.test_llmd_values import _chart_command, _flags
from tests.core.deploy.test_plan_objects import CONFIG_MAP

FIXTURE = Path(__file__).resolve().parents[1] / "agent" / "fixtures" / "vllm_bench_rates.jsonl"
PRICES = Path(__file__).resolve().parents[2] / "servesize" / "data" / "prices.json"
BODY: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "traffic": {"rate_per_s": 1.0, "input_tokens": 512, "output_tokens": 128},
    "slo": {"ttft_s": {"p95": 0.5}, "tpot_s": {"p95": 0.05}},
    "candidates": {
        "hardware": ["h100-sxm"],
        "tensor_parallel": [1],
        "max_num_batched_tokens": [8192],
        "kv_cache_dtype": ["auto"],
    },
    "verify_top": 1,
}


def _sheet_cheapest(gpu: str) -> dict[str, Any]:
    rows = [r for r in json.loads(PRICES.read_text())["entries"] if r["gpu"] == gpu]
    return min(rows, key=lambda r: (r["usd_per_gpu_hour"], r["provider"]))


def _save(client: TestClient, key: str, body: dict[str, Any] = BODY) -> dict[str, Any]:
    response = client.post("/v1/sizing", params={"save": "true"}, json=body, headers=bearer(key))
    assert response.status_code == 201, response.text
    out: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/v1/plans/{out['plan_id']}"
    return out


def test_saving_needs_a_key_with_the_plans_scope(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    anonymous = client.post("/v1/sizing", params={"save": "true"}, json=BODY)
    assert anonymous.status_code == 401
    assert anonymous.headers["content-type"] == "application/problem+json"
    wrong = create_key(Scope.MODELS_WRITE)
    forbidden = client.post("/v1/sizing?save=true", json=BODY, headers=bearer(wrong))
    assert forbidden.status_code == 403
    assert forbidden.json()["required_scope"] == "plans:write"
    assert client.get("/v1/plans/pln_0000000000000000").status_code == 404


def test_a_saved_plan_returns_every_input_and_is_priced_from_the_sheet(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.PLANS_WRITE, name="planner")
    saved = _save(client, key, BODY | {"verify_top": 0})
    cheapest = _sheet_cheapest("h100-sxm")
    best = saved["plans"][0]
    assert best["price_per_gpu_hour"] == cheapest["usd_per_gpu_hour"]
    assert best["price_source"] == {
        "origin": "sheet",
        "provider": cheapest["provider"],
        "source_url": cheapest["source_url"],
        "as_of": cheapest["read_on"],
    }
    assert saved["prices_as_of"] == cheapest["read_on"]
    got = client.get(f"/v1/plans/{saved['plan_id']}")
    assert got.status_code == 200, got.text
    plan = got.json()
    assert plan["answer"] == saved
    inputs = plan["inputs"]
    assert inputs["model_id"] == "meta-llama/Llama-3.1-8B"
    assert len(inputs["model_config_sha256"]) == 64
    assert inputs["hardware"] == [{"id": "h100-sxm", "version": 1, "measurements": []}]
    assert inputs["prices"]["h100-sxm"]["origin"] == "sheet"
    assert inputs["request"]["traffic"]["rate_per_s"] == 1.0
    assert inputs["request"]["headroom"] == 0.85  # defaults are recorded too
    assert inputs["service_version"]
    keys = client.get("/v1/keys", headers=bearer(create_key(Scope.ADMIN))).json()
    owner = next(k for k in keys if k["name"] == "planner")
    assert plan["owner_key_id"] == owner["key_id"]
    # A request's price wins over the sheet's.
    priced = client.post("/v1/sizing", json=BODY | {"prices": {"h100-sxm": 2.0}, "verify_top": 0})
    assert priced.json()["plans"][0]["price_source"]["origin"] == "request"
    assert priced.json()["prices_as_of"] is None


def test_manifests_validate_and_bad_queries_name_the_field(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    saved = _save(client, create_key(Scope.PLANS_WRITE), BODY | {"verify_top": 0})
    url = f"/v1/plans/{saved['plan_id']}/manifests"
    response = client.get(url, params={"namespace": "llm"})
    assert response.status_code == 200, response.text
    out = response.json()
    service, deployment = out["kubernetes"]
    assert _errors(SERVICE, service) == []
    assert _errors(DEPLOYMENT, deployment) == []
    best = saved["plans"][0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    argv = [*container["command"], *container["args"]]
    assert argv[: len(best["engine_args"]["vllm"])] == best["engine_args"]["vllm"]
    assert deployment["spec"]["replicas"] == best["replicas"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(best["gpus_per_replica"])
    assert out["kserve"][0]["kind"] == "InferenceService"
    assert out["llmd_chart"] == "llm-d-modelservice v0.4.12"
    assert _flags(_chart_command(out["llmd_values"], "decode")) == _flags(
        best["engine_args"]["vllm"]
    )
    bench = out["benchmark_command"]
    assert bench[bench.index("--request-rate") + 1] == "1"
    assert bench[bench.index("--num-prompts") + 1] == "300"  # 1 request/s × 300 s
    assert bench[bench.index("--base-url") + 1] == f"http://{service['metadata']['name']}:8000"
    for params, pointer in (({"rank": 9}, "/rank"), ({"namespace": "Bad_NS"}, "/namespace")):
        bad = client.get(url, params=params)
        assert bad.status_code == 422, bad.text
        assert bad.headers["content-type"] == "application/problem+json"
        assert pointer in {e["pointer"] for e in bad.json()["errors"]}


def test_plan_against_measured_with_a_stored_and_an_inline_benchmark(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    saved = _save(client, create_key(Scope.PLANS_WRITE))
    plan_id = saved["plan_id"]
    bench = ingest_files([FIXTURE], "vllm-bench", model="meta-llama/Llama-3.1-8B")
    payload = h100_upload(gemm=[], memory_bandwidth=[], collectives=[])
    payload.pop("kernel_launch_overhead_s", None)
    payload["endpoint_benchmarks"] = [bench.model_dump(mode="json")]
    stored = upload(client, bearer(create_key(Scope.PROFILES_WRITE)), payload)
    assert stored.status_code == 201, stored.text
    listed = client.get(f"/v1/plans/{plan_id}/benchmarks").json()["items"]
    assert [(b["measurement_id"], b["benchmark_index"], b["levels"]) for b in listed] == [
        (stored.json()["id"], 0, 2)
    ]
    assert listed[0]["model_matches"] is True
    by_id = client.post(f"/v1/plans/{plan_id}/verify", json={"measurement_id": stored.json()["id"]})
    assert by_id.status_code == 200, by_id.text
    out = by_id.json()
    # The fixture's first level ran at 1 request/s, the plan's rate.
    assert out["level_index"] == 0
    metrics = {m["name"]: m for m in out["metrics"]}
    # Read off the fixture: p50 TTFT 29 ms, p95 34 ms, p99 36 ms; p95 TPOT 6.3 ms; 0.8 req/s.
    assert metrics["ttft_s.p50"]["measured"] == pytest.approx(0.029)
    assert metrics["ttft_s.p95"]["measured"] == pytest.approx(0.034)
    assert metrics["ttft_s.p99"]["measured"] == pytest.approx(0.036)
    assert metrics["tpot_s.p95"]["measured"] == pytest.approx(0.0063)
    assert metrics["itl_s.p50"]["measured"] == pytest.approx(0.0059)
    assert metrics["throughput_requests_per_s"]["measured"] == pytest.approx(0.8)
    best = saved["plans"][0]
    predicted = best[best["decided_by"]]
    assert metrics["ttft_s.p95"]["predicted"] == predicted["ttft_p95_s"]
    ttft = metrics["ttft_s.p50"]
    assert ttft["ratio"] == pytest.approx(0.029 / ttft["predicted"])
    band = ttft["interval"]
    assert band["low"] < ttft["predicted"] < band["high"]
    assert ttft["within_interval"] == (band["low"] <= 0.029 <= band["high"])
    # SLO: TTFT p95 34 ms <= 500 ms, TPOT p95 6.3 ms <= 50 ms, no failures: held.
    assert out["slo"]["held"] is True
    assert {c["name"] for c in out["slo"]["checks"]} == {
        "ttft_s.p95",
        "tpot_s.p95",
        "max_failure_rate",
    }
    inline = client.post(
        f"/v1/plans/{plan_id}/verify",
        json={"benchmark": bench.model_dump(mode="json"), "level_index": 1},
    )
    assert inline.status_code == 200, inline.text
    # Level 1: 1 of 4 requests failed, over the zero failure budget.
    assert inline.json()["benchmark_source"] == "inline"
    assert inline.json()["slo"]["held"] is False


@pytest.mark.parametrize(
    ("body", "pointers"),
    [
        ({}, {"/measurement_id", "/benchmark"}),
        ({"measurement_id": 999}, {"/measurement_id"}),
        ({"measurement_id": 1, "benchmark_index": -1}, {"/benchmark_index"}),
        ({"measurement_id": 1, "rank": 5}, {"/rank"}),
        ({"benchmark": {"model": "m", "levels": []}}, {"/benchmark/levels"}),
    ],
)
def test_bad_verify_requests_are_422_naming_the_field(
    client: TestClient, create_key: Callable[..., str], body: dict[str, Any], pointers: set[str]
) -> None:
    saved = _save(client, create_key(Scope.PLANS_WRITE), BODY | {"verify_top": 0})
    response = client.post(f"/v1/plans/{saved['plan_id']}/verify", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert pointers <= {e["pointer"] for e in response.json()["errors"]}


def test_a_profile_price_wins_over_the_sheet_and_the_request_over_both(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    admin = bearer(create_key(Scope.ADMIN))
    etag = client.get("/v1/hardware/h100-sxm").headers["etag"]
    price = {"per_gpu_hour": 2.25, "as_of": "2026-11-30", "source": "our contract"}
    patched = client.patch(
        "/v1/hardware/h100-sxm", json={"price": price}, headers={**admin, "If-Match": etag}
    )
    assert patched.status_code == 200, patched.text
    body = BODY | {"verify_top": 0}
    out = client.post("/v1/sizing", json=body).json()
    assert out["plans"][0]["price_per_gpu_hour"] == 2.25
    assert out["plans"][0]["price_source"] == {
        "origin": "profile",
        "provider": None,
        "source_url": "our contract",
        "as_of": "2026-11-30",
    }
    assert out["prices_as_of"] == "2026-11-30"
    request = client.post("/v1/sizing", json=body | {"prices": {"h100-sxm": 1.5}}).json()
    assert request["plans"][0]["price_per_gpu_hour"] == 1.5
    assert request["plans"][0]["price_source"]["origin"] == "request"


def test_a_disaggregated_plan_gets_a_service_and_deployment_per_pool(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    body = BODY | {
        "traffic": {"rate_per_s": 10.0, "input_tokens": 4096, "output_tokens": 256},
        "slo": {"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.03}},
        "candidates": BODY["candidates"] | {"disaggregation": True, "max_gpus": 16},
        "verify_top": 0,
    }
    saved = _save(client, create_key(Scope.PLANS_WRITE), body)
    plan = next(p for p in saved["plans"] if p["kind"] == "disaggregated")
    out = client.get(f"/v1/plans/{saved['plan_id']}/manifests", params={"rank": plan["rank"]})
    assert out.status_code == 200, out.text
    objects = out.json()["kubernetes"]
    assert [o["kind"] for o in objects] == ["Service", "Deployment"] * 2
    for obj in objects:
        assert _errors(SERVICE if obj["kind"] == "Service" else DEPLOYMENT, obj) == []
    prefill, decode = objects[1], objects[3]
    assert prefill["metadata"]["name"].endswith("-prefill")
    assert decode["metadata"]["name"].endswith("-decode")
    assert prefill["spec"]["replicas"] == plan["prefill_replicas"]
    assert decode["spec"]["replicas"] == plan["decode_replicas"]
    args = decode["spec"]["template"]["spec"]["containers"][0]["args"]
    assert (
        args[: len(plan["decode_engine_args"]["vllm"]) - 1]
        == plan["decode_engine_args"]["vllm"][1:]
    )
    assert "proxy" in out.json()["notes"][0]


def test_sizing_returns_the_manifests_on_request_as_the_get_route_does(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    body = BODY | {"verify_top": 0}
    plain = client.post("/v1/sizing", json=body)
    assert plain.status_code == 200, plain.text
    assert plain.json()["manifests"] is None
    response = client.post(
        "/v1/sizing",
        params={"save": "true", "manifests": "true"},
        json=body,
        headers=bearer(create_key(Scope.PLANS_WRITE)),
    )
    assert response.status_code == 201, response.text
    out = response.json()
    assert [m["rank"] for m in out["manifests"]] == [p["rank"] for p in out["plans"]]
    # The same generation as GET /v1/plans/{id}/manifests: identical objects and job.
    got = client.get(f"/v1/plans/{out['plan_id']}/manifests", params={"rank": 1}).json()
    assert out["manifests"][0] == got
    # The stored answer does not carry them.
    stored = client.get(f"/v1/plans/{out['plan_id']}").json()
    assert stored["answer"]["manifests"] is None


def test_a_trtllm_plan_carries_its_options_file_as_a_config_map(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    body = BODY | {"verify_top": 0, "candidates": BODY["candidates"] | {"engines": ["trtllm"]}}
    saved = _save(client, create_key(Scope.PLANS_WRITE), body)
    best = saved["plans"][0]
    assert best["engine"] == "trtllm"
    (command,) = best["launch"]["commands"]
    (planned,) = command["files"]
    out = client.get(f"/v1/plans/{saved['plan_id']}/manifests").json()
    cm, service, deployment = out["kubernetes"]
    assert _errors(CONFIG_MAP, cm) == []
    assert _errors(SERVICE, service) == []
    assert _errors(DEPLOYMENT, deployment) == []
    assert cm["data"] == {planned["path"]: planned["content"]}
    engine = deployment["spec"]["template"]["spec"]["containers"][0]
    args = engine["args"]
    mount = next(m for m in engine["volumeMounts"] if m["name"] == "config")
    assert args[args.index("--extra_llm_api_options") + 1] == (
        f"{mount['mountPath']}/{planned['path']}"
    )
    # llm-d's chart runs vLLM only: no values, the reason in the notes.
    assert out["llmd_values"] is None
    assert any("runs vLLM" in n for n in out["notes"])


def test_verify_answers_are_stored_and_feed_the_accuracy_report(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.PLANS_WRITE)
    saved = _save(client, key)
    plan_id = saved["plan_id"]
    bench = ingest_files([FIXTURE], "vllm-bench", model="meta-llama/Llama-3.1-8B")
    body = {"benchmark": bench.model_dump(mode="json")}
    auth = {"Authorization": f"Bearer {key}"}
    # Without a plans:write key the comparison is answered but not stored.
    anonymous = client.post(f"/v1/plans/{plan_id}/verify", json=body | {"level_index": 0})
    assert anonymous.status_code == 200, anonymous.text
    assert anonymous.json()["verification_id"] is None
    url = f"/v1/plans/{plan_id}/verify"
    first = client.post(url, json=body | {"level_index": 0}, headers=auth).json()
    second = client.post(url, json=body | {"level_index": 1}, headers=auth).json()
    assert first["verification_id"] < second["verification_id"]
    listed = client.get(f"/v1/plans/{plan_id}/verifications")
    assert listed.status_code == 200, listed.text
    assert listed.json()["items"] == [first, second]
    assert client.get("/v1/plans/pln_missing/verifications").status_code == 404
    best = saved["plans"][0]
    report = client.get("/v1/accuracy", params={"engine": "vllm", "hardware": best["hardware"]})
    assert report.status_code == 200, report.text
    (group,) = report.json()["items"]
    assert (group["engine"], group["verifications"]) == ("vllm", 2)
    metrics = {m["metric"]: m for m in group["metrics"]}
    # The fixture's levels measured TTFT p50 29 ms and 200 ms against one prediction: the
    # median of two ratios is their mean; MAPE divides by the measured value.
    p = best[best["decided_by"]]["ttft_p50_s"]
    assert metrics["ttft_s.p50"]["count"] == 2
    assert metrics["ttft_s.p50"]["median_ratio"] == pytest.approx((0.029 / p + 0.2 / p) / 2)
    ape = abs(0.029 - p) / 0.029 + abs(0.2 - p) / 0.2
    assert metrics["ttft_s.p50"]["mape_percent"] == pytest.approx(100 * ape / 2)
    # Level 0: TPOT p50 6 ms (read off the fixture).
    q = best[best["decided_by"]]["tpot_p50_s"]
    tpot = [
        m["measured"] for v in (first, second) for m in v["metrics"] if m["name"] == "tpot_s.p50"
    ]
    assert tpot[0] == pytest.approx(0.006)
    ratios = sorted(t / q for t in tpot)
    assert metrics["tpot_s.p50"]["median_ratio"] == pytest.approx(sum(ratios) / 2)
    other = client.get("/v1/accuracy", params={"engine": "sglang"}).json()
    assert other["items"] == []
    assert any("not recalibrated" in n for n in other["notes"])
    bad = client.get("/v1/accuracy", params={"engine": "Bad Engine"})
    assert bad.status_code == 422
    assert "/engine" in {e["pointer"] for e in bad.json()["errors"]}
