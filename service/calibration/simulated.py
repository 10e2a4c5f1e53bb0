"""Closed-loop serving rows predicted through the simulator (Tier B) instead of the
steady-state estimate.

Each row of ``e2e_serving.csv`` is a benchmark at concurrency ``C`` with fixed lengths. It is
replayed as ``C`` closed-loop clients sending ``max(min_requests, requests_per_client·C)``
requests back to back; the first ``C`` are warm-up. The engine's per-request overhead ``Z``
(fitted with the step-time constants) is spent outside the engine, so it acts as the clients'
think time and is added to TTFT, as a client measures it. The scheduler is vLLM v1's with the
engine profile's token budget and ``max_num_seqs``; the KV pool is the compiled model's
capacity in 16-token blocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from service.calibration.cases import Group, ServingCase
from service.core.simulation import EngineConfig, simulate
from service.core.simulation.adapters import steptime_adapter
from service.core.steptime import StepTimeModel
from service.core.traffic import FixedLength, closed_loop_workload

__all__ = ["BLOCK_SIZE_TOKENS", "simulate_cases"]

BLOCK_SIZE_TOKENS = 16


def simulate_cases(
    cases: Sequence[ServingCase],
    models: Mapping[Group, tuple[StepTimeModel, float]],
    *,
    requests_per_client: int = 4,
    min_requests: int = 200,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean TTFT and TPOT (completed requests in the window) of each case, in seconds."""
    ttft = np.empty(len(cases))
    tpot = np.empty(len(cases))
    adapters = {key: steptime_adapter(model) for key, (model, _) in models.items()}
    for i, case in enumerate(cases):
        model, kv_tokens = models[case.group]
        row = case.row
        clients = row.concurrency or 1
        dp = model.inventory.data_parallel_size
        engine = EngineConfig(
            max_num_batched_tokens=model.engine.max_num_batched_tokens * dp,
            max_num_seqs=model.engine.max_num_seqs * dp,
            block_size_tokens=BLOCK_SIZE_TOKENS,
            num_kv_blocks=max(int(kv_tokens) // BLOCK_SIZE_TOKENS, 1),
        )
        overhead_s = model.engine.request_overhead_s
        workload = closed_loop_workload(
            clients=clients,
            num_requests=max(min_requests, requests_per_client * clients),
            input_tokens=FixedLength(row.input_tokens),
            output_tokens=FixedLength(row.output_tokens),
            rng=np.random.default_rng(seed),
            think_time_s=overhead_s,
            think_process="exponential",
            warmup_requests=clients,
        )
        summary = simulate(workload, engine, adapters[case.group]).summary()
        ttft[i] = summary.ttft_completed_s.mean + overhead_s
        tpot[i] = summary.tpot_completed_s.mean
    return ttft, tpot
