"""Ingested endpoint benchmarks travel through the upload API with absent percentiles kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.agent.ingest import ingest_files
from tests.api.test_hardware import h100_upload, upload, writer

__all__ = ["writer"]  # the fixture, used by name

FIXTURES = Path(__file__).parent.parent / "agent" / "fixtures"


def test_a_vllm_file_without_p90_is_stored_with_p90_null(
    client: TestClient, writer: dict[str, str], tmp_path: Path
) -> None:
    # as `--metric-percentiles 95,99 --percentile-metrics ttft,tpot,itl` writes it: no p90, no e2el
    result = json.loads((FIXTURES / "vllm_bench_concurrency4.json").read_text())
    dropped = [k for k in result if k.startswith("p90_") or k.endswith("_e2el_ms")]
    for key in dropped:
        del result[key]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    benchmark = ingest_files([path], "vllm-bench")
    payload = h100_upload(endpoint_benchmarks=[benchmark.model_dump(mode="json")])
    stored = upload(client, writer, payload)
    assert stored.status_code == 201, stored.text

    one = client.get(f"/v1/hardware/h100-sxm/measurements/{stored.json()['id']}").json()
    (level,) = one["payload"]["endpoint_benchmarks"][0]["levels"]
    # figures of the file: p95_ttft_ms 61.0, total_token_throughput 2534.4
    assert level["ttft_s"]["p90"] is None
    assert level["ttft_s"]["p95"] == pytest.approx(61.0 / 1000)
    assert level["e2e_s"] is None
    assert level["throughput_total_tokens_per_s"] == 2534.4
    assert dropped  # the fixture had p90 and e2el keys to drop


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
