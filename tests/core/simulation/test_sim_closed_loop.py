"""Closed loops obey the response-time law ``X = N / (R + Z)``."""

import math

import numpy as np
import pytest

from servesize.core.simulation import (
    ConstantStepTime,
    LinearStepTime,
    RequestStatus,
    SchedulerConfig,
    simulate,
)
from servesize.core.traffic import (
    CLOSED_LOOP_WARNING,
    FixedLength,
    GeometricLength,
    closed_loop_workload,
)

CONFIG = SchedulerConfig(
    max_num_batched_tokens=256, max_num_seqs=16, block_size_tokens=16, num_kv_blocks=10_000
)


def test_lockstep_clients_match_the_response_time_law_exactly() -> None:
    # N = 4 clients, P = 8, O = 5, τ = 10 ms, Z = 50 ms. All four requests of a round share
    # every step: prefill + 4 decodes = 5 steps, R = 50 ms; a round lasts R + Z = 100 ms.
    # Window: requests 20..199 are sent at rounds 5..49, i.e. [0.5 s, 4.9 s]; the rounds that
    # complete inside it are 5..48 (completions at k·0.1 + 0.05), 44 rounds of 4:
    # X = 176 / 4.4 s = 40/s = N / (R + Z).
    n, z, tau, out = 4, 0.05, 0.01, 5
    w = closed_loop_workload(
        clients=n,
        num_requests=200,
        input_tokens=FixedLength(8),
        output_tokens=FixedLength(out),
        rng=np.random.default_rng(0),
        think_time_s=z,
        warmup_requests=20,
    )
    r = simulate(w, CONFIG, ConstantStepTime(tau))
    s = r.summary()
    assert r.e2e_s == pytest.approx(np.full(200, out * tau), rel=1e-9)
    assert s.throughput_requests_per_s == pytest.approx(n / (out * tau + z), rel=1e-9)
    assert s.stable
    assert s.warnings == (CLOSED_LOOP_WARNING,)
    assert r.closed_loop


def test_desynchronised_clients_match_the_response_time_law() -> None:
    # Random lengths and exponential think times: X · (mean R + mean Z) = N up to window-edge
    # effects (a client in mid-cycle at either edge), under 2 % with 200 cycles per client.
    n, z = 8, 0.2
    w = closed_loop_workload(
        clients=n,
        num_requests=1_600,
        input_tokens=GeometricLength(50.0),
        output_tokens=GeometricLength(40.0),
        rng=np.random.default_rng(1),
        think_time_s=z,
        think_process="exponential",
        warmup_requests=160,
    )
    config = SchedulerConfig(
        max_num_batched_tokens=64, max_num_seqs=4, block_size_tokens=4, num_kv_blocks=1_000
    )
    model = LinearStepTime(base_s=0.005, per_token_s=1e-4)
    for replicas in (1, 2):
        r = simulate(w, config, model, replicas=replicas, routing="least_loaded")
        s = r.summary()
        measured = r.in_window
        response = float(np.mean(r.e2e_s[measured]))
        think = float(np.mean(w.think_time_s[measured]))
        assert s.throughput_requests_per_s * (response + think) == pytest.approx(n, rel=0.02)
        # Never more than N requests in the system.
        assert int((r.step_num_waiting + r.step_num_running).max()) <= n


def test_a_client_sends_again_after_a_timeout() -> None:
    # One client, requests of 2 + 4 tokens at 1 s per step (E2E 4 s) and a 2.5 s timeout:
    # request 0 is dropped at the first step boundary after 2.5 s (t = 3), the client sends
    # request 1 at once, and so on; all fail.
    w = closed_loop_workload(
        clients=1,
        num_requests=3,
        input_tokens=FixedLength(2),
        output_tokens=FixedLength(4),
        rng=np.random.default_rng(2),
        timeout_s=2.5,
    )
    r = simulate(w, CONFIG, ConstantStepTime(1.0))
    assert r.status.tolist() == [RequestStatus.TIMED_OUT] * 3
    assert r.arrival_s.tolist() == [0.0, 3.0, 6.0]
    assert r.exit_s.tolist() == [3.0, 6.0, 9.0]
    assert math.isinf(r.summary().e2e_s.p50)


def test_an_overloaded_closed_loop_is_stable_and_slow() -> None:
    # 64 clients on a one-slot engine (10 steps of 10 ms per request, 0.1 s): the open-loop
    # test would call the drain a growing queue, but the clients bound the number in the
    # system; the overload shows as latency: each request waits for the 63 ahead of it.
    w = closed_loop_workload(
        clients=64,
        num_requests=640,
        input_tokens=FixedLength(8),
        output_tokens=FixedLength(10),
        rng=np.random.default_rng(0),
        warmup_requests=64,
    )
    one_slot = SchedulerConfig(
        max_num_batched_tokens=64, max_num_seqs=1, block_size_tokens=16, num_kv_blocks=64
    )
    s = simulate(w, one_slot, ConstantStepTime(0.01)).summary()
    assert s.stable
    assert s.stability_conclusive
    assert s.stability_reason.startswith("closed loop")
    assert s.e2e_s.p50 == pytest.approx(64 * 0.1, rel=0.02)
