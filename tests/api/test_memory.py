"""/v1/memory and /v1/kv-budget against published vLLM logs and hand-worked numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

GIB = 2**30
MODELS_DIR = Path(__file__).resolve().parents[2] / "servesize" / "data" / "models"


def plan(client: TestClient, **body: Any) -> Any:
    payload = {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"} | body
    return client.post("/v1/memory", json=payload)


def test_llama_8b_on_h100_matches_the_vllm_log(client: TestClient) -> None:
    """vLLM on one H100 SXM, default arguments, max_model_len 16000, as logged in
    llm-d/llm-d-benchmark:config_explorer/empirical-vllm-memory-results.md: "Model loading
    took 14.99 GiB" and "Available KV cache memory: 51.38 GiB"."""
    response = plan(client, deployment={"engine_version": "0.10.1", "max_model_len": 16000})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["fits"] is True
    assert body["weights_bytes_per_gpu"] / GIB == pytest.approx(14.99, rel=0.01)
    assert body["kv_available_bytes_per_gpu"] / GIB == pytest.approx(51.38, rel=0.02)
    # 2 (K, V) · 32 layers · 8 KV heads · 128 · 2 B
    assert body["kv_bytes_per_token_per_gpu"] == 131_072
    assert body["kv_capacity_tokens"] == body["kv_blocks"] * 16
    for item in body["line_items"]:
        assert item["formula"]
        assert isinstance(item["bytes_per_gpu"], int)
    assert "gpu_memory_utilization" in {d["field"] for d in body["defaults_applied"]}


def test_tensor_parallel_halves_the_weights(client: TestClient) -> None:
    one = plan(client).json()["weights_bytes_per_gpu"]
    two = plan(client, deployment={"tensor_parallel_size": 2}).json()["weights_bytes_per_gpu"]
    # Everything is split in two except the replicated norms (32·2·4096 + 4096 elements,
    # 2 B each) and the RoPE cache, which every rank holds in full.
    assert two < one / 2 * 1.01
    assert two > one / 2


def test_inline_hardware_and_model(client: TestClient) -> None:
    config = json.loads((MODELS_DIR / "meta-llama--Llama-3.1-8B.json").read_text())
    hardware = {"memory_bytes": 24 * GIB, "memory_bandwidth_bytes_per_s": 300 * 10**9}
    body = plan(client, model={"hf_config": config}, hardware=hardware).json()
    assert body["hardware"] == "inline"
    assert body["weights_bytes_per_gpu"] > 14 * GIB


def test_a_model_that_does_not_fit_says_why(client: TestClient) -> None:
    body = plan(client, model="meta-llama/Llama-3.1-70B", hardware="l40s").json()
    assert body["fits"] is False
    assert body["reasons"]
    assert body["suggestions"]["smallest_tensor_parallel_size"] is not None


@pytest.mark.parametrize(
    ("deployment", "pointer"),
    [
        ({"tensor_parallel_size": 3}, "/deployment/tensor_parallel_size"),
        ({"tensor_parallel_size": 64}, "/deployment/tensor_parallel_size"),  # 32 heads
        ({"max_model_len": 10_000_000}, "/deployment/max_model_len"),
        (
            {"enable_expert_parallel": True, "tensor_parallel_size": 2},
            "/deployment/enable_expert_parallel",
        ),
        ({"mxfp4_backend": "marlin"}, "/deployment/mxfp4_backend"),  # Llama has no MXFP4
    ],
)
def test_impossible_deployments_are_precise_422s(
    client: TestClient, deployment: dict[str, Any], pointer: str
) -> None:
    response = plan(client, deployment=deployment)
    assert response.status_code == 422
    assert response.json()["type"].endswith("invalid-deployment")
    assert pointer in {e["pointer"] for e in response.json()["errors"]}


def test_gpt_oss_on_an_a100_loads_through_marlin(client: TestClient) -> None:
    # No FP8 tensor cores: vLLM's get_mxfp4_backend takes Marlin, which pads each expert from
    # 2880 x 2880 to 2944 x 3072: 1,195,264 B more per expert (hand-worked in
    # tests/core/memory/test_mem_mxfp4_backend.py) · 36 layers · 128 experts.
    body = plan(client, model="openai/gpt-oss-120b", hardware="a100-sxm-80gb", deployment={}).json()
    applied = {d["field"]: d["value"] for d in body["defaults_applied"]}
    assert applied["mxfp4_backend"] == "marlin"
    padding = [i for i in body["line_items"] if i["name"] == "weights: MXFP4 Marlin padding (vLLM)"]
    assert [i["bytes_per_gpu"] for i in padding] == [5_507_776_512]


def test_schema_errors_point_at_the_field(client: TestClient) -> None:
    response = plan(client, deployment={"gpu_memory_utilization": 1.5, "engine": "tgi"})
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert {"/deployment/gpu_memory_utilization", "/deployment/engine"} <= pointers


def test_unknown_hardware_is_404(client: TestClient) -> None:
    assert plan(client, hardware="tpu-v9").status_code == 404


def test_inline_model_errors_point_into_the_request(client: TestClient) -> None:
    response = plan(client, model={"hf_config": {"model_type": "llama", "hidden_size": 64}})
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert "/model/hf_config/num_hidden_layers" in pointers


def test_kv_budget_reproduces_the_seed(client: TestClient) -> None:
    # The seed: 32 layers, 8 KV heads, dim 128, 4096 tokens, 4 sequences, fp16 → 2 GiB.
    geometry = {"num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "bytes_per_element": 2}
    bytes_for = client.post(
        "/v1/kv-budget", json=geometry | {"concurrency": 4, "tokens_per_sequence": 4096}
    ).json()
    assert bytes_for["kv_bytes"] == 2 * GIB
    tokens = client.post(
        "/v1/kv-budget", json=geometry | {"concurrency": 4, "memory_bytes": 2 * GIB}
    ).json()
    assert tokens["max_tokens_per_sequence"] == 4096
    sequences = client.post(
        "/v1/kv-budget", json=geometry | {"tokens_per_sequence": 4096, "memory_bytes": 2 * GIB}
    ).json()
    assert sequences["max_concurrency"] == 4


def test_kv_budget_from_a_model(client: TestClient) -> None:
    body = client.post(
        "/v1/kv-budget",
        json={"model": "meta-llama/Llama-3.1-8B", "concurrency": 1, "tokens_per_sequence": 1000},
    ).json()
    assert body["kv_bytes"] == 1000 * 131_072


def test_kv_budget_needs_exactly_two_of_three(client: TestClient) -> None:
    response = client.post(
        "/v1/kv-budget",
        json={
            "num_layers": 32,
            "num_kv_heads": 8,
            "head_dim": 128,
            "bytes_per_element": 2,
            "concurrency": 4,
        },
    )
    assert response.status_code == 422
    assert "/tokens_per_sequence" in {e["pointer"] for e in response.json()["errors"]}
