"""Recalibration of engine constants from stored endpoint benchmarks (both databases)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.api.test_hardware import h100_upload, upload, writer

__all__ = ["writer"]  # the fixture, used by name

MODEL = "meta-llama/Llama-3.1-8B"
CONCURRENCY = (1, 4, 16)
INPUT, OUTPUT = 512, 128
EXTRA_TTFT_S = 0.050
TPOT_FACTOR = 1.25


def _performance(client: TestClient, concurrency: int) -> dict[str, Any]:
    response = client.post(
        "/v1/performance",
        json={
            "model": MODEL,
            "hardware": "h100-sxm",
            "workload": {
                "concurrency": concurrency,
                "input_tokens": INPUT,
                "output_tokens": OUTPUT,
            },
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _stats(value: float) -> dict[str, float]:
    return {"mean": value, "p50": value, "p90": value, "p95": value, "p99": value}


def _level(concurrency: int, ttft_s: float, tpot_s: float) -> dict[str, Any]:
    return {
        "mode": "closed_loop",
        "concurrency": concurrency,
        "requests": 100,
        "completed": 100,
        "failed": 0,
        "timed_out": 0,
        "duration_s": 60.0,
        "ttft_s": _stats(ttft_s),
        "itl_s": None,
        "tpot_s": _stats(tpot_s),
        "e2e_s": None,
        "throughput_requests_per_s": 1.0,
        "throughput_output_tokens_per_s": 128.0,
        "mean_input_tokens": INPUT,
        "mean_output_tokens": OUTPUT,
    }


def _store(
    client: TestClient,
    headers: dict[str, str],
    levels: list[dict[str, Any]],
    key: str = "k-1",
    model: str = MODEL,
) -> int:
    bench = {"model": model, "engine": "vllm", "source": "vllm-bench", "levels": levels}
    payload = h100_upload(endpoint_benchmarks=[bench], gemm=[], memory_bandwidth=[])
    stored = upload(client, headers, payload, key=key)
    assert stored.status_code == 201, stored.text
    mid: int = stored.json()["id"]
    return mid


def _measured_levels(client: TestClient) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A server 50 ms slower per request and 25 % slower per output token than predicted."""
    shipped = [_performance(client, c) for c in CONCURRENCY]
    levels = [
        _level(c, p["ttft_s"] + EXTRA_TTFT_S, p["tpot_s"] * TPOT_FACTOR)
        for c, p in zip(CONCURRENCY, shipped, strict=True)
    ]
    return shipped, levels


def _etag(client: TestClient) -> str:
    etag: str = client.get("/v1/hardware/h100-sxm").headers["ETag"]
    return etag


def test_preview_fits_and_changes_nothing(client: TestClient, writer: dict[str, str]) -> None:
    shipped, levels = _measured_levels(client)
    mid = _store(client, writer, levels)
    response = client.post(
        "/v1/hardware/h100-sxm/recalibration",
        json={"engine": "vllm", "model": MODEL, "measurement_ids": [mid]},
    )
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["applied"] is False
    assert out["calibration_id"] is None
    # vLLM's shipped simulator request overhead (servesize/core/steptime/engines.py): 22.95 ms.
    assert abs(out["constants_before"]["request_overhead_s"] - 22.95e-3) < 1e-12
    assert out["fitted_before"]["step_time_scale"] == 1.0
    # before, TPOT is 1/1.25 of measured at every level: |0.8 − 1| = 0.2
    tpot_before = next(e for e in out["errors_before"] if e["metric"] == "tpot_s")
    assert abs(tpot_before["median_abs_error"] - 0.2) < 1e-6
    assert abs(tpot_before["mape"] - 0.2) < 1e-6
    after = {e["metric"]: e["mape"] for e in out["errors_after"]}
    before = {e["metric"]: e["mape"] for e in out["errors_before"]}
    assert after["tpot_s"] < before["tpot_s"] / 2
    assert after["ttft_s"] < before["ttft_s"]
    assert 1.1 < out["fitted_after"]["step_time_scale"] < 1.4
    assert out["fitted_after"]["request_overhead_s"] > 22.95e-3
    assert [lv["load"] for lv in out["levels"]] == [
        "concurrency=1",
        "concurrency=4",
        "concurrency=16",
    ]
    # nothing stored, nothing changed
    assert client.get("/v1/hardware/h100-sxm/recalibration").json()["items"] == []
    again = _performance(client, 4)
    assert again["ttft_s"] == shipped[1]["ttft_s"]
    assert not any("recalibration" in w for w in again["warnings"])


