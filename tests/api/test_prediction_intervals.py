"""Prediction intervals and validated-domain warnings in /v1 responses."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.api.render.uncertainty import _curve_point
from servesize.api.uncertainty import INTERVALS_JSON, uncertainty
from servesize.catalog import ModelCatalog
from servesize.schemas.slo import CurvePointOut
from servesize.settings import Settings

MODEL = "meta-llama/Llama-3.1-8B"
IN_DOMAIN = {"engine": "vllm", "engine_version": "0.12.0"}
NOT_VALIDATED = "the prediction interval was not validated there"


def perf(
    client: TestClient,
    hardware: str = "h100-sxm",
    model: str = MODEL,
    deployment: dict[str, Any] = IN_DOMAIN,
    **workload: int,
) -> Any:
    body = {
        "model": model,
        "hardware": hardware,
        "deployment": deployment,
        "workload": {"concurrency": 8, "input_tokens": 1024, "output_tokens": 256} | workload,
    }
    response = client.post("/v1/performance", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _band(group: str, metric: str) -> tuple[float, float]:
    data = json.loads(INTERVALS_JSON.read_text())
    lo, hi = data["groups"][group]["bands"][metric]["0.8"]
    return math.exp(lo), math.exp(hi)


def test_performance_carries_80_percent_bands_from_the_residual_file(client: TestClient) -> None:
    # Qwen3-32B has held-out vLLM rows: the vllm/dense group's quantiles.
    body = perf(client, model="Qwen/Qwen3-32B", deployment=IN_DOMAIN | {"tensor_parallel_size": 2})
    assert not [w for w in body["warnings"] if NOT_VALIDATED in w or "held-out" in w]
    for field in ("ttft_s", "tpot_s", "e2e_s"):
        band = body[f"{field}_interval"]
        assert band["coverage"] == 0.8
        assert band["basis"].startswith("vllm/dense")
        lo, hi = _band("vllm/dense", field)
        assert band["low"] == pytest.approx(body[field] * lo)
        assert band["high"] == pytest.approx(body[field] * hi)
    # A throughput C / E2E takes the E2E band inverted.
    lo, hi = _band("vllm/dense", "e2e_s")
    band = body["throughput_output_tokens_per_s_interval"]
    assert band["low"] == pytest.approx(body["throughput_output_tokens_per_s"] / hi)
    assert band["high"] == pytest.approx(body["throughput_output_tokens_per_s"] / lo)
    assert body["throughput_requests_per_s_interval"]["low"] < body["throughput_requests_per_s"]


def test_a_model_without_held_out_rows_takes_the_pooled_band(client: TestClient) -> None:
    # Llama-3.1-8B was measured on TensorRT-LLM only: on vLLM it is a new model.
    body = perf(client)
    lo, hi = _band("*/*", "ttft_s")
    assert body["ttft_s_interval"]["basis"].startswith("*/*")
    assert body["ttft_s_interval"]["low"] == pytest.approx(body["ttft_s"] * lo)
    assert body["ttft_s_interval"]["high"] == pytest.approx(body["ttft_s"] * hi)
    assert any("has no held-out vllm rows" in w for w in body["warnings"])


def test_h200_long_prompt_and_new_version_warn(client: TestClient) -> None:
    h200 = perf(client, hardware="h200-sxm")
    assert any("no serving measurements on H200 SXM" in w for w in h200["warnings"])
    assert h200["ttft_s_interval"] is not None  # the band stays, with the warning
    long = perf(client, input_tokens=100_000, concurrency=64)
    assert any("input length 100000 outside the calibrated" in w for w in long["warnings"])
    assert long["resident_sequences"] < 64  # 6.4 M tokens of KV cache do not fit in 80 GB
    assert any("admission queueing the error is larger" in w for w in long["warnings"])
    response = client.post(
        "/v1/performance",
        json={"model": MODEL, "hardware": "h100-sxm", "deployment": {"engine": "vllm"}},
    )
    assert response.status_code == 200, response.text
    assert any("was never calibrated" in w for w in response.json()["warnings"])


def test_a_family_without_calibration_rows_warns(client: TestClient) -> None:
    response = client.post(
        "/v1/performance",
        json={
            "model": "deepseek-ai/DeepSeek-V3",
            "hardware": "h200-sxm",  # 671 GB of FP8 weights do not fit on 8 H100s
            "deployment": IN_DOMAIN | {"tensor_parallel_size": 8},
            "workload": {"concurrency": 8, "input_tokens": 1024, "output_tokens": 256},
        },
    )
    assert response.status_code == 200, response.text
    warnings = response.json()["warnings"]
    assert any("no vllm calibration rows for mla models" in w for w in warnings)


def test_simulate_carries_bands_of_the_means(client: TestClient) -> None:
    response = client.post(
        "/v1/simulate",
        json={
            "model": MODEL,
            "hardware": "h200-sxm",
            "deployment": IN_DOMAIN,
            "traffic": {
                "mode": "closed_loop",
                "concurrency": 4,
                "input_tokens": 512,
                "output_tokens": 64,
                "num_requests": 60,
                "warmup_requests": 8,
                "seed": 3,
            },
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    band = body["ttft_s_interval"]
    lo, hi = _band("*/*", "ttft_s")
    assert band["low"] == pytest.approx(body["ttft_s"]["mean"] * lo)
    assert band["high"] == pytest.approx(body["ttft_s"]["mean"] * hi)
    assert body["throughput_output_tokens_per_s_interval"] is not None
    assert any("no serving measurements on H200 SXM" in w for w in body["warnings"])


def test_capacity_max_rate_carries_a_band(client: TestClient) -> None:
    response = client.post(
        "/v1/slo/capacity",
        json={
            "model": MODEL,
            "hardware": "h100-sxm",
            "deployment": IN_DOMAIN,
            "traffic": {
                "mode": "open_loop",
                "arrival": {"process": "poisson", "rate_per_s": 4.0},
                "input_tokens": 512,
                "output_tokens": 64,
                "num_requests": 120,
                "warmup_requests": 10,
                "seed": 3,
            },
            "slo": {"ttft_s": {"p95": 1.0}},
            "search": {"tolerance": 0.2, "max_probes": 4, "curve_points": 2},
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    rate = body["max_rate_per_s"]
    assert rate is not None
    lo, hi = _band("*/*", "e2e_s")
    band = body["max_rate_per_s_interval"]
    assert band["low"] == pytest.approx(rate / hi)
    assert band["high"] == pytest.approx(rate / lo)
    assert not [w for w in body["warnings"] if NOT_VALIDATED in w]
    # Every curve point: each TTFT / TPOT percentile times the mean's band (Llama-3.1-8B has
    # no held-out rows: the group of every row); an open loop's throughput has none.
    assert body["curve"]
    for point in body["curve"]:
        for metric in ("ttft", "tpot"):
            lo, hi = _band("*/*", f"{metric}_s")
            for q in ("p50", "p95", "p99"):
                value, band = point[f"{metric}_{q}_s"], point[f"{metric}_{q}_s_interval"]
                if value is None:
                    assert band is None
                    continue
                assert band["low"] == pytest.approx(value * lo)
                assert band["high"] == pytest.approx(value * hi)
                assert band["coverage"] == 0.8
        assert point["throughput_requests_per_s_interval"] is None


def test_a_closed_loop_curve_point_bands_its_throughput_as_c_over_e2e() -> None:
    # A closed-loop point of 32 clients at 4 requests/s: the throughput band is the E2E band
    # inverted, [4 / hi, 4 / lo]; TPOT p95 0.02 s takes [0.02 lo, 0.02 hi] of mean TPOT.
    point = CurvePointOut(
        rate_per_s=None,
        concurrency=32,
        ttft_p50_s=None,
        ttft_p95_s=None,
        tpot_p50_s=None,
        tpot_p95_s=0.02,
        goodput_requests_per_s=None,
        throughput_requests_per_s=4.0,
        feasible=True,
        stable=True,
        binding_constraint="tpot_s.p95",
    )
    architecture = ModelCatalog(Settings().models_dir).architecture(MODEL)
    u = uncertainty("vllm", MODEL, architecture)
    closed = _curve_point(u, point, closed=True)
    lo, hi = _band("*/*", "e2e_s")
    band = closed.throughput_requests_per_s_interval
    assert band is not None
    assert [band.low, band.high] == pytest.approx([4.0 / hi, 4.0 / lo])
    lo, hi = _band("*/*", "tpot_s")
    band = closed.tpot_p95_s_interval
    assert band is not None
    assert [band.low, band.high] == pytest.approx([0.02 * lo, 0.02 * hi])
    assert closed.ttft_p95_s_interval is None  # no value, no band
    assert _curve_point(u, point, closed=False).throughput_requests_per_s_interval is None


def test_sizing_plans_carry_a_max_rate_band_and_warn_off_the_h100(client: TestClient) -> None:
    response = client.post(
        "/v1/sizing",
        json={
            "model": MODEL,
            "traffic": {"rate_per_s": 4.0, "input_tokens": 512, "output_tokens": 128},
            "slo": {"ttft_s": {"p95": 2.0}, "tpot_s": {"p95": 0.1}},
            "candidates": {
                "hardware": ["a100-sxm-80gb"],
                "tensor_parallel": [1],
                "max_num_batched_tokens": [8192],
                "kv_cache_dtype": ["auto"],
            },
            "verify_top": 0,
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    plan = body["plans"][0]
    band = plan["max_rate_per_replica_per_s_interval"]
    assert band["low"] < plan["max_rate_per_replica_per_s"] * 1.5
    assert band["low"] < band["high"]
    assert any("no serving measurements on a100-sxm-80gb" in w for w in plan["warnings"])
    assert any("no serving measurements on a100-sxm-80gb" in w for w in body["warnings"])
