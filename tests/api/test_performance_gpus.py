"""/v1/performance on a GPU without measurements: the H100 tables scaled to it, or the
datasheet roofline when measurements are turned off."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

# Llama-3.1-8B bf16 weights, 16.06 GB, at the H200's 4.8 TB/s: 3.35 ms per decode step at
# the least; the H100 needs 4.79 ms for the same read.
LLAMA_8B_WEIGHT_BYTES = 8_030_261_248 * 2


def perf(client: TestClient, **body: Any) -> Any:
    payload = {
        "model": "meta-llama/Llama-3.1-8B",
        "hardware": "h200-sxm",
        "workload": {"concurrency": 1, "input_tokens": 128, "output_tokens": 64},
    } | body
    response = client.post("/v1/performance", json=payload)
    assert response.status_code == 200, response.text
    return response.json()


def test_scaled_h100_tables_are_the_default(client: TestClient) -> None:
    sources = perf(client)["sources"]
    assert sources["gemm"].startswith("measured")
    assert "scaled H100 SXM → H200 SXM" in sources["gemm"]
    assert "scaled H100 SXM → H200 SXM" in sources["attention_decode"]
    roofline = perf(client, use_measurements=False)["sources"]
    assert roofline["gemm"].startswith("default")


def test_h200_decode_is_faster_than_h100_and_above_its_bandwidth_bound(
    client: TestClient,
) -> None:
    h200 = perf(client)["decode_step_time_s"]
    h100 = perf(client, hardware="h100-sxm")["decode_step_time_s"]
    assert LLAMA_8B_WEIGHT_BYTES / 4.8e12 < h200 < h100


def test_an_inline_gpu_gets_the_scaled_tables_too(client: TestClient) -> None:
    hardware = {
        "name": "Lab GPU",
        "memory_bytes": 96 * 2**30,
        "memory_bandwidth_bytes_per_s": 4_000_000_000_000,
        "peak_tflop_per_s": {"bf16": 900.0},
    }
    sources = perf(client, hardware=hardware)["sources"]
    assert "scaled H100 SXM → Lab GPU" in sources["gemm"]
    # no FP8 peak on this GPU: only the bf16 tables carry over
    assert "fp8" not in sources["gemm"]
