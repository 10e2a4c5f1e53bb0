"""Deployments over several nodes through the API: DeepSeek-V3 as TP8 × PP2 on two 8-GPU H100
nodes (memory, performance, simulate), the inter-node link of a profile, and the refusal of a
node with no link to others."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.security import Scope

MODEL = "deepseek-ai/DeepSeek-V3"
TP8_PP2 = {"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "max_model_len": 8192}
# The per-GPU weights of each stage, derived by hand in tests/core/memory/test_mem_multinode.py
STAGE_WEIGHTS = [41_394_919_776, 44_043_006_656]
INLINE_H100 = {
    "name": "H100 SXM",
    "memory_bytes": 80 * 2**30,
    "memory_bandwidth_bytes_per_s": 3_350_000_000_000,
    "peak_tflop_per_s": {"bf16": 989.4, "fp8": 1978.9},
    "interconnect": {"kind": "nvlink", "bandwidth_bytes_per_s": 450_000_000_000},
}


def _post(client: TestClient, route: str, **body: Any) -> Any:
    payload = {"model": MODEL, "hardware": "h100-sxm", "deployment": TP8_PP2} | body
    return client.post(route, json=payload)


def test_memory_plans_each_stage_of_a_two_node_deployment(client: TestClient) -> None:
    response = _post(client, "/v1/memory")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["fits"] is True
    assert [s["weights_bytes_per_gpu"] for s in body["stages"]] == STAGE_WEIGHTS
    assert [s["num_layers"] for s in body["stages"]] == [31, 30]


def test_performance_and_simulate_accept_tp8_pp2(client: TestClient) -> None:
    perf = _post(
        client,
        "/v1/performance",
        workload={"concurrency": 8, "input_tokens": 1024, "output_tokens": 64},
    )
    assert perf.status_code == 200, perf.text
    body = perf.json()
    assert body["e2e_s"] == pytest.approx(body["ttft_s"] + 63 * body["tpot_s"], rel=1e-6)
    # The same GPUs joined by a 1 GB/s, 1 ms link: every decode pass crosses the stage
    # boundary once (PP − 1 = 1 hand-off), so TPOT grows by at least the 1 ms − 5 µs latency.
    tpots = []
    for bandwidth, latency in ((50_000_000_000, 5e-6), (1_000_000_000, 1e-3)):
        hardware = INLINE_H100 | {
            "inter_node": {
                "kind": "infiniband",
                "bandwidth_bytes_per_s": bandwidth,
                "latency_s": latency,
            }
        }
        inline = _post(
            client,
            "/v1/performance",
            hardware=hardware,
            workload={"concurrency": 8, "input_tokens": 1024, "output_tokens": 64},
        )
        assert inline.status_code == 200, inline.text
        tpots.append(inline.json()["tpot_s"])
    assert tpots[1] - tpots[0] > 1e-3 - 5e-6
    sim = _post(
        client,
        "/v1/simulate",
        traffic={
            "mode": "open_loop",
            "arrival": {"process": "poisson", "rate_per_s": 0.5},
            "input_tokens": 512,
            "output_tokens": 32,
            "num_requests": 40,
            "warmup_requests": 5,
            "seed": 1,
        },
    )
    assert sim.status_code == 200, sim.text
    assert sim.json()["measured"] == 35


def test_wide_expert_parallelism_over_two_nodes_is_accepted(client: TestClient) -> None:
    deployment = {"data_parallel_size": 16, "enable_expert_parallel": True, "max_model_len": 8192}
    response = _post(client, "/v1/memory", deployment=deployment)
    assert response.status_code == 200, response.text
    assert response.json()["fits"] is True


def test_a_pcie_node_without_a_link_between_nodes_is_refused(client: TestClient) -> None:
    response = client.post(
        "/v1/memory",
        json={
            "model": "meta-llama/Llama-3.1-8B",
            "hardware": "l40s",
            "deployment": {"tensor_parallel_size": 8, "pipeline_parallel_size": 2},
        },
    )
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert "/deployment/pipeline_parallel_size" in pointers
    assert "inter_node" in response.text


def test_inline_hardware_with_an_inter_node_link_spans_nodes(client: TestClient) -> None:
    hardware = {
        "name": "L40S",
        "memory_bytes": 48 * 2**30,
        "memory_bandwidth_bytes_per_s": 864_000_000_000,
        "peak_tflop_per_s": {"bf16": 362.05, "fp8": 733.0},
        "interconnect": {"kind": "pcie", "gpus_per_node": 8},
        "inter_node": {
            "kind": "ethernet",
            "bandwidth_bytes_per_s": 12_500_000_000,
            "latency_s": 2e-5,
        },
    }
    response = client.post(
        "/v1/memory",
        json={
            "model": "meta-llama/Llama-3.1-8B",
            "hardware": hardware,
            "deployment": {"tensor_parallel_size": 8, "pipeline_parallel_size": 2},
        },
    )
    assert response.status_code == 200, response.text
    bad = hardware | {
        "inter_node": {"kind": "nvlink_domain", "bandwidth_bytes_per_s": 1, "latency_s": 0}
    }
    refused = client.post("/v1/memory", json={"model": "meta-llama/Llama-3.1-8B", "hardware": bad})
    assert refused.status_code == 422
    assert any(e["pointer"].startswith("/hardware/inter_node") for e in refused.json()["errors"])


def test_profiles_show_their_link_between_nodes(client: TestClient) -> None:
    h100 = client.get("/v1/hardware/h100-sxm").json()
    # no stored link: the documented default for NVLink 4, one NDR adapter per GPU
    assert h100["inter_node"] == {
        "kind": "infiniband",
        "bandwidth_bytes_per_s": 50_000_000_000,
        "latency_s": 5e-6,
        "domain_gpus": None,
        "default": True,
    }
    gb200 = client.get("/v1/hardware/gb200").json()
    assert gb200["interconnect"]["gpus_per_node"] == 4
    assert gb200["inter_node"]["kind"] == "nvlink_domain"
    assert gb200["inter_node"]["domain_gpus"] == 72
    assert gb200["inter_node"]["default"] is False
    assert client.get("/v1/hardware/l40s").json()["inter_node"] is None


def test_a_custom_profile_stores_its_link(client: TestClient, create_key: Any) -> None:
    admin = {"Authorization": f"Bearer {create_key(Scope.ADMIN)}"}
    profile = {
        "id": "h100-roce",
        "vendor": "NVIDIA",
        "name": "H100 SXM (RoCE)",
        "memory_bytes": 80 * 2**30,
        "memory_bandwidth_bytes_per_s": 3_350_000_000_000,
        "peak_tflop_per_s": {"bf16": 989.4, "fp8": 1978.9},
        "interconnect": {"kind": "nvlink", "bandwidth_bytes_per_s": 450_000_000_000},
        "inter_node": {
            "kind": "ethernet",
            "bandwidth_bytes_per_s": 25_000_000_000,
            "latency_s": 1e-5,
        },
    }
    created = client.post("/v1/hardware", json=profile, headers=admin)
    assert created.status_code == 201, created.text
    link = created.json()["inter_node"]
    assert (link["kind"], link["bandwidth_bytes_per_s"], link["default"]) == (
        "ethernet",
        25_000_000_000,
        False,
    )
    got = client.get("/v1/hardware/h100-roce")
    assert got.json()["inter_node"]["latency_s"] == 1e-5
    # dropping the link falls back to the NVLink 4 default (NDR, 50 GB/s per GPU)
    patched = client.patch(
        "/v1/hardware/h100-roce",
        json={"inter_node": None},
        headers=admin | {"If-Match": got.headers["ETag"]},
    )
    assert patched.status_code == 200, patched.text
    link = patched.json()["inter_node"]
    assert (link["kind"], link["bandwidth_bytes_per_s"], link["default"]) == (
        "infiniband",
        50_000_000_000,
        True,
    )


def test_sizing_considers_two_node_layouts(client: TestClient) -> None:
    body = {
        "model": MODEL,
        "traffic": {"rate_per_s": 2, "input_tokens": 512, "output_tokens": 64},
        "slo": {"ttft_s": {"p95": 5.0}},
        "candidates": {
            "hardware": ["h100-sxm"],
            "tensor_parallel": [8],
            "pipeline_parallel": [1, 2],
            "max_num_batched_tokens": [8192],
            "kv_cache_dtype": ["fp8"],
        },
        "prices": {"h100-sxm": 3.99},
    }
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    # TP8 on one node does not fit (the weights alone are 79.6 GiB per GPU); TP8 x PP2 does
    (plan,) = answer["plans"]
    assert plan["parallelism"]["pipeline_parallel_size"] == 2
    assert plan["gpus_per_replica"] == 16
    roles = [c["role"] for c in plan["launch"]["commands"]]
    assert roles == ["node0", "node1"]
    node1 = plan["launch"]["commands"][1]["argv"]
    assert node1[node1.index("--nnodes") + 1] == "2"
    assert node1[node1.index("--node-rank") + 1] == "1"
    assert "--headless" in node1
