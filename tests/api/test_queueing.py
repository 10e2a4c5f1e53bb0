"""/v1/queueing against closed forms worked by hand and published tables."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient


def ask(client: TestClient, **body: Any) -> Any:
    return client.post("/v1/queueing", json=body)


def test_littles_law_the_seeds_example(client: TestClient) -> None:
    # 10 requests/s × 2 s residence = 20 in flight.
    body = ask(client, model="littles_law", arrival_rate_per_s=10, residence_time_s=2).json()
    assert body["in_flight"] == pytest.approx(20)
    assert body["solved_for"] == "in_flight"
    back = ask(client, model="littles_law", in_flight=20, residence_time_s=2).json()
    assert back["arrival_rate_per_s"] == pytest.approx(10)


def test_littles_law_needs_two_of_three(client: TestClient) -> None:
    response = ask(client, model="littles_law", arrival_rate_per_s=10)
    assert response.status_code == 422


def test_mm1_closed_forms(client: TestClient) -> None:
    # λ = 0.7, μ = 1: P(wait) = ρ = 0.7, Wq = ρ/(μ − λ) = 7/3 s, response ~ Exp(0.3):
    # p95 = ln(20)/0.3 s.
    body = ask(client, model="mmc", arrival_rate_per_s=0.7, service_time_s=1.0).json()
    assert body["wait_probability"] == pytest.approx(0.7)
    assert body["mean_wait_s"] == pytest.approx(7 / 3)
    assert body["response_percentiles_s"]["p95"] == pytest.approx(math.log(20) / 0.3)


def test_erlang_c_published_table(client: TestClient) -> None:
    # c = 10 servers, a = 8 Erlangs: P(wait) = 0.4092 in standard Erlang C tables.
    body = ask(client, model="mmc", arrival_rate_per_s=8, service_time_s=1, servers=10).json()
    assert body["wait_probability"] == pytest.approx(0.4092, abs=5e-5)
    assert body["utilization"] == pytest.approx(0.8)


def test_md1_pollaczek_khinchine(client: TestClient) -> None:
    # M/D/1 at ρ = 0.8, S = 1 s: Wq = ρ·S/(2(1 − ρ)) = 2 s.
    body = ask(client, model="mg1", arrival_rate_per_s=0.8, service_time_s=1, service_scv=0).json()
    assert body["mean_wait_s"] == pytest.approx(2.0)


def test_kingman_reduces_to_mm1(client: TestClient) -> None:
    body = ask(client, model="ggc", arrival_rate_per_s=0.7, service_time_s=1.0).json()
    assert body["mean_wait_s"] == pytest.approx(7 / 3)
    assert body["validity"]["exact"] is False


def test_unstable_queue_is_a_422(client: TestClient) -> None:
    response = ask(client, model="mmc", arrival_rate_per_s=2, service_time_s=1)
    assert response.status_code == 422
    assert response.json()["type"].endswith("unstable-queue")


def test_bad_inputs_point_at_the_field(client: TestClient) -> None:
    response = ask(client, model="mg1", arrival_rate_per_s=-1, service_time_s=1, servers=2)
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert any(p.endswith("arrival_rate_per_s") for p in pointers)
    unknown = ask(client, model="m/m/inf", arrival_rate_per_s=1, service_time_s=1)
    assert unknown.status_code == 422


def engine_mode(client: TestClient, rate: float, **extra: Any) -> Any:
    body = {
        "model": "continuous_batching",
        "llm": "meta-llama/Llama-3.1-8B",
        "hardware": "h100-sxm",
        "arrival_rate_per_s": rate,
        "input_tokens": 1024,
        "output_tokens": 128,
    }
    return ask(client, **(body | extra))


def test_model_mode_answers_with_saturation_and_latency(client: TestClient) -> None:
    light = engine_mode(client, 0.01).json()
    loaded = engine_mode(client, 0.8 * light["saturation_rate_per_s"]).json()
    assert light["utilization"] < 0.01
    assert loaded["utilization"] == pytest.approx(0.8)
    assert loaded["ttft_s"]["mean"] > light["ttft_s"]["mean"]
    assert loaded["tpot_s"] > light["tpot_s"]
    # Little's law: 0.8·λ_sat requests/s, each in flight for about its E2E latency.
    assert loaded["mean_in_system"] > light["mean_in_system"]
    assert loaded["validity"]["exact"] is False


def test_model_mode_over_saturation_is_unstable(client: TestClient) -> None:
    saturation = engine_mode(client, 0.01).json()["saturation_rate_per_s"]
    response = engine_mode(client, 1.5 * saturation)
    assert response.status_code == 422
    assert response.json()["type"].endswith("unstable-queue")


def test_model_mode_inline_config_errors_point_at_llm(client: TestClient) -> None:
    response = engine_mode(client, 1.0, llm={"hf_config": {"model_type": "llama"}})
    assert response.status_code == 422
    assert "/llm/hf_config/hidden_size" in {e["pointer"] for e in response.json()["errors"]}


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"arrival_rate_per_s": 0, "in_flight": 5}, "/arrival_rate_per_s"),
        ({"residence_time_s": 0, "in_flight": 5}, "/residence_time_s"),
        ({"arrival_rate_per_s": 1e308, "residence_time_s": 1e308}, "/arrival_rate_per_s"),
    ],
)
def test_littles_law_that_cannot_be_solved_is_a_422_with_its_field(
    client: TestClient, body: dict[str, float], pointer: str
) -> None:
    response = client.post("/v1/queueing", json={"model": "littles_law"} | body)
    assert response.status_code == 422, response.text
    assert [e["pointer"] for e in response.json()["errors"]] == [pointer]


def test_percentile_keys_keep_their_precision_and_duplicates_are_refused(
    client: TestClient,
) -> None:
    body = {"model": "mmc", "arrival_rate_per_s": 0.5, "service_time_s": 1.0}
    ok = client.post("/v1/queueing", json=body | {"percentiles": [0.5, 0.999, 0.999999]})
    assert ok.status_code == 200, ok.text
    assert sorted(ok.json()["wait_percentiles_s"]) == ["p50", "p99.9", "p99.9999"]
    twice = client.post("/v1/queueing", json=body | {"percentiles": [0.5, 0.5]})
    assert twice.status_code == 422
    assert twice.json()["errors"][0]["pointer"] == "/percentiles"


def test_model_mode_refuses_requests_longer_than_the_context(client: TestClient) -> None:
    body = {
        "model": "continuous_batching",
        "llm": "meta-llama/Llama-3.1-8B",
        "hardware": "h100-sxm",
        "arrival_rate_per_s": 1.0,
        "input_tokens": 16_000_000,
        "output_tokens": 10,
    }
    response = client.post("/v1/queueing", json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "/input_tokens"


def test_an_unstable_queue_points_at_the_rate(client: TestClient) -> None:
    body = {"model": "mmc", "arrival_rate_per_s": 20.0, "service_time_s": 1.0, "servers": 10}
    response = client.post("/v1/queueing", json=body)
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"].endswith("unstable-queue")
    assert problem["errors"][0]["pointer"] == "/arrival_rate_per_s"
