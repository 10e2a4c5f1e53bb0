"""The endpoint benchmark against a fake streaming server with known delays on loopback."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import httpx2
import numpy as np
import pytest
from typer.testing import CliRunner

from servesize.agent.cli import app
from servesize.agent.endpoint import (
    EndpointTarget,
    LoadLevel,
    RequestRecord,
    Slo,
    arrival_offsets_s,
    benchmark_endpoint,
    latency_stats,
    run_level,
    summarize_level,
)
from servesize.agent.upload import SavedMeasurement
from servesize.schemas.measurements import EndpointLevel
from tests.agent.agent_fakes import Action, StreamingState, streaming_server

FIRST_TOKEN_S = 0.050
TOKEN_INTERVAL_S = 0.020
OUTPUT_TOKENS = 5
# Client-side times include loopback connect, thread start and event-loop scheduling, and this
# runs on a shared 2-core machine: TTFT may be late by up to 30 ms, never early; a chunk gap may
# move by up to 8 ms either way, but the server keeps an absolute schedule, so TPOT (an average
# over the gaps) stays within 5 ms.
TTFT_LATE_S = 0.030
GAP_TOLERANCE_S = 0.008
TPOT_TOLERANCE_S = 0.005


def _target(url: str, *, timeout_s: float = 5.0) -> EndpointTarget:
    return EndpointTarget(
        url=url,
        model="fake-model",
        input_tokens=16,
        output_tokens=OUTPUT_TOKENS,
        timeout_s=timeout_s,
    )


def _assert_matches_server_delays(level: EndpointLevel) -> None:
    assert level.ttft_s is not None
    assert level.itl_s is not None
    assert level.tpot_s is not None
    assert level.e2e_s is not None
    assert FIRST_TOKEN_S <= level.ttft_s.p50 <= FIRST_TOKEN_S + TTFT_LATE_S
    assert level.itl_s.p50 == pytest.approx(TOKEN_INTERVAL_S, abs=GAP_TOLERANCE_S)
    assert level.tpot_s.mean == pytest.approx(TOKEN_INTERVAL_S, abs=TPOT_TOLERANCE_S)
    # E2E = first token + (N − 1) intervals = 50 + 4·20 = 130 ms
    e2e_s = FIRST_TOKEN_S + (OUTPUT_TOKENS - 1) * TOKEN_INTERVAL_S
    assert e2e_s - 0.002 <= level.e2e_s.p50 <= e2e_s + TTFT_LATE_S


def test_closed_loop_measures_the_configured_delays() -> None:
    state = StreamingState(first_token_s=FIRST_TOKEN_S, token_interval_s=TOKEN_INTERVAL_S)
    with streaming_server(state) as url:
        result = asyncio.run(
            benchmark_endpoint(
                _target(url),
                [
                    LoadLevel(mode="closed_loop", concurrency=1),
                    LoadLevel(mode="closed_loop", concurrency=4),
                ],
                requests=4,
            )
        )

    assert [level.concurrency for level in result.levels] == [1, 4]
    for level in result.levels:
        assert level.mode == "closed_loop"
        assert (level.requests, level.completed, level.failed, level.timed_out) == (4, 4, 0, 0)
        _assert_matches_server_delays(level)
        # N comes from usage.completion_tokens: 5 tokens per request
        assert level.throughput_output_tokens_per_s == pytest.approx(
            5 * level.throughput_requests_per_s
        )
        assert level.throughput_requests_per_s == pytest.approx(4 / level.duration_s)
        assert level.goodput_requests_per_s is None  # no SLO given
    # one client sends four requests back to back; four clients send them together
    assert result.levels[0].duration_s > 3 * result.levels[1].duration_s
    sent = state.bodies[0]
    assert sent["model"] == "fake-model"
    assert sent["stream"] is True
    assert sent["max_tokens"] == OUTPUT_TOKENS
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["ignore_eos"] is True
    assert len(sent["prompt"].split()) == 15  # "<index>:" + 14 words ≈ 16 tokens


def test_closed_loop_client_waits_for_its_previous_response() -> None:
    state = StreamingState(first_token_s=0.010, token_interval_s=0.005)
    with streaming_server(state) as url:
        records, _ = asyncio.run(
            _one_level(_target(url), LoadLevel(mode="closed_loop", concurrency=1), requests=3)
        )
    ordered = sorted(records, key=lambda r: r.start_s)
    for before, after in itertools.pairwise(ordered):
        assert after.start_s >= before.end_s


async def _one_level(
    target: EndpointTarget, level: LoadLevel, *, requests: int, seed: int = 0
) -> tuple[list[RequestRecord], float]:
    async with httpx2.AsyncClient(timeout=target.timeout_s) as client:
        return await run_level(
            client, target, level, requests=requests, rng=np.random.default_rng(seed)
        )


def test_open_loop_sends_on_the_seeded_poisson_schedule() -> None:
    # At 20 requests/s the mean gap (50 ms) is shorter than a response (130 ms): the open loop
    # keeps sending while earlier requests are still streaming.
    state = StreamingState(first_token_s=FIRST_TOKEN_S, token_interval_s=TOKEN_INTERVAL_S)
    level = LoadLevel(mode="open_loop", rate_per_s=20.0)
    with streaming_server(state) as url:
        records, duration_s = asyncio.run(_one_level(_target(url), level, requests=6, seed=7))

    expected_s = arrival_offsets_s(rate_per_s=20.0, count=6, rng=np.random.default_rng(7))
    starts_s = sorted(r.start_s for r in records)
    assert starts_s == pytest.approx(expected_s, abs=0.015)
    summary = summarize_level(records, level=level, duration_s=duration_s, slo=Slo())
    assert (summary.mode, summary.rate_per_s, summary.concurrency) == ("open_loop", 20.0, None)
    assert summary.completed == 6
    _assert_matches_server_delays(summary)


def test_arrival_offsets_have_the_requested_mean_rate() -> None:
    offsets_s = arrival_offsets_s(rate_per_s=4.0, count=4001, rng=np.random.default_rng(1))
    assert offsets_s[0] == 0.0
    assert np.all(np.diff(offsets_s) > 0)
    # 4000 exponential gaps of mean 0.25 s: the mean is within 5 % (≈ 3 standard errors)
    assert offsets_s[-1] / 4000 == pytest.approx(0.25, rel=0.05)


def _every_fourth(index: int) -> Action:
    """Requests 1, 5, 9, ... fail with HTTP 500; 2, 6, 10, ... stall past the timeout."""
    plan: dict[int, Action] = {1: "error", 2: "stall"}
    return plan.get(index % 4, "ok")


@pytest.mark.parametrize(
    "level",
    [LoadLevel(mode="closed_loop", concurrency=4), LoadLevel(mode="open_loop", rate_per_s=40.0)],
    ids=["closed", "open"],
)
def test_errors_and_timeouts_are_counted_and_stay_in_the_denominators(level: LoadLevel) -> None:
    state = StreamingState(first_token_s=0.010, token_interval_s=0.005, plan=_every_fourth)
    timeout_s = 0.3
    with streaming_server(state) as url:
        records, duration_s = asyncio.run(
            _one_level(_target(url, timeout_s=timeout_s), level, requests=8)
        )
    summary = summarize_level(records, level=level, duration_s=duration_s, slo=Slo(ttft_s=1.0))

    # 8 requests: indices 1, 5 → 500; 2, 6 → stall; 0, 3, 4, 7 → streamed
    assert (summary.requests, summary.completed, summary.failed, summary.timed_out) == (8, 4, 2, 2)
    assert duration_s >= timeout_s  # the timed-out requests' time is in the level's duration
    assert summary.throughput_requests_per_s == pytest.approx(4 / duration_s)
    assert summary.goodput_requests_per_s == pytest.approx(4 / duration_s)
    assert summary.throughput_output_tokens_per_s == pytest.approx(4 * OUTPUT_TOKENS / duration_s)
    failed = [r for r in records if r.status == "failed"]
    assert all(r.error is not None and r.error.startswith("HTTP 500") for r in failed)
    timed_out = [r for r in records if r.status == "timed_out"]
    assert all(r.e2e_s >= timeout_s for r in timed_out)
    assert summary.ttft_s is not None
    assert summary.ttft_s.p99 < timeout_s  # latency distributions hold ok requests only


def test_unreachable_endpoint_fails_every_request() -> None:
    target = EndpointTarget(url="http://127.0.0.1:9", model="m", input_tokens=4, output_tokens=2)
    records, duration_s = asyncio.run(
        _one_level(target, LoadLevel(mode="closed_loop", concurrency=2), requests=2)
    )
    summary = summarize_level(
        records,
        level=LoadLevel(mode="closed_loop", concurrency=2),
        duration_s=duration_s,
        slo=Slo(),
    )
    assert (summary.completed, summary.failed) == (0, 2)
    assert summary.ttft_s is None
    assert summary.throughput_requests_per_s == 0


def test_summarize_level_by_hand() -> None:
    records = [
        # ttft 0.2 s, 4 tokens in 1.0 s: TPOT = (1.0 − 0.2)/(4 − 1) = 0.2667 s
        RequestRecord(
            status="ok", start_s=0.0, end_s=1.0, ttft_s=0.2, itl_s=(0.2, 0.3, 0.3), output_tokens=4
        ),
        # ttft 0.1 s, 3 tokens in 1.0 s: TPOT = (1.0 − 0.1)/(3 − 1) = 0.45 s
        RequestRecord(
            status="ok", start_s=0.5, end_s=1.5, ttft_s=0.1, itl_s=(0.4, 0.5), output_tokens=3
        ),
        RequestRecord(status="failed", start_s=0.6, end_s=0.7, error="HTTP 500"),
        RequestRecord(status="timed_out", start_s=1.0, end_s=2.0),
    ]
    level = LoadLevel(mode="closed_loop", concurrency=2)
    summary = summarize_level(
        records, level=level, duration_s=2.0, slo=Slo(ttft_s=0.15, tpot_s=0.5)
    )

    assert (summary.requests, summary.completed, summary.failed, summary.timed_out) == (4, 2, 1, 1)
    assert summary.throughput_requests_per_s == pytest.approx(2 / 2.0)  # 1.0 req/s
    assert summary.throughput_output_tokens_per_s == pytest.approx((4 + 3) / 2.0)  # 3.5 tok/s
    assert summary.goodput_requests_per_s == pytest.approx(1 / 2.0)  # only the second: ttft 0.1
    assert summary.ttft_s is not None
    assert summary.ttft_s.mean == pytest.approx(0.15)
    assert summary.ttft_s.p50 == pytest.approx(0.15)  # halfway between 0.1 and 0.2
    # pooled gaps [0.2, 0.3, 0.3, 0.4, 0.5]: mean 1.7/5 = 0.34, median 0.3,
    # p90 at rank 0.9·4 = 3.6 → 0.4 + 0.6·0.1 = 0.46
    assert summary.itl_s is not None
    assert summary.itl_s.mean == pytest.approx(0.34)
    assert summary.itl_s.p50 == pytest.approx(0.3)
    assert summary.itl_s.p90 == pytest.approx(0.46)
    assert summary.tpot_s is not None
    assert summary.tpot_s.mean == pytest.approx((0.8 / 3 + 0.45) / 2)
    assert summary.e2e_s is not None
    assert summary.e2e_s.p99 == pytest.approx(1.0)


def test_tpot_is_undefined_for_one_token_and_meets_a_tpot_slo() -> None:
    single = RequestRecord(status="ok", start_s=0.0, end_s=0.1, ttft_s=0.1, output_tokens=1)
    assert single.tpot_s is None
    assert Slo(ttft_s=0.2, tpot_s=0.01).met_by(single)
    assert not Slo(ttft_s=0.05).met_by(single)
    assert not Slo(ttft_s=1.0).met_by(RequestRecord(status="failed", start_s=0.0, end_s=0.1))


def test_latency_stats_of_nothing_is_none() -> None:
    assert latency_stats([]) is None


def test_cli_chat_endpoint_saves_levels(tmp_path: Path) -> None:
    state = StreamingState(first_token_s=0.010, token_interval_s=0.005)
    out = tmp_path / "endpoint.json"
    with streaming_server(state) as url:
        result = CliRunner().invoke(
            app,
            [
                "endpoint", "--url", url, "--model", "fake-model", "--chat",
                "--concurrency", "1,2", "--requests", "2", "--output-tokens", "3",
                "--input-tokens", "8", "--slo-ttft-s", "1", "--gpu-name", "NVIDIA H100 80GB HBM3",
                "--out", str(out),
            ],
        )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert "closed loop" in result.output
    assert "offered load drops" in result.output
    saved = SavedMeasurement.load(out)
    benchmark = saved.payload.endpoint_benchmarks[0]
    assert saved.payload.provenance.gpu_name == "NVIDIA H100 80GB HBM3"
    assert [level.concurrency for level in benchmark.levels] == [1, 2]
    assert all(level.completed == 2 for level in benchmark.levels)
    assert all(level.goodput_requests_per_s is not None for level in benchmark.levels)
    assert state.bodies[0]["messages"][0]["role"] == "user"
    assert "prompt" not in state.bodies[0]


def test_cli_rejects_both_load_kinds() -> None:
    result = CliRunner().invoke(
        app, ["endpoint", "--url", "http://x", "--model", "m", "--concurrency", "1", "--rate", "1"]
    )
    assert result.exit_code == 2
