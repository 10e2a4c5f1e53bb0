"""Session traffic over HTTP: the simulator's cached history against block arithmetic done by
hand, and the steady-state tier's equivalent point."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

MODEL = "meta-llama/Llama-3.1-8B"
SESSIONS = {
    "sessions_per_s": 0.5,
    "num_sessions": 20,
    "turns": 3,
    "think_time_s": 1.0,
    "new_tokens": 100,
    "output_tokens": 50,
}


def simulate(client: TestClient, traffic: dict[str, Any], **body: Any) -> Any:
    payload = {"model": MODEL, "hardware": "h100-sxm", "traffic": traffic} | body
    return client.post("/v1/simulate", json=payload)


def test_history_is_served_from_the_prefix_cache(client: TestClient) -> None:
    """Turns of 100 new and 50 output tokens: prompts 100, 250, 400 (750 per session). With
    16-token blocks a turn leaves ``floor((P + O − 1) / 16)`` full blocks cached: turn 1 149
    tokens → 9 blocks (144), turn 2 299 → 18 blocks (288). A pool of ~30,000 blocks holds every
    history, so each session hits 144 + 288 = 432 of 750 prompt tokens: 0.576."""
    response = simulate(client, {"sessions": SESSIONS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["measured"] == 60  # 20 sessions × 3 turns
    assert body["completed"] == 60
    assert body["prefix_cache_hit_rate"] == pytest.approx(432 / 750)
    off = simulate(
        client, {"sessions": SESSIONS}, deployment={"enable_prefix_caching": False}
    ).json()
    assert off["prefix_cache_hit_rate"] is None
    assert off["engine_ttft_s"]["mean"] > body["engine_ttft_s"]["mean"]


def test_sessions_refuse_independent_request_fields(client: TestClient) -> None:
    response = simulate(client, {"sessions": SESSIONS, "num_requests": 10})
    assert response.status_code == 422
    assert "num_requests" in response.text
    closed = simulate(client, {"sessions": SESSIONS, "mode": "closed_loop"})
    assert closed.status_code == 422
    window = simulate(client, {"sessions": SESSIONS | {"num_sessions": 2}, "warmup_requests": 6})
    assert window.status_code == 422
    assert any(e["pointer"] == "/traffic/warmup_requests" for e in window.json()["errors"])


def test_history_beyond_the_context_names_the_turns(client: TestClient) -> None:
    long = SESSIONS | {"turns": 40, "new_tokens": 4000}
    response = simulate(client, {"sessions": long}, deployment={"max_model_len": 8192})
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "/traffic/sessions/turns"


def test_performance_takes_the_mean_turn(client: TestClient) -> None:
    """Three turns: mean ISL (100 + 250 + 400) / 3 = 250, history (0 + 150 + 300) / 3 = 150
    (share 0.6), 0.5 sessions/s × 3 turns = 1.5 requests/s. The answer is the point with
    those lengths and a 0.6 hit rate."""
    payload = {"model": MODEL, "hardware": "h100-sxm"}
    sessions = client.post(
        "/v1/performance", json=payload | {"workload": {"concurrency": 4, "sessions": SESSIONS}}
    )
    assert sessions.status_code == 200, sessions.text
    body = sessions.json()
    assert body["sessions"]["input_tokens"] == pytest.approx(250.0)
    assert body["sessions"]["history_share"] == pytest.approx(0.6)
    assert body["sessions"]["requests_per_s"] == pytest.approx(1.5)
    assert (body["input_tokens"], body["output_tokens"]) == (250, 50)
    point = {
        "concurrency": 4,
        "input_tokens": 250,
        "output_tokens": 50,
        "prefix": {"cache_hit_rate": 0.6},
    }
    same = client.post("/v1/performance", json=payload | {"workload": point}).json()
    assert body["ttft_s"] == same["ttft_s"]
    assert body["prefix_cache"] == same["prefix_cache"]
    clash = client.post(
        "/v1/performance",
        json=payload | {"workload": {"sessions": SESSIONS, "input_tokens": 10}},
    )
    assert clash.status_code == 422


def test_slo_tiers_refuse_sessions(client: TestClient) -> None:
    response = client.post(
        "/v1/slo/evaluate",
        json={
            "model": MODEL,
            "hardware": "h100-sxm",
            "traffic": {"sessions": SESSIONS},
            "slo": {"ttft_s": {"p95": 1.0}},
        },
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "/traffic/sessions"
