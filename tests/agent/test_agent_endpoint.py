"""The endpoint benchmark against a fake streaming server with known delays.

Exact figures come from runs on a virtual clock (:mod:`tests.agent.virtual_time`: the fake
endpoint's delays are ``asyncio.sleep`` calls, so a measured latency is their sum whatever the
machine's load). Runs over real loopback HTTP check the protocol and what holds however slow the
machine is: nothing arrives before the server sends it, and the order of sends and completions.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

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
from tests.agent.agent_fakes import Action, StreamingState, streaming_server, streaming_transport
from tests.agent.virtual_time import run_virtual, virtual_clock

FIRST_TOKEN_S = 0.050
TOKEN_INTERVAL_S = 0.020
OUTPUT_TOKENS = 5
E2E_S = FIRST_TOKEN_S + (OUTPUT_TOKENS - 1) * TOKEN_INTERVAL_S
"""First token + (N − 1) intervals = 50 + 4·20 = 130 ms."""
ROUNDING_S = 1e-9
"""Float rounding of virtual times (sums of sleeps), not a tolerance for lateness."""
CLOCK_RESOLUTION_S = 1e-6
"""asyncio runs a timer up to its clock's resolution early (1 ns on Linux)."""
CLOSED_1 = LoadLevel(mode="closed_loop", concurrency=1)
CLOSED_4 = LoadLevel(mode="closed_loop", concurrency=4)
OPEN_20 = LoadLevel(mode="open_loop", rate_per_s=20.0)


def _target(url: str = "http://endpoint.test", *, timeout_s: float = 5.0) -> EndpointTarget:
    return EndpointTarget(
        url=url,
        model="fake-model",
        input_tokens=16,
        output_tokens=OUTPUT_TOKENS,
        timeout_s=timeout_s,
    )


def _state(**fields: Any) -> StreamingState:
    return StreamingState(first_token_s=FIRST_TOKEN_S, token_interval_s=TOKEN_INTERVAL_S, **fields)


def _virtual_level(
    state: StreamingState,
    level: LoadLevel,
    *,
    requests: int,
    seed: int = 0,
    timeout_s: float = 5.0,
) -> tuple[list[RequestRecord], float]:
    """One level against the fake endpoint, without sockets, on a virtual clock."""

    async def main() -> tuple[list[RequestRecord], float]:
        async with httpx2.AsyncClient(transport=streaming_transport(state)) as client:
            return await run_level(
                client,
                _target(timeout_s=timeout_s),
                level,
                requests=requests,
                rng=np.random.default_rng(seed),
                clock=virtual_clock,
            )

    return run_virtual(main())


def _assert_matches_server_delays(level: EndpointLevel) -> None:
    assert level.ttft_s is not None
    assert level.itl_s is not None
    assert level.tpot_s is not None
    assert level.e2e_s is not None
    for stats, expected_s in (
        (level.ttft_s, FIRST_TOKEN_S),
        (level.itl_s, TOKEN_INTERVAL_S),
        (level.tpot_s, TOKEN_INTERVAL_S),
        (level.e2e_s, E2E_S),
    ):
        for name in ("mean", "p50", "p90", "p95", "p99", "min", "max"):
            assert getattr(stats, name) == pytest.approx(expected_s, abs=ROUNDING_S)
        assert stats.std == pytest.approx(0.0, abs=ROUNDING_S)


@pytest.mark.parametrize("level", [CLOSED_1, CLOSED_4, OPEN_20], ids=["c1", "c4", "open"])
def test_latencies_are_the_servers_delays(level: LoadLevel) -> None:
    state = _state()
    records, duration_s = _virtual_level(state, level, requests=6, seed=7)
    summary = summarize_level(records, level=level, duration_s=duration_s, slo=Slo())
    assert (summary.requests, summary.completed, summary.failed, summary.timed_out) == (6, 6, 0, 0)
    _assert_matches_server_delays(summary)
    assert all(len(r.itl_s) == OUTPUT_TOKENS - 1 for r in records)
    assert duration_s == pytest.approx(max(r.end_s for r in records), abs=ROUNDING_S)


