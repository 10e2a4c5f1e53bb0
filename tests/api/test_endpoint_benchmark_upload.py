"""Ingested endpoint benchmarks travel through the upload API with absent percentiles kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from servesize.agent.ingest import ingest_files
from tests.api.test_hardware import h100_upload, upload, writer

__all__ = ["writer"]  # the fixture, used by name

UPSTREAM = Path(__file__).parent.parent / "data" / "upstream"


def test_a_vllm_file_without_p90_is_stored_with_p90_null(
    client: TestClient, writer: dict[str, str]
) -> None:
    benchmark = ingest_files(
        [UPSTREAM / "vllm" / "benchmark_2025-05-13_04-55-27.json"], "vllm-bench"
    )
    payload = h100_upload(endpoint_benchmarks=[benchmark.model_dump(mode="json")])
    stored = upload(client, writer, payload)
    assert stored.status_code == 201, stored.text

    one = client.get(f"/v1/hardware/h100-sxm/measurements/{stored.json()['id']}").json()
    (level,) = one["payload"]["endpoint_benchmarks"][0]["levels"]
    # figures of the file: p95_ttft_ms 257.0488001947524, no p90_ttft_ms, no e2el
    assert level["ttft_s"]["p90"] is None
    assert level["ttft_s"]["p95"] == 0.2570488001947524
    assert level["e2e_s"] is None
    assert level["throughput_total_tokens_per_s"] == 28557.13859477194


def test_an_endpoint_benchmark_in_the_earlier_shape_is_still_accepted(
    client: TestClient, writer: dict[str, str]
) -> None:
    stats: dict[str, Any] = {"mean": 0.05, "p50": 0.05, "p90": 0.06, "p95": 0.07, "p99": 0.08}
    level = {
        "mode": "closed_loop",
        "concurrency": 4,
        "requests": 10,
        "completed": 10,
        "failed": 0,
        "timed_out": 0,
        "duration_s": 5.0,
        "ttft_s": stats,
        "itl_s": None,
        "tpot_s": None,
        "e2e_s": None,
        "throughput_requests_per_s": 2.0,
        "throughput_output_tokens_per_s": 256.0,
    }
    benchmark = {"model": "m", "source": "servesize-agent", "levels": [level]}
    response = upload(client, writer, h100_upload(endpoint_benchmarks=[benchmark]), key="k-2")
    assert response.status_code == 201, response.text
