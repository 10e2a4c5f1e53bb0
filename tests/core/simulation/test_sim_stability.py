"""Stability verdicts of short runs, and the progress hook.

One sequence at a time (``max_num_seqs = 1``), 10 output tokens and a 10 ms step: every
request is served in one prefill step plus 9 decode steps, 0.1 s, so the capacity is 10/s.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from servesize.core.simulation import (
    ConstantStepTime,
    Routing,
    SchedulerConfig,
    SimulationResult,
    simulate,
)
from servesize.core.traffic import FixedLength, UniformLength, open_loop_workload

ONE_AT_A_TIME = SchedulerConfig(
    max_num_batched_tokens=64, max_num_seqs=1, block_size_tokens=16, num_kv_blocks=64
)
CAPACITY_PER_S = 1 / (10 * 0.01)


def _run(load: float, seed: int, num_requests: int) -> SimulationResult:
    workload = open_loop_workload(
        num_requests=num_requests,
        rate_per_s=load * CAPACITY_PER_S,
        input_tokens=FixedLength(4),
        output_tokens=FixedLength(10),
        rng=np.random.default_rng(seed),
        warmup_requests=num_requests // 10,
    )
    return simulate(workload, ONE_AT_A_TIME, ConstantStepTime(0.01))


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("num_requests", [200, 300])
def test_short_runs_tell_half_load_from_overload(seed: int, num_requests: int) -> None:
    for load in (0.5, 0.8):
        steady = _run(load, seed, num_requests).summary()
        assert steady.stable, (load, steady.stability_reason)
    for load in (1.5, 2.0):
        over = _run(load, seed, num_requests).summary()
        assert not over.stable, (load, over.stability_reason)


def test_a_run_still_filling_up_is_judged_after_the_fill() -> None:
    # 64 sequences at once, 200 output tokens of 10 ms: a request stays about 2 s, so a run of
    # 240 requests at 20/s (12 s) ends with about 40 in the system, all still being served:
    # completions lag the sends by the fill-up, not by a growing queue (capacity ~ 32/s).
    wide = dataclasses.replace(ONE_AT_A_TIME, max_num_seqs=64, num_kv_blocks=4096)
    workload = open_loop_workload(
        num_requests=240,
        rate_per_s=20.0,
        input_tokens=FixedLength(4),
        output_tokens=FixedLength(200),
        rng=np.random.default_rng(1),
    )
    summary = simulate(workload, wide, ConstantStepTime(0.01)).summary()
    assert summary.throughput_requests_per_s < 0.98 * summary.offered_rate_per_s
    assert summary.stable, summary.stability_reason


def test_progress_reports_without_changing_the_run() -> None:
    workload = open_loop_workload(
        num_requests=1500,
        rate_per_s=8.0,
        input_tokens=UniformLength(10, 400),
        output_tokens=UniformLength(1, 100),
        rng=np.random.default_rng(1),
    )
    cfg = SchedulerConfig(
        max_num_batched_tokens=256, max_num_seqs=16, block_size_tokens=16, num_kv_blocks=60
    )
    routings: tuple[tuple[int, Routing], ...] = ((1, "round_robin"), (2, "least_loaded"))
    for replicas, routing in routings:
        calls: list[tuple[int, int]] = []

        def report(done: int, total: int, calls: list[tuple[int, int]] = calls) -> None:
            calls.append((done, total))

        plain = simulate(workload, cfg, ConstantStepTime(0.01), replicas=replicas, routing=routing)
        seen = simulate(
            workload,
            cfg,
            ConstantStepTime(0.01),
            replicas=replicas,
            routing=routing,
            progress=report,
        )
        assert np.array_equal(plain.finish_s, seen.finish_s, equal_nan=True)
        assert np.array_equal(plain.step_start_s, seen.step_start_s)
        assert len(calls) > 10
        assert calls[-1] == (1500, 1500)
        done = [c[0] for c in calls]
        assert done == sorted(done)