def test_one_client_sends_back_to_back_and_four_clients_together() -> None:
    _, one_s = _virtual_level(_state(), CLOSED_1, requests=4)
    _, four_s = _virtual_level(_state(), CLOSED_4, requests=4)
    assert one_s == pytest.approx(4 * E2E_S, abs=ROUNDING_S)
    assert four_s == pytest.approx(E2E_S, abs=ROUNDING_S)


def test_open_loop_sends_on_the_seeded_poisson_schedule() -> None:
    # At 20 requests/s the mean gap (50 ms) is shorter than a response (130 ms): the open loop
    # keeps sending while earlier requests are still streaming.
    records, duration_s = _virtual_level(_state(), OPEN_20, requests=6, seed=7)
    expected_s = arrival_offsets_s(rate_per_s=20.0, count=6, rng=np.random.default_rng(7))
    starts_s = sorted(r.start_s for r in records)
    assert starts_s == pytest.approx(expected_s, abs=ROUNDING_S)
    assert any(b.start_s < a.end_s for a, b in itertools.pairwise(records))
    assert duration_s == pytest.approx(expected_s[-1] + E2E_S, abs=ROUNDING_S)
    summary = summarize_level(records, level=OPEN_20, duration_s=duration_s, slo=Slo())
    assert (summary.mode, summary.rate_per_s, summary.concurrency) == ("open_loop", 20.0, None)


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


def _assert_errors_and_timeouts_counted(
    records: list[RequestRecord], level: LoadLevel, duration_s: float, timeout_s: float
) -> EndpointLevel:
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
    assert all(r.e2e_s >= timeout_s - CLOCK_RESOLUTION_S for r in timed_out)
    assert summary.ttft_s is not None
    assert summary.ttft_s.p99 is not None
    assert summary.ttft_s.p99 < timeout_s  # latency distributions hold ok requests only
    return summary


@pytest.mark.parametrize(
    "level",
    [CLOSED_4, LoadLevel(mode="open_loop", rate_per_s=40.0)],
    ids=["closed", "open"],
)
def test_errors_and_timeouts_are_counted_and_stay_in_the_denominators(level: LoadLevel) -> None:
    state = StreamingState(first_token_s=0.010, token_interval_s=0.005, plan=_every_fourth)
    timeout_s = 0.3
    records, duration_s = _virtual_level(state, level, requests=8, timeout_s=timeout_s)
    summary = _assert_errors_and_timeouts_counted(records, level, duration_s, timeout_s)
    timed_out = [r for r in records if r.status == "timed_out"]
    assert [r.e2e_s for r in timed_out] == pytest.approx([timeout_s] * 2, abs=ROUNDING_S)
    assert duration_s == pytest.approx(max(r.end_s for r in records), abs=ROUNDING_S)
    assert summary.ttft_s is not None
    assert summary.ttft_s.p99 == pytest.approx(0.010, abs=ROUNDING_S)


# --------------------------------------------------------------------------------------------
# Over loopback HTTP: the protocol, and bounds that hold on a loaded machine
# --------------------------------------------------------------------------------------------


