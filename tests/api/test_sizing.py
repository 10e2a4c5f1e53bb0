"""/v1/sizing on both database backends: a ranked, costed, verified plan; 422s with pointers."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from service.api.routes.sizing import cache_clear, default_max_model_len

BODY: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "traffic": {"rate_per_s": 8.0, "input_tokens": 512, "output_tokens": 128},
    "slo": {"ttft_s": {"p95": 2.0}, "tpot_s": {"p95": 0.1}},
    "candidates": {
        "hardware": ["h100-sxm", "a100-sxm-80gb"],
        "tensor_parallel": [1],
        "max_num_batched_tokens": [8192],
        "kv_cache_dtype": ["auto"],
    },
    "prices": {"h100-sxm": 10.0, "a100-sxm-80gb": 1.0},
    "verify_top": 1,
}


def test_sizing_ranks_the_cheaper_gpu_first_and_verifies_it(client: TestClient) -> None:
    cache_clear()
    response = client.post("/v1/sizing", json=BODY)
    assert response.status_code == 200, response.text
    body = response.json()
    best = body["plans"][0]
    assert best["hardware"] == "a100-sxm-80gb"
    assert best["verified"] is True
    assert best["decided_by"] == "simulation"
    assert best["headroom"] == 0.85
    assert best["cost_per_hour"] == best["replicas"] * best["gpus_per_replica"] * 1.0
    assert best["engine_args"]["vllm"][:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    assert best["simulation"]["ttft_p95_s"] <= 2.0
    assert body["candidates_evaluated"] == 2
    assert body["cached"] is False
    assert body["explanation"].startswith("Best: a100-sxm-80gb ")
    # The same request again is answered from the cache.
    assert client.post("/v1/sizing", json=BODY).json()["cached"] is True


def test_unknown_hardware_and_bad_input_are_422_with_pointers(client: TestClient) -> None:
    bad = BODY | {"candidates": {"hardware": ["h100-sxm", "no-such-gpu"]}, "prices": {}}
    response = client.post("/v1/sizing", json=bad)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"][0]["pointer"] == "/candidates/hardware/1"
    response = client.post(
        "/v1/sizing", json=BODY | {"slo": {}, "headroom": 1.5, "traffic": {"rate_per_s": 0}}
    )
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert {"/slo", "/headroom", "/traffic/rate_per_s"} <= pointers


def test_default_max_model_len_holds_the_longest_request() -> None:
    assert default_max_model_len(512, 128) == 2048
    assert default_max_model_len(3000, 1200) == 8192  # 4200 → next power of two


def test_an_slo_below_every_zero_load_value_is_explained(client: TestClient) -> None:
    cache_clear()
    body = BODY | {"slo": {"ttft_s": {"p95": 0.001}}}
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["plans"] == []
    assert {r["reason"] for r in out["rejected"]} == {"infeasible-at-zero-load"}
    assert "no number of replicas can meet it" in out["explanation"]
