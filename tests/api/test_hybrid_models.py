"""Pasted hybrid and state-space configs through /v1/memory, /v1/performance and /v1/simulate.

Hand-derived pool geometry (vLLM v1: ``MambaSpec`` pages, attention block size from
``HybridAttentionMambaModelConfig.verify_and_update_config``, groups from
``_get_kv_cache_groups_uniform_page_size``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

MODELS_DIR = Path(__file__).resolve().parents[2] / "servesize" / "data" / "models"


def _config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MODELS_DIR / f"{name}.json").read_text())
    return data


def _memory(client: TestClient, config: dict[str, Any], **deployment: Any) -> Any:
    body = {"model": {"hf_config": config}, "hardware": "h100-sxm", "deployment": deployment}
    return client.post("/v1/memory", json=body)


def test_jamba_pool_holds_only_attention_kv_plus_a_fixed_state(client: TestClient) -> None:
    """Jamba 1.5 Mini at TP=2, bf16, max_model_len 32768.

    Attention, per layer and token per GPU: 2 * (8/2) * 128 * 2 B = 2,048 B; 4 layers = 8,192.
    Mamba-1 state per layer per GPU: conv 3 * 4096 + SSM 4096 * 16 = 77,824 elements = 155,648 B.
    Block size 16 * cdiv(155,648, 16 * 2,048) = 80 tokens; page 80 * 2,048 = 163,840 B.
    Groups: 4 attention vs 28 Mamba layers, 28 >= 1.5 * 4, so 4 layers per group: 1 + 7.
    A 32768-token request: cdiv(32768, 80) = 410 attention blocks + 7 state blocks = 417.
    """
    response = _memory(
        client,
        _config("ai21labs--AI21-Jamba-1.5-Mini"),
        tensor_parallel_size=2,
        max_model_len=32768,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["kv_bytes_per_token_per_gpu"] == 8_192
    assert body["kv_block_size"] == 80
    assert body["kv_cache_bytes_per_gpu"] == body["kv_blocks"] * 163_840 * 4
    assert body["max_concurrency"] == body["kv_blocks"] / 417
    state = [i for i in body["line_items"] if i["name"] == "KV state per sequence: mamba"]
    assert len(state) == 1
    assert state[0]["bytes_per_gpu"] == 28 * 155_648


def test_pure_mamba_concurrency_is_constant_in_context_length(client: TestClient) -> None:
    """mamba2-2.7b, fp16, TP=1: one state page per layer per request of 3 * 5376 + 80 * 64 * 128
    = 671,488 elements = 1,342,976 B; the 64 layers form one group, so a request holds one block
    of 64 pages whatever its length and concurrency = blocks."""
    config = _config("state-spaces--mamba2-2.7b")
    short = _memory(client, config, max_model_len=2048).json()
    long = _memory(client, config, max_model_len=65536).json()
    for body in (short, long):
        assert body["kv_bytes_per_token_per_gpu"] == 0
        assert body["kv_blocks"] == body["kv_available_bytes_per_gpu"] // 1_342_976 // 64
        assert body["max_concurrency"] == body["kv_blocks"]
        assert body["request_kv_bytes"] == 64 * 1_342_976
    assert short["max_concurrency"] == long["max_concurrency"]


def test_unknown_hybrid_family_is_a_422_naming_the_fields(client: TestClient) -> None:
    config = {
        "model_type": "zamba2",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
        "mamba_d_state": 16,
        "hybrid_layer_ids": [1],
    }
    response = _memory(client, config)
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert pointers == {"/model/hf_config/mamba_d_state", "/model/hf_config/hybrid_layer_ids"}


def test_unknown_nemotron_block_is_a_422(client: TestClient) -> None:
    config = _config("nvidia--Nemotron-H-8B-Base-8K")
    config["hybrid_override_pattern"] = "Q" + config["hybrid_override_pattern"][1:]
    response = _memory(client, config)
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert "/model/hf_config/hybrid_override_pattern/0" in pointers


def test_performance_of_a_pure_mamba_decode_reads_weights_and_state(client: TestClient) -> None:
    """Batch-1 decode of mamba2-2.7b cannot beat reading its weights (2,702,599,680 * 2 B) and
    its state twice (2 * 85,950,464 B) at the H100's 3.35 TB/s; 64 sequences read 64 states."""
    config = _config("state-spaces--mamba2-2.7b")
    floor_s = (2_702_599_680 * 2 + 2 * 85_950_464) / 3.35e12
    times = []
    for concurrency in (1, 64):
        response = client.post(
            "/v1/performance",
            json={
                "model": {"hf_config": config},
                "hardware": "h100-sxm",
                "deployment": {"max_model_len": 4096},
                "workload": {"concurrency": concurrency, "input_tokens": 1024, "output_tokens": 16},
            },
        )
        assert response.status_code == 200, response.text
        times.append(response.json()["decode_step_time_s"])
    assert times[0] > floor_s
    assert times[1] > (2_702_599_680 * 2 + 64 * 2 * 85_950_464) / 3.35e12
    assert times[1] > times[0]


def test_simulate_runs_a_hybrid_model(client: TestClient) -> None:
    response = client.post(
        "/v1/simulate",
        json={
            "model": {"hf_config": _config("nvidia--Nemotron-H-8B-Base-8K")},
            "hardware": "h100-sxm",
            "traffic": {
                "mode": "open_loop",
                "arrival": {"process": "poisson", "rate_per_s": 2.0},
                "input_tokens": 512,
                "output_tokens": 32,
                "num_requests": 40,
                "warmup_requests": 5,
                "seed": 3,
            },
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["completed"] == body["measured"] == 35
    assert body["ttft_s"]["p50"] > 0
