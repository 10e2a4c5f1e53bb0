"""/v1/simulate: small runs of Llama-3.1-8B on an H100 with invariants checkable by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from servesize.api.simulate_views import latency_out
from servesize.core.simulation import LatencyStats

MODEL = "meta-llama/Llama-3.1-8B"


def sim(client: TestClient, **body: Any) -> Any:
    payload = {"model": MODEL, "hardware": "h100-sxm"} | body
    return client.post("/v1/simulate", json=payload)


def open_loop(rate_per_s: float, num_requests: int = 200, **traffic: Any) -> dict[str, Any]:
    return {
        "mode": "open_loop",
        "arrival": {"process": "poisson", "rate_per_s": rate_per_s},
        "input_tokens": 512,
        "output_tokens": 64,
        "num_requests": num_requests,
        "warmup_requests": 20,
        "seed": 3,
    } | traffic


def test_open_loop_run_accounts_for_every_measured_request(client: TestClient) -> None:
    response = sim(client, traffic=open_loop(4.0), slo={"ttft_s": 1.0, "tpot_s": 0.1})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stable"], body["stability_reason"]
    assert body["measured"] == 200 - 20
    outcomes = ("completed", "failed", "timed_out", "rejected")
    assert sum(body[k] for k in outcomes) == body["measured"]
    assert body["failed"] == 0
    assert body["completed"] == body["measured"]  # no timeout, no admission limit
    for name in ("ttft_s", "itl_s", "tpot_s", "e2e_s", "queueing_delay_s"):
        stats = body[name]
        assert stats["infinite"] == []
        assert 0 < stats["p50"] <= stats["p90"] <= stats["p95"] <= stats["p99"], name
    # E2E = TTFT + 63 TPOT request by request, so also on average.
    assert body["e2e_s"]["mean"] == pytest.approx(
        body["ttft_s"]["mean"] + 63 * body["tpot_s"]["mean"], rel=1e-9
    )
    # A stable open loop serves what it is offered: about 4 requests and 256 tokens per second.
    assert body["throughput_requests_per_s"] == pytest.approx(body["offered_rate_per_s"], rel=0.1)
    assert body["throughput_output_tokens_per_s"] == pytest.approx(
        64 * body["throughput_requests_per_s"], rel=0.1
    )
    assert 0 < body["slo_attainment"] <= 1
    # Goodput: the departure rate times the share of measured requests meeting every limit.
    assert body["goodput_requests_per_s"] == pytest.approx(
        body["slo_attainment"] * body["throughput_requests_per_s"]
    )
    assert body["goodput_requests_per_s"] <= body["throughput_requests_per_s"]
    little = body["littles_law"]
    assert little["mean_in_system"] == pytest.approx(little["throughput_times_residence"], rel=0.02)
    assert 0 < body["peak_kv_utilization"] < 1
    assert body["preemptions"] == 0
    series = body["time_series"]
    assert 2 <= len(series["time_s"]) <= 200
    assert len(series["queue_length"]) == len(series["kv_utilization"]) == len(series["time_s"])
    assert series["preemptions"] == [0] * len(series["time_s"])  # none in the whole run
    assert max(series["kv_utilization"]) <= body["peak_kv_utilization"] + 1e-12
    assert body["engine_config"]["max_num_batched_tokens"] == 8192
    assert not any("closed loop" in w for w in body["warnings"])


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_a_lone_request_sees_the_zero_load_ttft(client: TestClient, engine: str) -> None:
    # One request every 100 s: each finds the engine idle, so TTFT is the request overhead plus
    # one 512-token prefill step — what /v1/performance reports as the zero-load TTFT when both
    # tiers use the same constants (the neutral ones: the fitted sets differ by tier).
    perf = client.post(
        "/v1/performance",
        json={
            "model": MODEL,
            "hardware": "h100-sxm",
            "deployment": {"engine": engine},
            "calibrated": False,
            "workload": {"concurrency": 1, "input_tokens": 512, "output_tokens": 64},
        },
    ).json()
    body = sim(
        client,
        deployment={"engine": engine},
        calibrated=False,
        traffic=open_loop(0.01, num_requests=5, warmup_requests=0, arrival={"process": "constant"}),
    ).json()
    assert body["ttft_s"]["p50"] == pytest.approx(perf["ttft_zero_load_s"], rel=1e-6)
    assert body["ttft_s"]["p99"] == pytest.approx(perf["ttft_zero_load_s"], rel=1e-6)
    assert body["queueing_delay_s"]["p99"] == 0
    # Alone, every decode step runs one sequence: TPOT is about a batch-1 decode step.
    assert body["tpot_s"]["mean"] == pytest.approx(perf["decode_step_time_s"], rel=0.1)


def test_latency_rises_with_load(client: TestClient) -> None:
    light = sim(client, traffic=open_loop(2.0)).json()
    heavy = sim(client, traffic=open_loop(10.0, num_requests=400)).json()
    assert heavy["stable"], heavy["stability_reason"]
    assert heavy["ttft_s"]["mean"] > light["ttft_s"]["mean"]
    assert heavy["tpot_s"]["mean"] > light["tpot_s"]["mean"]
    assert heavy["e2e_s"]["p95"] > light["e2e_s"]["p95"]


def test_same_seed_same_response(client: TestClient) -> None:
    traffic = open_loop(
        8.0,
        input_tokens={"kind": "uniform", "low_tokens": 100, "high_tokens": 900},
        output_tokens={"kind": "lognormal", "mean_tokens": 64.0, "cv": 0.5, "max_tokens": 256},
        arrival={"process": "gamma", "rate_per_s": 8.0, "cv": 2.0},
    )
    first = sim(client, traffic=traffic, replicas=2, routing="random")
    second = sim(client, traffic=traffic, replicas=2, routing="random")
    assert first.status_code == 200, first.text
    assert first.json() == second.json()
    other = sim(client, traffic=traffic | {"seed": 4}, replicas=2, routing="random")
    assert other.json() != first.json()


def test_closed_loop_warns_that_it_lowers_offered_load(client: TestClient) -> None:
    traffic = {
        "mode": "closed_loop",
        "concurrency": 8,
        "input_tokens": {"kind": "normal", "mean_tokens": 512.0, "std_tokens": 64.0},
        "output_tokens": 64,
        "num_requests": 160,
        "warmup_requests": 16,
    }
    response = sim(client, traffic=traffic)
    assert response.status_code == 200, response.text
    body = response.json()
    assert any("closed loop" in w for w in body["warnings"])
    assert body["completed"] == body["measured"] == 144
    # Response-time law with no think time: X = N / R (8 clients, each always waiting).
    x, r = body["throughput_requests_per_s"], body["e2e_s"]["mean"] - body["request_overhead_s"]
    assert x == pytest.approx(8 / (r + body["request_overhead_s"]), rel=0.15)


def test_timeouts_are_counted_and_the_response_stays_json(client: TestClient) -> None:
    response = sim(client, traffic=open_loop(30.0, timeout_s=0.2))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["timed_out"] > 0
    outcomes = ("completed", "failed", "timed_out", "rejected")
    assert sum(body[k] for k in outcomes) == body["measured"]
    assert body["failed"] == 0


def test_outcome_counts_are_disjoint_and_add_up_to_the_requests_sent(client: TestClient) -> None:
    # 500 requests with a 50 ms client timeout: a prefill of 512 tokens plus 64 decode steps
    # take longer than 50 ms on an H100, so every request times out. Each is counted once:
    # the four counts add up to the 500 sent (no warm-up, so all are measured).
    traffic = open_loop(20.0, timeout_s=0.05) | {"num_requests": 500, "warmup_requests": 0}
    response = sim(client, traffic=traffic)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["measured"] == 500
    assert body["completed"] + body["failed"] + body["timed_out"] + body["rejected"] == 500
    assert body["timed_out"] == 500
    assert body["failed"] == 0


def test_infinite_statistics_render_as_null_and_are_named() -> None:
    # Two of 100 requests failed (+inf): p99 and the mean are infinite, p50..p95 finite.
    values = np.concatenate((np.linspace(0.1, 0.2, 98), [np.inf, np.inf]))
    out = latency_out(LatencyStats.of(values))
    assert out.infinite == ["mean", "p99"]
    assert out.mean is None
    assert out.p99 is None
    assert out.p50 == pytest.approx(float(values[49:51].mean()))  # h = 99 · 0.5 = 49.5
    assert out.count == 100
    empty = latency_out(LatencyStats.of(np.zeros(0)))
    assert empty.infinite == []
    assert empty.p50 is None


def test_overload_withholds_percentiles(client: TestClient) -> None:
    body = sim(client, traffic=open_loop(2000.0, num_requests=400, output_tokens=256)).json()
    assert body["stable"] is False
    assert body["stability_reason"]
    assert body["ttft_s"] is None
    assert body["e2e_s"] is None
    assert any("unstable" in w for w in body["warnings"])


def test_too_many_requests_is_refused(client: TestClient) -> None:
    response = sim(client, traffic=open_loop(1.0, num_requests=50_001))
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert [e["pointer"] for e in errors] == ["/traffic/num_requests"]
    assert "50000" in errors[0]["detail"]


def test_too_much_work_is_refused(client: TestClient) -> None:
    response = sim(client, traffic=open_loop(1.0, num_requests=50_000, input_tokens=8192))
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"].endswith("simulation-too-large")
    assert [e["pointer"] for e in problem["errors"]] == ["/traffic/num_requests"]


@pytest.mark.parametrize(
    ("length", "pointer"),
    [
        ({"kind": "uniform", "low_tokens": 900, "high_tokens": 100}, "/traffic/input_tokens"),
        ({"kind": "normal", "mean_tokens": 512.0, "std_tokens": -1.0}, "/traffic/input_tokens"),
        ({"kind": "lognormal", "mean_tokens": 512.0}, "/traffic/input_tokens"),
        ({"kind": "zipf", "tokens": 5}, "/traffic/input_tokens"),
        (0, "/traffic/input_tokens"),
    ],
)
def test_invalid_distributions_point_at_the_field(
    client: TestClient, length: Any, pointer: str
) -> None:
    response = sim(client, traffic=open_loop(1.0, input_tokens=length))
    assert response.status_code == 422
    pointers = [e["pointer"] for e in response.json()["errors"]]
    assert pointers
    assert all(p.startswith(pointer) for p in pointers), pointers


def test_requests_longer_than_the_context_are_refused(client: TestClient) -> None:
    response = sim(
        client,
        deployment={"max_model_len": 1024},
        traffic=open_loop(1.0, input_tokens=1000, output_tokens=100),
    )
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"].endswith("request-too-long")
    assert {e["pointer"] for e in problem["errors"]} == {
        "/traffic/input_tokens",
        "/traffic/output_tokens",
    }


def test_warmup_must_leave_requests_to_measure(client: TestClient) -> None:
    response = sim(client, traffic=open_loop(1.0, num_requests=10, warmup_requests=10))
    assert response.status_code == 422
    assert [e["pointer"] for e in response.json()["errors"]] == ["/traffic"]


def test_a_window_too_short_to_judge_says_so(client: TestClient) -> None:
    # 12 requests at 20/s span about 0.5 s, while each stays for 256 decode steps (> 1 s):
    # the queue cannot be told apart from one still filling up.
    body = sim(
        client, traffic=open_loop(20.0, num_requests=12, output_tokens=256, warmup_requests=1)
    ).json()
    assert body["stable"] is False
    assert body["stability_conclusive"] is False
    assert "too short" in body["stability_reason"]
    longer = sim(client, traffic=open_loop(2.0, num_requests=300, output_tokens=64)).json()
    assert longer["stable"] is True
    assert longer["stability_conclusive"] is True


def test_an_empty_slo_and_a_budget_that_multiplies_steps_are_refused(client: TestClient) -> None:
    empty = sim(client, traffic=open_loop(4.0), slo={})
    assert empty.status_code == 422
    assert empty.json()["errors"][0]["pointer"] == "/slo"
    # 50,000 prompts of 512 tokens at 8 tokens per step: 3.2 million prefill steps.
    tiny = sim(
        client,
        traffic=open_loop(4.0, num_requests=50_000),
        deployment={"max_num_seqs": 8, "max_num_batched_tokens": 8},
    )
    assert tiny.status_code == 422, tiny.text
    assert tiny.json()["errors"][0]["pointer"] == "/deployment/max_num_batched_tokens"


@pytest.mark.parametrize(
    ("engine", "policy"),
    [("vllm", "vllm_v1"), ("sglang", "prefill_first"), ("trtllm", "no_chunking")],
)
def test_unset_policy_is_the_engines_own_scheduler(
    client: TestClient, engine: str, policy: str
) -> None:
    response = sim(client, deployment={"engine": engine}, traffic=open_loop(2.0, 60))
    assert response.status_code == 200, response.text
    assert response.json()["engine_config"]["policy"] == policy


def test_a_given_policy_overrides_the_engines_scheduler(client: TestClient) -> None:
    response = sim(
        client,
        deployment={"engine": "sglang"},
        policy="vllm_v1",
        traffic=open_loop(2.0, 60),
    )
    assert response.status_code == 200, response.text
    assert response.json()["engine_config"]["policy"] == "vllm_v1"


def test_prompts_longer_than_the_budget_without_chunking_are_a_422(client: TestClient) -> None:
    # TensorRT-LLM's default scheduler runs prompts whole: a 10,000-token prompt cannot fit the
    # 8192-token budget, so the engine would refuse every request (GUARANTEED_NO_EVICT never
    # preempts, so the prompt alone counts).
    traffic = open_loop(0.5, 30, input_tokens=10_000, warmup_requests=0)
    deployment = {"engine": "trtllm", "max_model_len": 16384}
    response = sim(client, deployment=deployment, traffic=traffic)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["errors"][0]["pointer"] == "/deployment/max_num_batched_tokens"
    assert "10000 tokens" in problem["detail"]
    assert "8192" in problem["detail"]
    chunked = sim(client, deployment=deployment, traffic=traffic, policy="vllm_v1")
    assert chunked.status_code == 200, chunked.text
    assert chunked.json()["completed"] > 0
    bigger = sim(
        client,
        deployment=deployment | {"max_num_batched_tokens": 10_000},
        traffic=traffic,
    )
    assert bigger.status_code == 200, bigger.text
    assert bigger.json()["engine_config"]["policy"] == "no_chunking"
    assert bigger.json()["completed"] == 30


def test_the_whole_prompt_limit_counts_the_output_and_is_per_rank(client: TestClient) -> None:
    # Under MAX_UTILIZATION a request paused late recomputes 8000 + 500 − 1 = 8499 tokens in
    # one step: over 8192 although the prompt alone fits. GUARANTEED_NO_EVICT never pauses.
    long_output = open_loop(0.5, 30, input_tokens=8000, output_tokens=500, warmup_requests=0)
    deployment = {"engine": "trtllm", "max_model_len": 16384}
    evicting = deployment | {"capacity_scheduler_policy": "max_utilization"}
    response = sim(client, deployment=evicting, traffic=long_output)
    assert response.status_code == 422, response.text
    assert "8499" in response.json()["detail"]
    no_evict = sim(client, deployment=deployment, traffic=long_output)
    assert no_evict.status_code == 200, no_evict.text
    # Two data-parallel ranks pool 16384 tokens in the simulated engine, but each rank still
    # has 8192: 10,063-token requests are refused.
    traffic = open_loop(0.5, 30, input_tokens=10_000, warmup_requests=0)
    ranks = sim(client, deployment=deployment | {"data_parallel_size": 2}, traffic=traffic)
    assert ranks.status_code == 422, ranks.text
    assert "8192 per rank" in ranks.json()["detail"]
