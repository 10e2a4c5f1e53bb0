"""``/v1/simulate``'s TTFT and ITL histograms against counts worked out by hand, and the p99
entries of ``/v1/slo/capacity``'s curve."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

BODY: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "hardware": "h100-sxm",
    "traffic": {
        "arrival": {"process": "poisson", "rate_per_s": 1.0},
        "input_tokens": 256,
        "output_tokens": 16,
        "num_requests": 50,
        "seed": 2,
        "warmup_requests": 5,
    },
}


def test_histograms_count_every_measured_request_and_gap(client: TestClient) -> None:
    answer = client.post("/v1/simulate", json=BODY)
    assert answer.status_code == 200, answer.text
    sim = answer.json()
    assert sim["stable"]
    # 50 requests, 5 of them warm-up: 45 measured, all complete at 1 request/s.
    assert sim["completed"] == sim["measured"] == 45
    ttft, itl = sim["histograms"]["ttft_s"], sim["histograms"]["itl_s"]
    for hist in (ttft, itl):
        assert len(hist["edges_s"]) == len(hist["counts"]) + 1 == 31
        assert hist["edges_s"] == sorted(hist["edges_s"])
    assert sum(ttft["counts"]) == 45
    # Each request streams 16 tokens: 15 gaps after its first, 45 × 15 = 675 gaps in all.
    assert sum(itl["counts"]) == 45 * 15
    assert ttft["edges_s"][0] <= sim["ttft_s"]["p50"] <= ttft["edges_s"][-1]
    # The histogram's median bin holds the reported median.
    cumulative, median_bin = 0, 0
    for i, count in enumerate(ttft["counts"]):
        cumulative += count
        if cumulative >= 45 / 2:
            median_bin = i
            break
    assert ttft["edges_s"][median_bin] <= sim["ttft_s"]["p50"] <= ttft["edges_s"][median_bin + 1]


def test_an_unstable_run_withholds_its_histograms(client: TestClient) -> None:
    overload = {**BODY["traffic"], "arrival": {"process": "poisson", "rate_per_s": 2000.0}}
    body = {**BODY, "traffic": {**overload, "num_requests": 400, "input_tokens": 4096}}
    sim = client.post("/v1/simulate", json=body).json()
    assert not sim["stable"]
    assert sim["histograms"] is None
    assert sim["ttft_s"] is None


def test_equal_values_fall_in_one_bin(client: TestClient) -> None:
    # Four closed-loop clients with fixed lengths move in lock step: every request is admitted
    # with the same three others, so every TTFT is the same number (numpy cannot cut a zero-width
    # range into 30 bins: one bin holds them all).
    traffic = {"mode": "closed_loop", "concurrency": 4, "num_requests": 40}
    traffic |= {"input_tokens": 256, "output_tokens": 16, "cooldown_requests": 4}
    sim = client.post("/v1/simulate", json={**BODY, "traffic": traffic})
    assert sim.status_code == 200, sim.text
    answer = sim.json()
    ttft = answer["histograms"]["ttft_s"]
    assert len(ttft["counts"]) == 1
    assert ttft["counts"] == [answer["completed"]]
    assert ttft["edges_s"][0] == answer["ttft_s"]["p50"]
