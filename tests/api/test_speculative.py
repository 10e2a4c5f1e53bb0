"""Speculative decoding through /v1/memory, /v1/performance and /v1/simulate, and its
refusals (each names its field)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

MODEL = "meta-llama/Llama-3.1-8B"
EAGLE = {"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0.8}
POINT = {"concurrency": 1, "input_tokens": 1024, "output_tokens": 256}


def perf(client: TestClient, speculative: Any = None, **body: Any) -> Any:
    deployment = {"max_model_len": 8192} | ({"speculative": speculative} if speculative else {})
    payload = (
        {"model": MODEL, "hardware": "h100-sxm", "workload": POINT}
        | {"deployment": deployment}
        | body
    )
    return client.post("/v1/performance", json=payload)


def test_eagle3_at_batch_one(client: TestClient) -> None:
    plain = perf(client).json()
    answer = perf(client, EAGLE)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    spec = body["speculative"]
    assert spec["expected_tokens_per_step"] == pytest.approx(2.952, abs=1e-9)
    assert spec["baseline_tpot_s"] == pytest.approx(plain["tpot_s"], rel=1e-9)
    # a memory-bound decode at batch 1: speed-up under E (verification and draft cost more)
    assert 1.5 < spec["speedup"] < 2.952
    assert body["tpot_s"] == pytest.approx(plain["tpot_s"] / spec["speedup"], rel=1e-9)
    assert body["e2e_s"] == pytest.approx(body["ttft_s"] + 255 * body["tpot_s"], rel=1e-9)
    assert body["kv_capacity_tokens"] < plain["kv_capacity_tokens"]
    assert spec["draft_weight_bytes_per_gpu"] > 0
    assert spec["draft_kv_layers"] == 1
    table = spec["speedup_by_batch"]
    assert [p["batch_size"] for p in table][:3] == [1, 2, 4]
    for p in table:
        assert p["speedup"] == pytest.approx(p["decode_step_s"] / p["tpot_s"], rel=1e-9)


def test_zero_acceptance_stops_paying_at_batch_one(client: TestClient) -> None:
    body = perf(client, EAGLE | {"acceptance_rate": 0.0}).json()["speculative"]
    assert body["expected_tokens_per_step"] == 1.0
    assert body["break_even_batch_size"] == 1
    assert body["speedup"] < 1.0


def test_memory_ledger_lists_the_draft(client: TestClient) -> None:
    payload = {"model": MODEL, "hardware": "h100-sxm"}
    plain = client.post("/v1/memory", json=payload | {"deployment": {"max_model_len": 8192}})
    spec = client.post(
        "/v1/memory",
        json=payload | {"deployment": {"max_model_len": 8192, "speculative": EAGLE}},
    )
    assert spec.status_code == 200, spec.text
    names = {i["name"]: i["bytes_per_gpu"] for i in spec.json()["line_items"]}
    assert names["speculative draft weights"] > 0
    assert spec.json()["kv_capacity_tokens"] < plain.json()["kv_capacity_tokens"]


@pytest.mark.parametrize(
    ("speculative", "pointer"),
    [
        (EAGLE | {"method": "mtp"}, "/deployment/speculative/method"),
        (EAGLE | {"acceptance_rate": 1.0}, "/deployment/speculative/acceptance_rate"),
        (EAGLE | {"num_speculative_tokens": 0}, "/deployment/speculative/num_speculative_tokens"),
        (
            {
                "method": "draft_model",
                "num_speculative_tokens": 3,
                "acceptance_rate": 0.7,
                "draft_model": "Qwen/Qwen3-0.6B",
            },
            "/deployment/speculative/draft_model",
        ),
        (
            {"method": "eagle3", "num_speculative_tokens": 3, "acceptance_per_position": [0.9]},
            "/deployment/speculative/acceptance_per_position",
        ),
    ],
)
def test_refusals_name_the_field(client: TestClient, speculative: Any, pointer: str) -> None:
    answer = perf(client, speculative)
    assert answer.status_code == 422, answer.text
    pointers = {e.get("pointer") for e in answer.json().get("errors", [])}
    assert any(p is not None and p.startswith(pointer) for p in pointers), answer.json()


def test_draft_model_of_the_same_vocabulary(client: TestClient) -> None:
    spec = {
        "method": "draft_model",
        "num_speculative_tokens": 4,
        "acceptance_rate": 0.7,
        "draft_model": "meta-llama/Llama-3.2-1B-Instruct",
    }
    body = perf(client, spec).json()
    # 16 layers · 2 · 8 KV heads · 64 dims · 2 B = 32,768 B/token = 8 layers of 4,096 B
    assert body["speculative"]["draft_kv_layers"] == 8
    assert body["speculative"]["expected_tokens_per_step"] == pytest.approx(
        1 + 0.7 + 0.49 + 0.343 + 0.2401, abs=1e-12
    )


def test_simulate_speculates(client: TestClient) -> None:
    def run(deployment: dict[str, Any]) -> Any:
        payload = {
            "model": MODEL,
            "hardware": "h100-sxm",
            "deployment": deployment,
            "traffic": {
                "mode": "open_loop",
                "arrival": {"process": "poisson", "rate_per_s": 0.5},
                "input_tokens": 1024,
                "output_tokens": 256,
                "num_requests": 8,
                "seed": 1,
            },
        }
        answer = client.post("/v1/simulate", json=payload)
        assert answer.status_code == 200, answer.text
        return answer.json()

    plain = run({"max_model_len": 8192})
    spec = run({"max_model_len": 8192, "speculative": EAGLE})
    assert spec["tpot_s"]["mean"] < plain["tpot_s"]["mean"] / 2
    # ITL pools the gaps between verification steps: several tokens arrive in one gap
    assert spec["itl_s"]["mean"] > spec["tpot_s"]["mean"]


def test_slo_evaluate_takes_a_speculative_deployment(client: TestClient) -> None:
    traffic = {
        "mode": "open_loop",
        "arrival": {"process": "poisson", "rate_per_s": 0.5},
        "input_tokens": 512,
        "output_tokens": 64,
        "num_requests": 20,
        "seed": 3,
    }
    body = {
        "model": MODEL,
        "hardware": "h100-sxm",
        "deployment": {"max_model_len": 8192, "speculative": EAGLE},
        "slo": {"tpot_s": {"p95": 0.05}},
        "traffic": traffic,
    }
    answer = client.post("/v1/slo/evaluate", json=body)
    assert answer.status_code == 200, answer.text
