"""/v1/memory returns the start-up lines vLLM would print, by release."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient


def plan(client: TestClient, **deployment: Any) -> Any:
    payload = {
        "model": "openai/gpt-oss-20b",
        "hardware": "h100-sxm",
        "deployment": {"max_model_len": 131072} | deployment,
    }
    return client.post("/v1/memory", json=payload)


def test_v1_lines_follow_the_hybrid_pool(client: TestClient) -> None:
    response = plan(client, engine_version="0.11.0")
    assert response.status_code == 200, response.text
    body = response.json()
    log = body["engine_log"]
    assert (
        log[1] == f"Available KV cache memory: {body['kv_available_bytes_per_gpu'] / 2**30:.2f} GiB"
    )
    assert log[2] == f"GPU KV cache size: {body['kv_capacity_tokens']:,} tokens"
    # gpt-oss-20b: 12 full + 12 sliding-window layers, one group each; a 131,072-token request
    # holds 8192 full + 521 sliding blocks (vLLM get_max_concurrency_for_kv_cache_config).
    assert log[3] == (
        f"Maximum concurrency for 131,072 tokens per request: {body['kv_blocks'] / 8713:.2f}x"
    )
    assert body["kv_capacity_tokens"] == body["kv_blocks"] // 2 * 16


def test_v0_lines(client: TestClient) -> None:
    body = plan(client, engine_version="0.6.4").json()
    blocks = body["kv_blocks"]
    assert (
        f"Maximum concurrency for 131072 tokens per request: {blocks * 16 / 131072:.2f}x"
        in (body["engine_log"])
    )
    assert body["engine_log"][0].startswith("Loading model weights took ")
    assert body["engine_log"][1].startswith("Memory profiling results: total_gpu_memory=")


def test_other_engines_have_no_vllm_lines(client: TestClient) -> None:
    assert plan(client, engine="sglang").json()["engine_log"] == []


@pytest.mark.parametrize("version", ["0.5.4", "v0.5.9", "nightly"])
def test_unmodelled_versions_are_422_on_the_field(client: TestClient, version: str) -> None:
    response = plan(client, engine_version=version)
    assert response.status_code == 422
    assert "/deployment/engine_version" in {e["pointer"] for e in response.json()["errors"]}
