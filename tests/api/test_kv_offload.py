"""KV offload through /v1/memory: the host tier's capacity worked by hand, per engine, and the
refusals that name their field.

Llama-3.1-8B holds ``2 · 32 layers · 8 KV heads · 128 · 2 B = 131,072 B`` of KV per token on
one GPU (65,536 B at TP 2). A 16-token vLLM block is 2 MiB (1 MiB at TP 2).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

MODEL = "meta-llama/Llama-3.1-8B"
H100 = {
    "name": "H100 SXM",
    "memory_bytes": 80 * 2**30,
    "memory_bandwidth_bytes_per_s": 3_350_000_000_000,
    "peak_tflop_per_s": {"bf16": 989.0, "fp8": 1979.0},
    "host_link_bytes_per_s": 50_000_000_000,
}


def memory(client: TestClient, deployment: dict[str, Any], hardware: Any = None) -> Any:
    body = {"model": MODEL, "hardware": hardware or H100, "deployment": deployment}
    return client.post("/v1/memory", json=body)


@pytest.mark.parametrize(("tp", "block_bytes"), [(1, 2**21), (2, 2**20)])
def test_vllm_size_is_the_replicas_split_over_its_ranks(
    client: TestClient, tp: int, block_bytes: int
) -> None:
    """64 GiB over ``tp`` ranks: ``64 GiB / tp / block_bytes = 32,768`` blocks either way,
    524,288 tokens per GPU; a block loads in ``block_bytes / 50e9`` s."""
    deployment = {"max_model_len": 8192, "tensor_parallel_size": tp, "kv_offload": {"size_gib": 64}}
    response = memory(client, deployment)
    assert response.status_code == 200, response.text
    tier = response.json()["host_kv_tier"]
    assert tier["blocks"] == 32768
    assert tier["tokens"] == 524288
    assert tier["block_bytes_per_gpu"] == block_bytes
    assert tier["block_load_s"] == pytest.approx(block_bytes / 50e9)
    assert tier["bytes_per_gpu"] == 64 * 2**30 // tp
    applied = {d["field"]: d["value"] for d in response.json()["defaults_applied"]}
    assert applied["kv_offload.backend"] == "native"


def test_sglang_hicache_size_is_gigabytes_per_rank(client: TestClient) -> None:
    """``--hicache-size 100``: ``100e9 // 131,072 = 762,939`` tokens, aligned up to 1-token
    pages as ``(size // 1 + 1) · 1 = 762,940``."""
    deployment = {
        "engine": "sglang",
        "max_model_len": 8192,
        "kv_offload": {"hicache_size_gb": 100},
    }
    response = memory(client, deployment)
    assert response.status_code == 200, response.text
    tier = response.json()["host_kv_tier"]
    assert tier["tokens"] == 762940
    assert tier["bytes_per_gpu"] == 762940 * 131072


def test_sglang_default_ratio_doubles_the_device_pool(client: TestClient) -> None:
    deployment = {"engine": "sglang", "max_model_len": 8192, "kv_offload": {}}
    response = memory(client, deployment)
    assert response.status_code == 200, response.text
    body = response.json()
    device = body["kv_capacity_tokens"]
    assert body["host_kv_tier"]["tokens"] == 2 * device + 1
    assert body["host_kv_tier"]["cacheable_tokens"] == 2 * device + 1


def test_without_offload_there_is_no_host_tier(client: TestClient) -> None:
    response = memory(client, {"max_model_len": 8192})
    assert response.status_code == 200, response.text
    assert response.json()["host_kv_tier"] is None


def test_host_link_default_is_pcie_gen4_without_a_profile_figure(client: TestClient) -> None:
    hardware = {k: v for k, v in H100.items() if k != "host_link_bytes_per_s"}
    response = memory(client, {"max_model_len": 8192, "kv_offload": {"size_gib": 8}}, hardware)
    tier = response.json()["host_kv_tier"]
    assert tier["host_link_bytes_per_s"] == 25_000_000_000


@pytest.mark.parametrize(
    ("deployment", "pointer"),
    [
        (
            {"engine": "trtllm", "kv_offload": {"size_gib": 8}},
            "/deployment/kv_offload/host_cache_size_bytes",
        ),
        ({"kv_offload": {"hicache_ratio": 2.0}}, "/deployment/kv_offload/size_gib"),
        (
            {"kv_offload": {"size_gib": 8, "hicache_ratio": 2.0}},
            "/deployment/kv_offload/hicache_ratio",
        ),
        ({"engine_version": "0.11.0", "kv_offload": {"size_gib": 8}}, "/deployment/kv_offload"),
        ({"engine": "sglang", "kv_offload": {"size_gib": 8}}, "/deployment/kv_offload/size_gib"),
        (
            {"engine": "sglang", "enable_prefix_caching": False, "kv_offload": {}},
            "/deployment/kv_offload",
        ),
        ({"kv_offload": {"size_gib": -1}}, "/deployment/kv_offload/size_gib"),
    ],
)
def test_offload_the_engine_lacks_is_a_422_at_its_field(
    client: TestClient, deployment: dict[str, Any], pointer: str
) -> None:
    response = memory(client, {"max_model_len": 8192} | deployment)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    pointers = [e["pointer"] for e in response.json()["errors"]]
    assert pointer in pointers, pointers


def test_stored_profiles_carry_their_host_link(client: TestClient) -> None:
    """The H100 SXM datasheet names PCIe Gen5 x16: 50 GB/s per direction achieved, so a
    2 MiB block loads in ``2^21 / 5e10`` s; GB200 loads over NVLink-C2C at 450 GB/s."""
    response = memory(client, {"max_model_len": 8192, "kv_offload": {"size_gib": 8}}, "h100-sxm")
    assert response.status_code == 200, response.text
    tier = response.json()["host_kv_tier"]
    assert tier["host_link_bytes_per_s"] == 50_000_000_000
    assert tier["block_load_s"] == pytest.approx(2**21 / 5e10)
    profile = client.get("/v1/hardware/gb200").json()
    assert profile["host_link_bytes_per_s"] == 450_000_000_000
    assert profile["host_link_default"] is False


def test_performance_with_a_host_tier_finds_every_prefix(client: TestClient) -> None:
    """The README example: 64 prefixes of 8,192 tokens (524,288 tokens) beside a GPU pool of
    about 431,000 tokens; a 256 GiB host tier (2,097,152 tokens) holds them all, so every
    prefix is found (``⌊8192/16⌋ · 16 = 8,192`` tokens) and what the GPU misses loads at
    ``host tokens / 16 · 2^21 / 5e10`` s."""
    workload = {
        "concurrency": 16,
        "input_tokens": 9000,
        "output_tokens": 200,
        "prefix": {"shared_prefix_tokens": 8192, "num_prefixes": 64},
    }

    def perf(deployment: dict[str, Any]) -> Any:
        body = {"model": MODEL, "hardware": "h100-sxm", "workload": workload}
        response = client.post("/v1/performance", json=body | {"deployment": deployment})
        assert response.status_code == 200, response.text
        return response.json()

    plain = perf({"max_model_len": 16384})
    offload = perf({"max_model_len": 16384, "kv_offload": {"size_gib": 256}})
    cache = offload["prefix_cache"]
    assert cache["hit_tokens_per_request"] == pytest.approx(8192.0, rel=1e-9)
    assert plain["prefix_cache"]["hit_tokens_per_request"] < 8192.0
    assert cache["host_hit_tokens_per_request"] == pytest.approx(
        8192.0 - plain["prefix_cache"]["hit_tokens_per_request"], rel=1e-6
    )
    assert cache["host_load_s"] == pytest.approx(
        cache["host_hit_tokens_per_request"] / 16 * 2**21 / 5e10, rel=1e-9
    )
    assert offload["ttft_s"] < plain["ttft_s"]


def test_simulated_host_hits_of_identical_prompts_without_gpu_caching(client: TestClient) -> None:
    """GPU prefix caching off, as the vLLM blog measured: 512-token identical prompts at a light
    load; after the warm-up every measured request loads ``⌊511/16⌋ · 16 = 496`` tokens from the
    host tier (the prefill chunks are written through as they are scheduled)."""
    traffic = {
        "mode": "open_loop",
        "arrival": {"process": "poisson", "rate_per_s": 2.0},
        "input_tokens": 512,
        "output_tokens": 16,
        "num_requests": 60,
        "warmup_requests": 1,
        "seed": 1,
        "prefix": {"shared_prefix_tokens": 512},
    }
    deployment = {"enable_prefix_caching": False, "kv_offload": {"size_gib": 16}}
    body = {"model": MODEL, "hardware": "h100-sxm", "deployment": deployment, "traffic": traffic}
    response = client.post("/v1/simulate", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["prefix_cache_hit_rate"] is None
    assert result["host_kv_hit_rate"] == pytest.approx(496 / 512, abs=1e-12)
    plain = client.post(
        "/v1/simulate", json=body | {"deployment": {"enable_prefix_caching": False}}
    )
    assert plain.json()["host_kv_hit_rate"] is None
    assert result["ttft_s"]["p50"] < plain.json()["ttft_s"]["p50"]
