"""/v1/sizing on both database backends: a ranked, costed, verified plan; 422s with pointers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.api.sizing_cache import SizingCache, sizing_key
from servesize.core.sizing import default_max_model_len
from servesize.schemas.sizing import SizingResponse
from servesize.security import Scope
from tests.api.test_hardware import bearer, h100_upload, upload

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
    response = client.post("/v1/sizing", json=BODY)
    assert response.status_code == 200, response.text
    body = response.json()
    best = body["plans"][0]
    assert best["hardware"] == "a100-sxm-80gb"
    assert best["verified"] is True
    assert best["decided_by"] == "simulation"
    assert best["verification"] == "fleet"
    # The verdict states its confidence: three seeds, an interval on the binding margin.
    [note] = best["notes"]
    assert note.startswith("verified: 3 seeds: binding relative margin")
    assert note.endswith("met")
    assert best["headroom"] == 0.85
    assert best["cost_per_hour"] == best["replicas"] * best["gpus_per_replica"] * 1.0
    assert best["engine_args"]["vllm"][:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    assert best["engine_args"]["sglang"] is None  # only the engine sized for
    assert best["launch"]["engine_version"] == "0.21.0"
    assert best["launch"]["commands"][0]["argv"] == best["engine_args"]["vllm"]
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


def test_an_slo_below_every_zero_load_value_is_a_problem_with_the_best_value(
    client: TestClient,
) -> None:
    body = BODY | {"slo": {"ttft_s": {"p95": 0.001}}}
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"].endswith(":slo-infeasible")
    (error,) = problem["errors"]
    assert error["pointer"] == "/slo/ttft_s/p95"
    assert error["limit"] == 0.001
    # A 512-token prefill of an 8B model is 2 · 8e9 · 512 = 8.2 TFLOP: at least 8 ms at the
    # H100's 989 TFLOP/s dense BF16, slower on the A100 (312 TFLOP/s), so the H100 is closest.
    assert error["zero_load"] > 0.008
    assert error["candidate"].startswith("h100-sxm ")
    assert "no number of replicas helps" in problem["detail"]


def test_plans_empty_for_other_reasons_are_still_explained(client: TestClient) -> None:
    body = BODY | {
        "traffic": {"rate_per_s": 500.0, "input_tokens": 512, "output_tokens": 128},
        "candidates": BODY["candidates"] | {"max_gpus": 2},
    }
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["plans"] == []
    assert {r["reason"] for r in out["rejected"]} == {"over-gpu-limit"}
    assert "Raise max_gpus" in out["explanation"]


@pytest.mark.parametrize(
    ("candidates", "pointer"),
    [
        ({"gpu_memory_utilization": [0]}, "/candidates/gpu_memory_utilization/0"),
        ({"gpu_memory_utilization": [0.9, 1.5]}, "/candidates/gpu_memory_utilization/1"),
        ({"max_num_seqs": [0]}, "/candidates/max_num_seqs/0"),
        ({"kv_cache_dtype": ["auto", "int3"]}, "/candidates/kv_cache_dtype/1"),
        ({"max_model_len": [1e7]}, "/candidates/max_model_len/0"),  # > 131072 positions
        ({"max_num_batched_tokens": [1]}, "/candidates/max_num_batched_tokens/0"),
        (
            {"max_num_seqs": [64, 1024], "max_num_batched_tokens": [8192, 512]},
            "/candidates/max_num_batched_tokens/1",
        ),
        ({"tensor_parallel": [1, 0]}, "/candidates/tensor_parallel/1"),
        ({"hardware": []}, "/candidates/hardware"),
    ],
)
def test_malformed_candidate_values_point_at_the_element(
    client: TestClient, candidates: dict[str, Any], pointer: str
) -> None:
    body = BODY | {"candidates": BODY["candidates"] | candidates}
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 422, response.text
    assert pointer in {e["pointer"] for e in response.json()["errors"]}


def test_too_many_candidates_is_refused_before_any_work(client: TestClient) -> None:
    body = BODY | {
        "candidates": BODY["candidates"]
        | {
            "tensor_parallel": [1, 2, 4, 8],
            "max_num_seqs": [64, 128, 256, 512],
            "max_num_batched_tokens": [1024, 2048, 4096, 8192],
            "gpu_memory_utilization": [0.8, 0.85, 0.9, 0.95],
        }
    }  # 2 GPUs × 4 × 4 × 4 × 4 = 512, × 2 with both KV dtypes = 1024 > 512
    body["candidates"]["kv_cache_dtype"] = ["auto", "fp8"]
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"].endswith(":sizing-too-large")
    assert problem["errors"][0]["pointer"] == "/candidates"
    assert "1024 configurations" in problem["detail"]


def test_a_shared_price_sheet_and_repeated_hardware_are_accepted(client: TestClient) -> None:
    body = BODY | {
        "candidates": BODY["candidates"] | {"hardware": ["a100-sxm-80gb", "a100-sxm-80gb"]},
        "prices": {"a100-sxm-80gb": 1.0, "h100-sxm": 10.0, "l40s": 0.9},
        "verify_top": 0,
    }
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["candidates_evaluated"] == 1  # the repeat counts once
    assert out["plans"][0]["price_per_gpu_hour"] == 1.0
    unknown = client.post("/v1/sizing", json=body | {"prices": {"no-such-gpu": 1.0}})
    assert unknown.status_code == 422
    assert unknown.json()["type"].endswith(":unknown-hardware")
    assert unknown.json()["errors"][0]["pointer"] == "/prices/no-such-gpu"


def test_a_context_below_the_longest_request_is_rejected_with_the_reason(
    client: TestClient,
) -> None:
    body = BODY | {
        "traffic": {"rate_per_s": 8.0, "input_tokens": 1000, "output_tokens": 200},
        "candidates": BODY["candidates"] | {"max_model_len": [512]},
    }
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["plans"] == []
    assert {r["reason"] for r in out["rejected"]} == {"context-too-short"}
    assert "512 < the longest request, 1200 tokens" in out["rejected"][0]["detail"]


def test_a_new_measurement_is_not_answered_from_the_cache(
    client: TestClient,
    make_client: Callable[..., TestClient],
    create_key: Callable[..., str],
) -> None:
    body = BODY | {
        "candidates": BODY["candidates"] | {"hardware": ["h100-sxm"]},
        "prices": {"h100-sxm": 10.0},
        "verify_top": 0,
    }
    before = client.post("/v1/sizing", json=body).json()
    assert client.post("/v1/sizing", json=body).json()["cached"] is True
    # A GEMM upload replaces the shipped bf16 tables (``api.measured``): other step times.
    writer = bearer(create_key(Scope.PROFILES_WRITE))
    stored = upload(client, writer, h100_upload())
    assert stored.status_code == 201, stored.text
    after = client.post("/v1/sizing", json=body).json()
    assert after["cached"] is False
    rate = "max_rate_per_replica_per_s"
    assert after["plans"][0][rate] != before["plans"][0][rate]
    # The same answer a server that never saw the first request computes.
    fresh = make_client().post("/v1/sizing", json=body).json()
    assert fresh["cached"] is False
    assert after["plans"] == fresh["plans"]


def test_the_cache_keeps_the_most_recently_used_answers() -> None:
    cache = SizingCache(entries=2)
    answers = {
        key: SizingResponse(
            model=key,
            target_rate_per_s=1.0,
            headroom=0.85,
            plans=[],
            plans_found=0,
            explanation="",
            rejected=[],
            candidates_evaluated=0,
            simulations=0,
            simulated_requests=0,
            elapsed_s=0.0,
            cached=False,
            warnings=[],
        )
        for key in ("a", "b", "c")
    }
    cache.put("a", answers["a"])
    cache.put("b", answers["b"])
    hit = cache.get("a")  # now the most recent: "b" goes first
    assert hit is not None
    assert hit.cached is True
    assert answers["a"].cached is False  # the stored answer is not marked
    cache.put("c", answers["c"])
    assert cache.get("b") is None
    assert len(cache) == 2
    assert sizing_key(x=1, y=[2]) == sizing_key(y=[2], x=1) != sizing_key(x=1, y=[3])


def test_a_disaggregated_sglang_plan_carries_both_pools_and_the_router(client: TestClient) -> None:
    body = BODY | {
        "candidates": BODY["candidates"]
        | {"hardware": ["h100-sxm"], "engines": ["sglang"], "disaggregation": True},
        "verify_top": 0,
    }
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 200, response.text
    (pd,) = [p for p in response.json()["plans"] if p["kind"] == "disaggregated"]
    assert pd["engine_args"]["vllm"] is None
    prefill, decode = pd["engine_args"]["sglang"], pd["decode_engine_args"]["sglang"]
    assert prefill[prefill.index("--disaggregation-mode") + 1] == "prefill"
    assert decode[decode.index("--disaggregation-mode") + 1] == "decode"
    roles = [c["role"] for c in pd["launch"]["commands"]]
    assert roles == ["prefill", "decode", "router"]
    router = pd["launch"]["commands"][2]["command"]
    assert "--pd-disaggregation --prefill http://$PREFILL_ADDR:30000 8998" in router
    assert set(pd["launch"]["placeholders"]) == {"$PREFILL_ADDR", "$DECODE_ADDR"}
