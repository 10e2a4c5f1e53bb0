"""Energy in /v1/performance: bounds worked by hand, and uploaded NVML power in place of TDP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.security import Scope

# H100 SXM: TDP 700 W, idle 0.115 · 700 = 80.5 W. A batch-one decode is memory-bound
# (weights streamed from HBM), so its activity is at most 0.35 (every second memory-bound):
# at most 80.5 + 0.35 · 619.5 = 297.3 W per GPU, at least the idle 80.5 W.
IDLE_W = 0.115 * 700
MEMORY_BOUND_MAX_W = IDLE_W + 0.35 * (700 - IDLE_W)


def perf(client: TestClient, **body: Any) -> Any:
    payload = {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"} | body
    response = client.post("/v1/performance", json=payload)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_memory_bound_decode_draws_between_idle_and_the_memory_bound_ceiling(
    client: TestClient,
) -> None:
    body = perf(client, workload={"concurrency": 1, "input_tokens": 128, "output_tokens": 256})
    energy = body["energy"]
    assert energy["gpus"] == 1
    assert energy["power_source"] == "datasheet-tdp"
    assert IDLE_W < energy["power_per_gpu_w"] <= MEMORY_BOUND_MAX_W
    # Energy per token is the power over the token rate: J = W · s.
    per_token = energy["power_w"] / body["throughput_output_tokens_per_s"]
    assert energy["energy_per_output_token_j"] == pytest.approx(per_token, rel=1e-9)
    assert energy["energy_per_million_output_tokens_kwh"] == pytest.approx(per_token / 3.6)
    assert energy["energy_per_request_j"] == pytest.approx(per_token * 256, rel=1e-9)


def test_tensor_parallel_counts_every_gpu_and_batching_saves_energy_per_token(
    client: TestClient,
) -> None:
    one = perf(client, workload={"concurrency": 1})["energy"]
    tp2 = perf(client, deployment={"tensor_parallel_size": 2}, workload={"concurrency": 1})
    assert tp2["energy"]["gpus"] == 2
    assert tp2["energy"]["power_w"] == pytest.approx(2 * tp2["energy"]["power_per_gpu_w"])
    # Two GPUs for less than twice the speed: more energy per token than one GPU.
    assert tp2["energy"]["energy_per_output_token_j"] > one["energy_per_output_token_j"]
    # 64 clients share each weight read: per token at least 10x less than one client.
    many = perf(client, workload={"concurrency": 64})["energy"]
    assert many["energy_per_output_token_j"] < one["energy_per_output_token_j"] / 10


def test_uploaded_power_samples_replace_the_tdp(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    sheet = client.get("/v1/hardware/h100-sxm").json()["power"]
    assert sheet["busy_w"] == 700.0
    assert sheet["idle_w"] == pytest.approx(IDLE_W)
    assert sheet["source"] == "datasheet-tdp"
    writer = {"Authorization": f"Bearer {create_key(Scope.PROFILES_WRITE)}"}
    upload = {
        "provenance": {
            "agent_version": "0.1.0",
            "method_version": 1,
            "host": "gpu-node-1",
            "device": "cuda:0",
            "gpu_name": "NVIDIA H100 80GB HBM3",
            "measured_at": "2026-12-03T10:00:00Z",
        },
        "power_samples_w": [640.0, 650.0, 990.0],  # median 650 W
        "idle_power_samples_w": [70.0, 72.0, 74.0],  # median 72 W
    }
    stored = client.post(
        "/v1/hardware/h100-sxm/measurements",
        json=upload,
        headers={**writer, "Idempotency-Key": "power-1"},
    )
    assert stored.status_code == 201, stored.text
    source = f"measurement:{stored.json()['id']}"
    profile = client.get("/v1/hardware/h100-sxm").json()["power"]
    assert (profile["busy_w"], profile["idle_w"], profile["source"]) == (650.0, 72.0, source)
    energy = perf(client, workload={"concurrency": 1, "output_tokens": 256})["energy"]
    assert energy["power_source"] == source
    # Memory-bound: between the measured idle and 72 + 0.35 · (650 − 72) = 274.3 W.
    assert 72.0 < energy["power_per_gpu_w"] <= 72.0 + 0.35 * (650.0 - 72.0)


def test_idle_power_above_the_loaded_power_is_refused(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    writer = {"Authorization": f"Bearer {create_key(Scope.PROFILES_WRITE)}"}
    upload = {
        "provenance": {
            "agent_version": "0.1.0",
            "method_version": 1,
            "host": "h",
            "device": "cuda:0",
            "gpu_name": "NVIDIA H100 80GB HBM3",
            "measured_at": "2026-12-03T10:00:00Z",
        },
        "power_samples_w": [100.0],
        "idle_power_samples_w": [200.0],
    }
    response = client.post(
        "/v1/hardware/h100-sxm/measurements",
        json=upload,
        headers={**writer, "Idempotency-Key": "power-2"},
    )
    assert response.status_code == 422
    assert "idle power" in response.text


def test_a_simulated_closed_loop_agrees_with_the_steady_state_energy(client: TestClient) -> None:
    # Two computations: the simulator sums every recorded step's power; /v1/performance
    # applies the mean-field formula to its steady state. Same replica, same load.
    traffic = {
        "mode": "closed_loop",
        "concurrency": 16,
        "input_tokens": 512,
        "output_tokens": 128,
        "num_requests": 400,
        "warmup_requests": 50,
        "seed": 1,
    }
    response = client.post(
        "/v1/simulate",
        json={"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm", "traffic": traffic},
    )
    assert response.status_code == 200, response.text
    simulated = response.json()["energy"]
    steady = perf(client, workload={"concurrency": 16, "input_tokens": 512, "output_tokens": 128})[
        "energy"
    ]
    assert simulated["gpus"] == 1
    assert IDLE_W < simulated["power_per_gpu_w"] < 700.0
    assert simulated["energy_per_output_token_j"] == pytest.approx(
        steady["energy_per_output_token_j"], rel=0.15
    )


def test_a_lightly_loaded_open_loop_pays_idle_power_between_requests(client: TestClient) -> None:
    # At 0.5 requests/s a request keeps the GPU busy for its 31 decode steps (each at least
    # the 4.79 ms weight read, at most about 10 ms alone) and a short prefill: busy between
    # 0.5 · 31 · 4.79 ms = 7.4 % and 0.5 · 32 · 10 ms = 16 % of the time. Each request
    # carries at least the static energy of its share of the window, 80.5 W / 0.5 per s =
    # 161 J, and the power stays within 20 % of the dynamic range above idle.
    traffic = {
        "mode": "open_loop",
        "arrival": {"process": "poisson", "rate_per_s": 0.5},
        "input_tokens": 256,
        "output_tokens": 32,
        "num_requests": 120,
        "warmup_requests": 10,
        "seed": 2,
    }
    response = client.post(
        "/v1/simulate",
        json={"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm", "traffic": traffic},
    )
    assert response.status_code == 200, response.text
    energy = response.json()["energy"]
    assert 0.5 * 31 * 4.79e-3 < energy["busy_fraction"] < 0.5 * 32 * 0.010
    assert energy["power_per_gpu_w"] < IDLE_W + 0.2 * (700 - IDLE_W)
    assert energy["energy_per_request_j"] > 0.8 * IDLE_W / 0.5


SIZING: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "traffic": {"rate_per_s": 8.0, "input_tokens": 512, "output_tokens": 128},
    "slo": {"ttft_s": {"p95": 2.0}, "tpot_s": {"p95": 0.1}},
    "candidates": {
        "hardware": ["h100-sxm", "a100-sxm-80gb"],
        "tensor_parallel": [1, 2],
        "max_num_batched_tokens": [8192],
        "kv_cache_dtype": ["auto"],
    },
    "prices": {"h100-sxm": 10.0, "a100-sxm-80gb": 1.0},
    "verify_top": 0,
}
TDP_W = {"h100-sxm": 700.0, "a100-sxm-80gb": 400.0}


def test_sizing_plans_carry_their_fleet_energy_and_can_rank_by_it(client: TestClient) -> None:
    by_cost = client.post("/v1/sizing", json=SIZING)
    assert by_cost.status_code == 200, by_cost.text
    plans = by_cost.json()["plans"]
    assert plans[0]["hardware"] == "a100-sxm-80gb"  # ten times cheaper per GPU-hour
    for plan in plans:
        energy = plan["energy"]
        tdp = TDP_W[plan["hardware"]]
        assert energy["gpus"] == plan["total_gpus"]
        # Every GPU draws between its idle power and its TDP ...
        assert 0.115 * tdp * plan["total_gpus"] <= energy["power_w"] <= tdp * plan["total_gpus"]
        # ... and each of the 8 requests/s carries at least the fleet's idle power / 8.
        assert energy["energy_per_request_j"] >= 0.115 * tdp * plan["total_gpus"] / 8.0
        assert energy["energy_per_request_j"] == pytest.approx(energy["power_w"] / 8.0)
    by_energy = client.post("/v1/sizing", json=SIZING | {"rank_by": "energy"})
    assert by_energy.status_code == 200, by_energy.text
    ranked = [
        p["energy"]["energy_per_million_output_tokens_kwh"] for p in by_energy.json()["plans"]
    ]
    assert ranked == sorted(ranked)
    assert len(ranked) == len(plans)
    # TP2 doubles the GPUs for one replica's load: never the lowest energy here.
    assert by_energy.json()["plans"][0]["gpus_per_replica"] == 1
