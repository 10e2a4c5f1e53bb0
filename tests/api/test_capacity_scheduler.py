"""``deployment.capacity_scheduler_policy``: TensorRT-LLM's knob reaches the simulated engine,
and every other engine (or an unknown value) is a 422 naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

MODEL = "meta-llama/Llama-3.1-8B"
POINTER = "/deployment/capacity_scheduler_policy"
TRAFFIC = {
    "mode": "open_loop",
    "arrival": {"process": "poisson", "rate_per_s": 2.0},
    "input_tokens": 256,
    "output_tokens": 8,
    "num_requests": 20,
    "warmup_requests": 2,
    "seed": 1,
}


def sim(client: TestClient, deployment: dict[str, Any]) -> Any:
    body = {"model": MODEL, "hardware": "h100-sxm", "deployment": deployment, "traffic": TRAFFIC}
    return client.post("/v1/simulate", json=body)


@pytest.mark.parametrize(
    ("deployment", "expected"),
    [
        ({"engine": "trtllm"}, "guaranteed_no_evict"),
        ({"engine": "trtllm", "capacity_scheduler_policy": "max_utilization"}, "max_utilization"),
        (
            {"engine": "trtllm", "capacity_scheduler_policy": "GUARANTEED_NO_EVICT"},
            "guaranteed_no_evict",
        ),
        ({"engine": "sglang"}, "new_token_ratio"),
        ({"engine": "vllm"}, "incremental"),
    ],
)
def test_the_simulated_engine_takes_the_engine_capacity_policy(
    client: TestClient, deployment: dict[str, Any], expected: str
) -> None:
    response = sim(client, deployment)
    assert response.status_code == 200, response.text
    assert response.json()["engine_config"]["capacity_policy"] == expected


@pytest.mark.parametrize(
    "deployment",
    [
        {"engine": "vllm", "capacity_scheduler_policy": "guaranteed_no_evict"},
        {"engine": "sglang", "capacity_scheduler_policy": "max_utilization"},
        {"engine": "trtllm", "capacity_scheduler_policy": "static_batch"},
    ],
)
def test_a_policy_the_engine_does_not_have_is_a_422_naming_the_field(
    client: TestClient, deployment: dict[str, Any]
) -> None:
    for response in (
        sim(client, deployment),
        client.post(
            "/v1/memory", json={"model": MODEL, "hardware": "h100-sxm", "deployment": deployment}
        ),
    ):
        assert response.status_code == 422, response.text
        assert [e["pointer"] for e in response.json()["errors"]] == [POINTER]