def _run(main: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(main)


def _assert_never_before_the_server(records: list[RequestRecord]) -> None:
    """The server sends nothing before its delays have passed, so no latency is shorter."""
    for r in records:
        assert r.ttft_s is not None
        assert r.ttft_s >= FIRST_TOKEN_S
        assert r.e2e_s >= E2E_S
        assert sum(r.itl_s) >= (OUTPUT_TOKENS - 1) * TOKEN_INTERVAL_S - (r.ttft_s - FIRST_TOKEN_S)


def test_closed_loop_over_loopback_sends_the_body_and_waits_for_the_server() -> None:
    state = _state()
    done: list[RequestRecord] = []
    with streaming_server(state) as url:
        result = _run(
            benchmark_endpoint(_target(url), [CLOSED_1, CLOSED_4], requests=4, on_done=done.append)
        )

    assert [level.concurrency for level in result.levels] == [1, 4]
    for level in result.levels:
        assert level.mode == "closed_loop"
        assert (level.requests, level.completed, level.failed, level.timed_out) == (4, 4, 0, 0)
        # N comes from usage.completion_tokens: 5 tokens per request
        assert level.throughput_output_tokens_per_s == pytest.approx(
            5 * level.throughput_requests_per_s
        )
        assert level.throughput_requests_per_s == pytest.approx(4 / level.duration_s)
        assert level.goodput_requests_per_s is None  # no SLO given
    _assert_never_before_the_server(done)
    one, four = done[:4], done[4:]
    # one client sends four requests back to back; four clients send them together
    for before, after in itertools.pairwise(sorted(one, key=lambda r: r.start_s)):
        assert after.start_s >= before.end_s
    assert result.levels[0].duration_s >= 4 * E2E_S
    assert max(r.start_s for r in four) < min(r.end_s for r in four)
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
        records, _ = _run(_one_level(_target(url), CLOSED_1, requests=3))
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


def test_open_loop_over_loopback_never_sends_early() -> None:
    state = _state()
    with streaming_server(state) as url:
        records, duration_s = _run(_one_level(_target(url), OPEN_20, requests=6, seed=7))

    expected_s = arrival_offsets_s(rate_per_s=20.0, count=6, rng=np.random.default_rng(7))
    starts_s = sorted(r.start_s for r in records)
    assert all(s >= e - CLOCK_RESOLUTION_S for s, e in zip(starts_s, expected_s, strict=True))
    assert duration_s >= expected_s[-1] + E2E_S
    summary = summarize_level(records, level=OPEN_20, duration_s=duration_s, slo=Slo())
    assert summary.completed == 6
    _assert_never_before_the_server(records)


def test_errors_and_timeouts_over_loopback() -> None:
    # The timeout is 30 times an ok response (30 ms): only a stalled request reaches it.
    state = StreamingState(
        first_token_s=0.010, token_interval_s=0.005, stall_s=60.0, plan=_every_fourth
    )
    timeout_s = 1.0
    with streaming_server(state) as url:
        records, duration_s = _run(
            _one_level(_target(url, timeout_s=timeout_s), CLOSED_4, requests=8)
        )
    _assert_errors_and_timeouts_counted(records, CLOSED_4, duration_s, timeout_s)


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


# --------------------------------------------------------------------------------------------
# prompt length from usage, E2E at the last text chunk, warm-up, spread and token throughput
# --------------------------------------------------------------------------------------------


def test_e2e_ends_at_the_last_text_chunk_and_prompt_length_comes_from_usage() -> None:
    # The usage chunk and [DONE] come 0.5 s after the last text chunk; the server counts a
    # 37-token prompt although 16 were asked for.
    state = _state(tail_s=0.5, prompt_tokens=37)
    records, duration_s = _virtual_level(state, CLOSED_1, requests=3)
    summary = summarize_level(records, level=CLOSED_1, duration_s=duration_s, slo=Slo())

    assert all(r.input_tokens == 37 for r in records)
    # E2E = 0.050 + 4 · 0.020 = 0.130 s, not 0.630 s at [DONE]
    assert summary.e2e_s is not None
    assert summary.e2e_s.max == pytest.approx(0.130, abs=ROUNDING_S)
    # TPOT = (0.130 − 0.050)/(5 − 1) = 0.020 s
    assert summary.tpot_s is not None
    assert summary.tpot_s.mean == pytest.approx(0.020, abs=ROUNDING_S)
    # one client, back to back, each stream open 0.630 s: the level lasts 3 · 0.630 = 1.89 s
    assert duration_s == pytest.approx(1.89, abs=ROUNDING_S)
    assert summary.throughput_requests_per_s == pytest.approx(3 / 1.89)
    assert summary.throughput_output_tokens_per_s == pytest.approx(15 / 1.89)  # 7.94 tok/s
    assert summary.throughput_input_tokens_per_s == pytest.approx(111 / 1.89)  # 3 · 37
    assert summary.throughput_total_tokens_per_s == pytest.approx(126 / 1.89)  # 111 + 15
    assert summary.mean_input_tokens == 37
    assert summary.mean_output_tokens == 5


def test_spread_and_token_throughput_by_hand() -> None:
    records = [
        RequestRecord(
            status="ok",
            start_s=0.0,
            end_s=1.0,
            ttft_s=0.2,
            itl_s=(0.2, 0.3, 0.3),
            output_tokens=4,
            input_tokens=100,
        ),
        RequestRecord(
            status="ok",
            start_s=0.5,
            end_s=1.5,
            ttft_s=0.1,
            itl_s=(0.4, 0.5),
            output_tokens=3,
            input_tokens=50,
        ),
        RequestRecord(status="failed", start_s=0.6, end_s=0.7, error="HTTP 500"),
    ]
    level = LoadLevel(mode="closed_loop", concurrency=2)
    summary = summarize_level(records, level=level, duration_s=2.0, slo=Slo())

    assert summary.requests == 3  # the failed request stays in the denominators
    # TTFT [0.2, 0.1]: population std = |0.2 − 0.1| / 2 = 0.05; min 0.1; max 0.2
    assert summary.ttft_s is not None
    assert (summary.ttft_s.std, summary.ttft_s.min, summary.ttft_s.max) == pytest.approx(
        (0.05, 0.1, 0.2)
    )
    # pooled gaps [0.2, 0.3, 0.3, 0.4, 0.5]: mean 0.34, variance (0.0196 + 0.0016 · 2 +
    # 0.0036 + 0.0256)/5 = 0.0104 → std 0.10198
    assert summary.itl_s is not None
    assert summary.itl_s.std == pytest.approx(0.0104**0.5)
    assert summary.throughput_input_tokens_per_s == pytest.approx(150 / 2.0)  # 75 tok/s
    assert summary.throughput_total_tokens_per_s == pytest.approx((150 + 7) / 2.0)  # 78.5
    assert summary.mean_input_tokens == pytest.approx(75.0)


def test_no_input_throughput_when_the_server_reports_no_prompt_tokens() -> None:
    records = [RequestRecord(status="ok", start_s=0.0, end_s=1.0, ttft_s=0.2, output_tokens=1)]
    summary = summarize_level(records, level=CLOSED_1, duration_s=1.0, slo=Slo())
    assert summary.throughput_input_tokens_per_s is None
    assert summary.throughput_total_tokens_per_s is None


def test_warm_up_requests_are_sent_and_left_out() -> None:
    # The first two requests the server sees (the warm-up of the first level) fail; with
    # concurrency 1 they are sent before the measured ones.
    state = StreamingState(
        first_token_s=0.001,
        token_interval_s=0.001,
        plan=lambda index: "error" if index < 2 else "ok",
    )
    with streaming_server(state) as url:
        result = _run(
            benchmark_endpoint(_target(url), [CLOSED_1, CLOSED_4], requests=3, warmup_requests=2)
        )

    assert result.warmup_requests == 2
    assert len(state.bodies) == 2 * (2 + 3)  # two levels, each 2 warm-up + 3 measured
    for level in result.levels:
        assert (level.requests, level.completed, level.failed) == (3, 3, 0)


def test_negative_warm_up_is_refused() -> None:
    with pytest.raises(ValueError, match="warmup_requests"):
        _run(benchmark_endpoint(_target(), [CLOSED_1], requests=1, warmup_requests=-1))
