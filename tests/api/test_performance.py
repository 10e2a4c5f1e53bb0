"""/v1/performance: roofline sanity worked by hand, measured data in, clear refusals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.security import Scope

# Llama-3.1-8B in bf16: 8,030,261,248 parameters · 2 B = 16.06 GB of weights (+ a 32 MiB RoPE
# cache), read once per decode step. At the H100 SXM's 3.35 TB/s that is 4.79 ms: no decode
# step can be faster.
LLAMA_8B_WEIGHT_READ_S = 8_030_261_248 * 2 / 3.35e12


def perf(client: TestClient, **body: Any) -> Any:
    payload = {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"} | body
    return client.post("/v1/performance", json=payload)


def test_batch_one_decode_is_bound_by_reading_the_weights(client: TestClient) -> None:
    response = perf(client, workload={"concurrency": 1, "input_tokens": 128, "output_tokens": 64})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["bound"]["decode"] == "memory"
    # Lower bound: the weight read at full bandwidth. Upper: at 70 % of it, plus 3 ms of
    # per-step CPU and launch overhead.
    assert LLAMA_8B_WEIGHT_READ_S < body["decode_step_time_s"] < LLAMA_8B_WEIGHT_READ_S / 0.7 + 3e-3
    assert body["tpot_s"] == pytest.approx(body["decode_step_time_s"], rel=0.1)
    assert body["e2e_s"] == pytest.approx(body["ttft_s"] + 63 * body["tpot_s"])


def test_long_prefill_is_compute_bound(client: TestClient) -> None:
    body = perf(
        client, workload={"concurrency": 1, "input_tokens": 8192, "output_tokens": 2}
    ).json()
    assert body["bound"]["prefill"] == "compute"
    # 2 · 8.03e9 FLOPs per token · 8192 tokens at the 989 TFLOP/s bf16 peak = 0.133 s at least.
    assert body["prefill_time_s"] > 2 * 8_030_261_248 * 8192 / 989e12
    # The ridge point of an H100 in bf16: 989e12 / 3.35e12 = 295 FLOPs per byte.
    assert body["ridge_point_flops_per_byte"] == pytest.approx(989e12 / 3.35e12, rel=0.35)


def test_more_clients_raise_throughput_and_tpot(client: TestClient) -> None:
    one = perf(client, workload={"concurrency": 1}).json()
    many = perf(client, workload={"concurrency": 64}).json()
    assert many["throughput_output_tokens_per_s"] > 10 * one["throughput_output_tokens_per_s"]
    assert many["tpot_s"] > one["tpot_s"]


def test_sources_say_what_was_measured(client: TestClient) -> None:
    measured = perf(client).json()["sources"]
    assert measured["gemm"].startswith("measured")
    roofline = perf(client, use_measurements=False).json()["sources"]
    assert roofline["gemm"].startswith("default")


def test_uploaded_gemm_table_is_used(client: TestClient, create_key: Callable[..., str]) -> None:
    admin = {"Authorization": f"Bearer {create_key(Scope.ADMIN, name='admin')}"}
    profile = {
        "id": "h100-lab",
        "vendor": "NVIDIA",
        "name": "H100 SXM lab",
        "memory_bytes": 80 * 2**30,
        "memory_bandwidth_bytes_per_s": 3_350_000_000_000,
        "peak_tflop_per_s": {"bf16": 989.0},
        "identity_tokens": ["h100"],
    }
    assert client.post("/v1/hardware", json=profile, headers=admin).status_code == 201
    rows = []
    for m in (1, 16, 256, 4096):
        for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)):
            tflops = min(700.0, 2.5 * m)
            rows.append(
                {
                    "dtype": "bf16",
                    "m": m,
                    "n": n,
                    "k": k,
                    "latency_s": 2 * m * n * k / (tflops * 1e12),
                    "achieved_tflop_per_s": tflops,
                }
            )
    upload = {
        "provenance": {
            "agent_version": "0.1.0",
            "method_version": 1,
            "host": "lab",
            "device": "cuda:0",
            "gpu_name": "NVIDIA H100 80GB HBM3",
            "measured_at": "2026-11-29T10:00:00Z",
        },
        "gemm": rows,
    }
    stored = client.post(
        "/v1/hardware/h100-lab/measurements", json=upload, headers=admin | {"Idempotency-Key": "g1"}
    )
    assert stored.status_code == 201, stored.text
    sources = perf(client, hardware="h100-lab").json()["sources"]
    assert f"measurement:{stored.json()['id']}" in sources["gemm"]


def test_a_model_that_does_not_fit_is_refused_with_the_reason(client: TestClient) -> None:
    response = perf(client, model="meta-llama/Llama-3.1-405B")
    assert response.status_code == 422
    assert response.json()["type"].endswith("insufficient-memory")


def test_workload_is_validated(client: TestClient) -> None:
    response = perf(client, workload={"concurrency": 0, "input_tokens": -1})
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert {"/workload/concurrency", "/workload/input_tokens"} <= pointers
