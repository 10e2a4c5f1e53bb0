"""/v1/simulate: trace replay, histogram lengths, explicit overheads, cool-down,
disaggregation and a server that keeps answering while a simulation runs."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.api.simulation_runner import run_simulation
from servesize.core.traffic import CLOSED_LOOP_WARNING

MODEL = "meta-llama/Llama-3.1-8B"
# Llama-3.1-8B: 32 layers, 8 KV heads of 128, bf16: 2 · 32 · 8 · 128 · 2 bytes per token.
KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2
TRACE: dict[str, list[Any]] = {
    "arrival_s": [0.0, 0.5, 1.0, 1.25, 3.0],
    "input_tokens": [512, 1024, 128, 700, 300],
    "output_tokens": [64, 16, 32, 8, 40],
}


def sim(client: TestClient, **body: Any) -> Any:
    return client.post("/v1/simulate", json={"model": MODEL, "hardware": "h100-sxm"} | body)


def pointers(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    return [e["pointer"] for e in response.json()["errors"]]


def test_inline_trace_is_replayed_request_by_request(client: TestClient) -> None:
    body = sim(client, traffic={"trace": TRACE, "warmup_requests": 1}).json()
    assert body["measured"] == body["completed"] == 4
    assert body["window_start_s"] == 0.5  # request 1, after one warm-up request
    assert body["window_end_s"] == 3.0
    assert body["offered_rate_per_s"] == pytest.approx(3 / 2.5)


def test_trace_files_replay_like_the_inline_trace(client: TestClient) -> None:
    inline = sim(client, traffic={"trace": TRACE}).json()
    rows = zip(TRACE["arrival_s"], TRACE["input_tokens"], TRACE["output_tokens"], strict=True)
    rows_list = list(rows)
    csv = "timestamp,input_tokens,output_tokens\n" + "".join(
        f"{t + 7.0},{i},{o}\n"
        for t, i, o in rows_list  # shifted to start at 0
    )
    jsonl = "".join(
        f'{{"timestamp": {t * 1000:.0f}, "input_length": {i}, "output_length": {o}, '
        f'"hash_ids": [1, 2]}}\n'
        for t, i, o in rows_list
    )
    for fmt, text in (("csv", csv), ("jsonl", jsonl)):
        replay = sim(client, traffic={"trace": {"format": fmt, "file": text}})
        assert replay.status_code == 200, replay.text
        assert replay.json()["ttft_s"] == inline["ttft_s"], fmt
        assert replay.json()["e2e_s"] == inline["e2e_s"], fmt


@pytest.mark.parametrize(
    ("trace", "pointer"),
    [
        (TRACE | {"arrival_s": [0.0, 0.5, 0.2, 1.25, 3.0]}, "/traffic/trace/arrival_s/2"),
        (TRACE | {"arrival_s": [0.0, -0.5, 1.0, 1.25, 3.0]}, "/traffic/trace/arrival_s/1"),
        (TRACE | {"input_tokens": [512, 1024]}, "/traffic/trace/input_tokens"),
        (TRACE | {"output_tokens": [64, 16, 0, 8, 40]}, "/traffic/trace/output_tokens/2"),
        (TRACE | {"input_tokens": [512, 1024, 128, 700, 200_000]}, "/traffic/trace/input_tokens/4"),
        ({"format": "jsonl", "file": '{"timestamp": 0}\n'}, "/traffic/trace/file"),
        ({"format": "csv", "file": "t,input_tokens,output_tokens\n0,1,1\n"}, "/traffic/trace/file"),
        ({"file": "arrival_s,input_tokens,output_tokens\n0,1,1\n"}, "/traffic/trace"),
    ],
)
def test_bad_traces_point_at_the_entry(
    client: TestClient, trace: dict[str, Any], pointer: str
) -> None:
    assert pointers(sim(client, traffic={"trace": trace})) == [pointer]


def test_trace_process_needs_a_trace_and_an_open_loop(client: TestClient) -> None:
    assert pointers(sim(client, traffic={"arrival": {"process": "trace"}})) == ["/traffic"]
    closed = {"trace": TRACE, "mode": "closed_loop"}
    assert pointers(sim(client, traffic=closed)) == ["/traffic"]
    sized = {"trace": TRACE, "num_requests": 10}
    assert pointers(sim(client, traffic=sized)) == ["/traffic"]
    assert pointers(sim(client, traffic={"trace": TRACE, "warmup_requests": 5})) == ["/traffic"]


def test_histogram_with_one_weighted_value_is_that_fixed_length(client: TestClient) -> None:
    traffic = {
        "arrival": {"process": "poisson", "rate_per_s": 4.0},
        "input_tokens": 256,
        "num_requests": 60,
        "seed": 5,
    }
    fixed = sim(client, traffic=traffic | {"output_tokens": 48}).json()
    histogram = {"kind": "histogram", "tokens": [8, 48, 2000], "weights": [0, 1, 0]}
    drawn = sim(client, traffic=traffic | {"output_tokens": histogram}).json()
    assert drawn["e2e_s"] == fixed["e2e_s"]
    bad = {"kind": "histogram", "tokens": [8, 48], "weights": [1.0]}
    assert pointers(sim(client, traffic=traffic | {"input_tokens": bad})) == [
        "/traffic/input_tokens"
    ]


def test_client_overheads_shift_ttft_and_e2e_but_not_the_engine_figures(
    client: TestClient,
) -> None:
    traffic = {"arrival": {"rate_per_s": 3.0}, "input_tokens": 256, "output_tokens": 32}
    traffic |= {"num_requests": 80}
    overheads = {"preprocess_s": 0.01, "output_processing_s": 0.002, "network_rtt_s": 0.02}
    body = sim(client, traffic=traffic, overheads=overheads).json()
    assert body["overheads"] == overheads | {"total_s": pytest.approx(0.032), "source": "request"}
    assert body["request_overhead_s"] == pytest.approx(0.032)
    assert not any(d["field"] == "overheads" for d in body["defaults_applied"])
    for client_name, engine_name in (("ttft_s", "engine_ttft_s"), ("e2e_s", "engine_e2e_s")):
        for stat in ("mean", "p50", "p90", "p95", "p99"):
            assert body[client_name][stat] == pytest.approx(
                body[engine_name][stat] + 0.032, abs=1e-12
            )
    # The engine does not see client overheads: same engine figures as with none at all.
    bare = sim(client, traffic=traffic, overheads={}).json()
    assert bare["engine_ttft_s"] == body["engine_ttft_s"]
    assert bare["ttft_s"] == bare["engine_ttft_s"]
    default = sim(client, traffic=traffic).json()
    assert default["overheads"]["source"] == "engine_profile"
    assert default["overheads"]["preprocess_s"] == default["request_overhead_s"] > 0
    assert any(d["field"] == "overheads" for d in default["defaults_applied"])


def test_cooldown_requests_are_sent_but_not_measured(client: TestClient) -> None:
    traffic = {
        "arrival": {"process": "constant", "rate_per_s": 2.0},
        "input_tokens": 256,
        "output_tokens": 16,
        "num_requests": 100,
        "warmup_requests": 10,
        "cooldown_requests": 20,
    }
    body = sim(client, traffic=traffic).json()
    assert body["measured"] == 70
    assert body["window_start_s"] == pytest.approx(10 / 2.0)  # request 10 at 10 · 0.5 s
    assert body["window_end_s"] == pytest.approx(79 / 2.0)  # request 79, the last measured
    too_many = traffic | {"warmup_requests": 50, "cooldown_requests": 50}
    assert pointers(sim(client, traffic=too_many)) == ["/traffic"]


def test_closed_loop_runs_carry_the_closed_loop_warning(client: TestClient) -> None:
    traffic = {"mode": "closed_loop", "concurrency": 4, "num_requests": 40}
    traffic |= {"input_tokens": 256, "output_tokens": 16, "cooldown_requests": 4}
    body = sim(client, traffic=traffic).json()
    assert CLOSED_LOOP_WARNING in body["warnings"]
    assert body["measured"] == 36
    opened = sim(client, traffic={"num_requests": 40, "input_tokens": 256, "output_tokens": 16})
    assert CLOSED_LOOP_WARNING not in opened.json()["warnings"]


def test_disaggregated_transfer_time_is_latency_plus_bytes_over_bandwidth(
    client: TestClient,
) -> None:
    traffic = {
        "arrival": {"process": "constant", "rate_per_s": 1.0},
        "input_tokens": 1000,
        "output_tokens": 8,
        "num_requests": 20,
    }
    kv = {"latency_s": 0.01, "bandwidth_bytes_per_s": 1e9}
    disagg = {"prefill_replicas": 1, "decode_replicas": 2, "kv_transfer": kv}
    body = sim(client, traffic=traffic, disaggregation=disagg).json()
    out = body["disaggregation"]
    assert out["kv_bytes_per_token"] == KV_BYTES_PER_TOKEN == 131_072
    # 1000 tokens · 131,072 B = 131.072 MB at 1 GB/s is 0.131072 s, plus 0.01 s.
    for stat in ("mean", "p50", "p99"):
        assert out["transfer_s"][stat] == pytest.approx(0.141072, rel=1e-9)
    assert out["transfer_s"]["count"] == 20
    assert body["engine_config"]["engine_replicas"] == 3
    assert out["bandwidth_source"] == "request"
    # Default: the H100's NVLink, 450 GB/s per direction, no fixed latency.
    default = sim(client, traffic=traffic, disaggregation={"decode_replicas": 1}).json()
    moved = default["disaggregation"]
    assert moved["bandwidth_source"] == "hardware_interconnect"
    assert moved["bandwidth_bytes_per_s"] == 450e9
    assert moved["transfer_s"]["p50"] == pytest.approx(1000 * 131_072 / 450e9, rel=1e-9)
    # An idle prefill replica hands over after one prompt step; TTFT does not wait for the KV
    # by default, so disaggregated TTFT at this load equals the aggregated one.
    plain = sim(client, traffic=traffic).json()
    assert default["ttft_s"]["p50"] == pytest.approx(plain["ttft_s"]["p50"], rel=1e-9)
    both = sim(client, traffic=traffic, disaggregation={}, replicas=2)
    assert pointers(both) == ["/replicas"]


def test_a_running_simulation_does_not_block_the_server(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulation holds its thread until /livez has answered: a blocked event loop would
    leave /livez waiting, the simulation would give up waiting and the test fails."""
    started, answered = threading.Event(), threading.Event()
    waited: list[bool] = []

    def held(*args: Any, **kwargs: Any) -> Any:
        started.set()
        waited.append(answered.wait(timeout=60))
        return run_simulation(*args, **kwargs)

    monkeypatch.setattr("servesize.api.routes.simulate.run_simulation", held)
    responses: list[Any] = []
    traffic = {"num_requests": 50, "input_tokens": 256, "output_tokens": 16}
    worker = threading.Thread(target=lambda: responses.append(sim(client, traffic=traffic)))
    worker.start()
    assert started.wait(timeout=60)
    live = client.get("/livez")
    answered.set()
    worker.join()
    assert live.status_code == 200
    assert waited == [True]  # /livez answered while the simulation was running
    assert responses[0].status_code == 200
