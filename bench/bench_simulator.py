"""Simulator speed: decode-run skipping against the step-by-step loop, measured in one run.

Each scenario is simulated with ``skip_decode_runs=False`` (the baseline: one scheduling decision
per engine step) and with skipping (the default), best of ``REPEATS`` wall-clock timings each.
The printed ratios compare the two within this run; the absolute rates are for orientation only
and depend on the machine. Results are identical in both modes (the test suite asserts it).

Run: ``python -m bench`` or ``python bench/bench_simulator.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from servesize.core.simulation import (
    KVTransfer,
    LinearStepTime,
    SchedulerConfig,
    SimulationResult,
    simulate,
    simulate_disaggregated,
)
from servesize.core.traffic import (
    LogNormalLength,
    OpenLoopWorkload,
    closed_loop_workload,
    open_loop_workload,
)

REPEATS = 2
SEED = 20_240_611
# A 7-8B-class model on one GPU, DistServe-style linear step time (illustrative coefficients).
STEP = LinearStepTime(base_s=0.008, per_token_s=2e-5, per_context_token_s=2e-7)
SCHEDULER = SchedulerConfig(
    max_num_batched_tokens=8192, max_num_seqs=256, block_size_tokens=16, num_kv_blocks=40_000
)


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    requests: int
    run: Callable[[bool], SimulationResult]


def _workload(rate_per_s: float, requests: int = 10_000) -> OpenLoopWorkload:
    return open_loop_workload(
        num_requests=requests,
        rate_per_s=rate_per_s,
        input_tokens=LogNormalLength(mean_unclipped_tokens=1000, cv=1.0, max_tokens=8000),
        output_tokens=LogNormalLength(mean_unclipped_tokens=250, cv=1.0, max_tokens=2000),
        rng=np.random.default_rng(SEED),
        warmup_requests=requests // 10,
    )


def _scenarios() -> list[Scenario]:
    light = _workload(2.0)
    moderate = _workload(8.0)
    tight = SchedulerConfig(
        max_num_batched_tokens=8192, max_num_seqs=256, block_size_tokens=16, num_kv_blocks=3_000
    )
    fleet = _workload(24.0, requests=10_000)
    closed = closed_loop_workload(
        clients=64,
        num_requests=5_000,
        input_tokens=LogNormalLength(mean_unclipped_tokens=1000, cv=1.0, max_tokens=8000),
        output_tokens=LogNormalLength(mean_unclipped_tokens=250, cv=1.0, max_tokens=2000),
        rng=np.random.default_rng(SEED),
        warmup_requests=500,
    )
    prefill = SchedulerConfig(
        max_num_batched_tokens=8192, max_num_seqs=64, block_size_tokens=16, num_kv_blocks=20_000
    )
    transfer = KVTransfer(latency_s=0.002, bandwidth_bytes_per_s=25e9, kv_bytes_per_token=131_072)
    return [
        Scenario("10k requests, light load (1 replica)", 10_000,
                 lambda skip: simulate(light, SCHEDULER, STEP, skip_decode_runs=skip)),
        Scenario("10k requests, moderate load (1 replica)", 10_000,
                 lambda skip: simulate(moderate, SCHEDULER, STEP, skip_decode_runs=skip)),
        Scenario("10k requests, moderate load, KV-limited", 10_000,
                 lambda skip: simulate(moderate, tight, STEP, skip_decode_runs=skip)),
        Scenario("10k requests, 4 replicas round robin", 10_000,
                 lambda skip: simulate(fleet, SCHEDULER, STEP, replicas=4, skip_decode_runs=skip)),
        Scenario("10k requests, 4 replicas least loaded", 10_000,
                 lambda skip: simulate(fleet, SCHEDULER, STEP, replicas=4, routing="least_loaded",
                                       skip_decode_runs=skip)),
        Scenario("5k requests, closed loop, 64 clients", 5_000,
                 lambda skip: simulate(closed, SCHEDULER, STEP, skip_decode_runs=skip)),
        Scenario("10k requests, disaggregated 1P + 1D", 10_000,
                 lambda skip: simulate_disaggregated(
                     moderate, prefill=prefill, decode=SCHEDULER, prefill_step_time=STEP,
                     decode_step_time=STEP, transfer=transfer, skip_decode_runs=skip)),
    ]  # fmt: skip


def _best_wall_s(run: Callable[[], SimulationResult]) -> tuple[float, SimulationResult]:
    best, result = float("inf"), None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


def main() -> None:
    print("bench_simulator: decode-run skipping vs step-by-step loop (best of 2, wall clock)")
    header = (
        f"{'scenario':42s} {'steps':>9s} {'mean batch':>10s} {'skip ×':>7s} "
        f"{'req/s sim':>10s} {'sim s / wall s':>14s}"
    )
    print(header)
    for scenario in _scenarios():
        stepped_s, _ = _best_wall_s(partial(scenario.run, False))
        skipped_s, result = _best_wall_s(partial(scenario.run, True))
        steps = result.step_start_s.size
        batch = float(np.mean(result.step_num_seqs)) if steps else 0.0
        first, last = result.horizon_s
        print(
            f"{scenario.name:42s} {steps:9d} {batch:10.1f} {stepped_s / skipped_s:7.2f} "
            f"{scenario.requests / skipped_s:10.0f} {(last - first) / skipped_s:14.0f}"
        )
    print(
        "skip × = step-by-step wall time / skipping wall time (same results); req/s sim = "
        "simulated requests per wall second with skipping; sim s / wall s = simulated time per "
        "wall second."
    )


if __name__ == "__main__":
    main()