def test_apply_changes_predictions_and_names_the_calibration(
    client: TestClient, writer: dict[str, str]
) -> None:
    shipped, levels = _measured_levels(client)
    mid = _store(client, writer, levels)
    body = {"engine": "vllm", "model": MODEL, "measurement_ids": [mid], "apply": True}
    url = "/v1/hardware/h100-sxm/recalibration"
    assert client.post(url, json=body).status_code == 401
    assert client.post(url, json=body, headers=writer).status_code == 428
    stale = client.post(url, json=body, headers={**writer, "If-Match": '"h100-sxm-v0"'})
    assert stale.status_code == 412
    etag = _etag(client)
    applied = client.post(url, json=body, headers={**writer, "If-Match": etag})
    assert applied.status_code == 200, applied.text
    out = applied.json()
    cal = out["calibration_id"]
    assert cal.startswith("cal_")
    assert out["applied"] is True
    assert _etag(client) != etag  # a new profile version

    listed = client.get(url).json()["items"]
    assert [(c["id"], c["engine"], c["active"]) for c in listed] == [(cal, "vllm", True)]

    after = _performance(client, 4)
    assert after["tpot_s"] > shipped[1]["tpot_s"] * 1.1
    (note,) = [w for w in after["warnings"] if cal in w]
    assert out["created_at"][:10] in note
    assert cal in after["sources"]["engine_overheads"]
    # the simulator path names it too
    sim = client.post(
        "/v1/simulate",
        json={
            "model": MODEL,
            "hardware": "h100-sxm",
            "traffic": {
                "mode": "open_loop",
                "arrival": {"process": "poisson", "rate_per_s": 1.0},
                "input_tokens": INPUT,
                "output_tokens": OUTPUT,
                "num_requests": 30,
                "warmup_requests": 5,
                "seed": 3,
            },
        },
    )
    assert sim.status_code == 200, sim.text
    assert any(cal in w for w in sim.json()["warnings"])
    slo = client.post(
        "/v1/slo/evaluate",
        json={
            "model": MODEL,
            "hardware": "h100-sxm",
            "traffic": {
                "mode": "open_loop",
                "arrival": {"process": "poisson", "rate_per_s": 1.0},
                "input_tokens": INPUT,
                "output_tokens": OUTPUT,
            },
            "slo": {"ttft_s": {"p95": 0.5}},
            "tier": "analytic",
        },
    )
    assert slo.status_code == 200, slo.text
    assert any(cal in w for w in slo.json()["warnings"])
    queue = client.post(
        "/v1/queueing",
        json={
            "model": "continuous_batching",
            "llm": MODEL,
            "hardware": "h100-sxm",
            "arrival_rate_per_s": 1.0,
            "input_tokens": INPUT,
            "output_tokens": OUTPUT,
        },
    )
    assert queue.status_code == 200, queue.text
    assert any(cal in c for c in queue.json()["validity"]["caveats"])
    # sizing does not apply it, and says so
    sizing = client.post(
        "/v1/sizing",
        json={
            "model": MODEL,
            "traffic": {"rate_per_s": 2.0, "input_tokens": INPUT, "output_tokens": OUTPUT},
            "slo": {"ttft_s": {"p95": 2.0}, "tpot_s": {"p95": 0.1}},
            "candidates": {"hardware": ["h100-sxm"], "tensor_parallel": [1]},
            "verify_top": 0,
        },
    )
    assert sizing.status_code == 200, sizing.text
    assert any(cal in w and "does not apply" in w for w in sizing.json()["warnings"])
    # another engine is untouched
    trt = client.post(
        "/v1/performance",
        json={
            "model": MODEL,
            "hardware": "h100-sxm",
            "deployment": {"engine": "trtllm"},
            "workload": {"concurrency": 4, "input_tokens": INPUT, "output_tokens": OUTPUT},
        },
    ).json()
    assert not any(cal in w for w in trt["warnings"])

    # delete: back to the shipped constants exactly
    gone = client.delete(f"{url}/{cal}", headers={**writer, "If-Match": _etag(client)})
    assert gone.status_code == 204, gone.text
    assert client.get(url).json()["items"] == []
    restored = _performance(client, 4)
    assert restored["tpot_s"] == shipped[1]["tpot_s"]
    assert restored["ttft_s"] == shipped[1]["ttft_s"]
    missing = client.delete(f"{url}/{cal}", headers={**writer, "If-Match": _etag(client)})
    assert missing.status_code == 404


def _problem(response: Any, status: int, pointer: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert any(e.get("pointer", "").startswith(pointer) for e in body.get("errors", [])), body
    return body


def test_bad_input_is_a_4xx_problem(client: TestClient, writer: dict[str, str]) -> None:
    url = "/v1/hardware/h100-sxm/recalibration"
    one = _store(client, writer, [_level(1, 0.05, 0.01)], key="k-one")
    many = _store(client, writer, [_level(1, 0.05, 0.01), _level(4, 0.06, 0.012)], key="k-two")
    base = {"model": MODEL, "measurement_ids": [many]}

    _problem(client.post(url, json={**base, "engine": "tgi"}), 422, "/engine")
    _problem(
        client.post(url, json={**base, "engine": "vllm", "measurement_ids": []}),
        422,
        "/measurement_ids",
    )
    unknown = client.post(url, json={**base, "engine": "vllm", "measurement_ids": [many, 999999]})
    assert _problem(unknown, 422, "/measurement_ids/1")["type"].endswith("unknown-measurement")
    huge = client.post(url, json={**base, "engine": "vllm", "measurement_ids": [2**31]})
    _problem(huge, 422, "/measurement_ids/0")  # beyond the INTEGER id column
    # a measurement of another profile
    other = client.post("/v1/hardware/h200-sxm/recalibration", json={**base, "engine": "vllm"})
    assert _problem(other, 422, "/measurement_ids/0")["type"].endswith("unknown-measurement")
    few = client.post(url, json={**base, "engine": "vllm", "measurement_ids": [one]})
    assert _problem(few, 422, "/measurement_ids")["type"].endswith("too-few-levels")
    assert "1 measured levels" in few.json()["detail"]
    none = client.post(url, json={**base, "engine": "vllm", "model": "Qwen/Qwen3-8B"})
    assert _problem(none, 422, "/measurement_ids")["type"].endswith("no-usable-levels")
    # a benchmark of another engine is skipped, so nothing is left
    trt = client.post(url, json={**base, "engine": "trtllm"})
    assert _problem(trt, 422, "/measurement_ids")["type"].endswith("no-usable-levels")
    assert (
        client.post("/v1/hardware/nope/recalibration", json={**base, "engine": "vllm"}).status_code
        == 404
    )
