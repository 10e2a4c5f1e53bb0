"""The replica compiler's policies as the API shows them (regressions of the four copies)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

LLAMA = {"model": "meta-llama/Llama-3.1-8B"}
# An H100 given by its figures, with no interconnect: a KV hand-off over it has no bandwidth.
NO_LINK_GPU = {
    "name": "H100 SXM",
    "vendor": "nvidia",
    "memory_bytes": 80 * 2**30,
    "memory_bandwidth_bytes_per_s": 3_350_000_000_000,
    "peak_tflop_per_s": {"bf16": 989.4, "fp8": 1978.9},
}


def _perf(client: TestClient, **body: Any) -> Any:
    response = client.post("/v1/performance", json=LLAMA | {"hardware": "h100-sxm"} | body)
    assert response.status_code == 200, response.text
    return response.json()


def test_performance_chunks_prompts_by_the_deployments_budget(client: TestClient) -> None:
    """Regression: the step model kept the engine profile's 8192-token budget whatever the
    deployment said, so an 8192-token prompt was one step at any max_num_batched_tokens."""
    work = {"concurrency": 1, "input_tokens": 8192, "output_tokens": 2}
    whole = _perf(client, workload=work)
    chunked = _perf(client, workload=work, deployment={"max_num_batched_tokens": 2048})
    # Four 2048-token steps read the weights four times and pay four step overheads.
    assert chunked["prefill_time_s"] > whole["prefill_time_s"] + 3 * 2e-3
    # The decode step is the same: the budget only splits prompts.
    assert chunked["decode_step_time_s"] == whole["decode_step_time_s"]


def test_a_kv_link_without_bandwidth_is_a_422_at_the_field(client: TestClient) -> None:
    traffic = {"num_requests": 10, "input_tokens": 256, "output_tokens": 8}
    body = LLAMA | {"hardware": NO_LINK_GPU, "traffic": traffic}
    refused = client.post("/v1/simulate", json=body | {"disaggregation": {}})
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["type"].endswith("missing-bandwidth")
    assert problem["errors"][0]["pointer"] == "/disaggregation/kv_transfer/bandwidth_bytes_per_s"
    given = {"kv_transfer": {"bandwidth_bytes_per_s": 25e9}}
    served = client.post("/v1/simulate", json=body | {"disaggregation": given})
    assert served.status_code == 200, served.text
    assert served.json()["disaggregation"]["bandwidth_source"] == "request"


def test_a_prompt_over_a_whole_prompt_budget_is_the_core_error(client: TestClient) -> None:
    traffic = {"num_requests": 10, "input_tokens": 10_000, "output_tokens": 64}
    deployment = {"engine": "trtllm", "max_model_len": 16384}
    body = LLAMA | {"hardware": "h100-sxm", "traffic": traffic, "deployment": deployment}
    refused = client.post("/v1/simulate", json=body)
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["type"].endswith("prompt-exceeds-budget")
    assert problem["errors"] == [
        {
            "location": "body",
            "pointer": "/deployment/max_num_batched_tokens",
            "detail": problem["detail"],
        }
    ]
