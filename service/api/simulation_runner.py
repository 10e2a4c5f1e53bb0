"""Resolved inputs + traffic spec → one simulator run (shared by ``/v1/simulate`` and the SLO
planners).

The engine replica is configured from the memory plan (token budget, ``max_num_seqs``, KV
blocks); the requests are drawn from the traffic spec with a seed split into independent streams
for the workload and the router, so the same seed gives the same run — and, because every
arrival process scales its gaps by ``1/rate`` from the same standard draws, runs at different
rates with one seed share their random numbers (common random numbers for capacity searches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from service.api.engine_model import EngineModel
from service.api.errors import UnprocessableError
from service.core.memory import MemoryPlan
from service.core.simulation import (
    ClientOverheads,
    EngineConfig,
    Routing,
    SchedulingPolicy,
    SimulationResult,
    simulate,
)
from service.core.simulation.adapters import steptime_adapter
from service.core.traffic import (
    FixedLength,
    LengthDistribution,
    LogNormalLength,
    NormalLength,
    UniformLength,
    Workload,
    closed_loop_workload,
    open_loop_workload,
)
from service.schemas.simulate import (
    MAX_EXPECTED_TOKENS,
    FixedLengthIn,
    LengthIn,
    NormalLengthIn,
    TrafficIn,
    UniformLengthIn,
)


@dataclass(frozen=True, slots=True)
class SimulationRun:
    """One run and what it was given."""

    engine: EngineConfig
    workload: Workload
    result: SimulationResult
    overhead_s: float
    replicas: int
    warnings: list[str] = field(default_factory=list)


def engine_config(memory: MemoryPlan, policy: SchedulingPolicy) -> tuple[EngineConfig, list[str]]:
    """The simulated replica of a memory plan, and any warning about what it could not model.

    The step-time model splits a step's work evenly over the data-parallel ranks, so one
    simulated engine stands for the DP group, with every rank's limits and KV blocks pooled.
    """
    res = memory.deployment
    warnings: list[str] = []
    dp = res.data_parallel_size
    max_num_seqs = res.max_num_seqs
    if max_num_seqs is None:
        max_num_seqs = memory.kv_blocks
        warnings.append(
            f"{res.engine} sizes its running batch from the KV pool; the simulation bounds it by "
            "KV blocks only"
        )
    engine = EngineConfig(
        max_num_batched_tokens=res.max_num_batched_tokens * dp,
        max_num_seqs=max_num_seqs * dp,
        block_size_tokens=memory.kv_block_size,
        num_kv_blocks=memory.kv_blocks * dp,
        policy=policy,
    )
    return engine, warnings


def length_distribution(spec: LengthIn, clip_tokens: int) -> LengthDistribution:
    """The core distribution; unset upper clips become ``clip_tokens``."""
    if isinstance(spec, int):
        return FixedLength(spec)
    if isinstance(spec, FixedLengthIn):
        return FixedLength(spec.tokens)
    if isinstance(spec, UniformLengthIn):
        return UniformLength(spec.low_tokens, spec.high_tokens)
    upper = spec.max_tokens if spec.max_tokens is not None else max(clip_tokens, spec.min_tokens)
    if isinstance(spec, NormalLengthIn):
        return NormalLength(
            mean_unclipped_tokens=spec.mean_tokens,
            std_tokens=spec.std_tokens,
            min_tokens=spec.min_tokens,
            max_tokens=upper,
        )
    return LogNormalLength(
        mean_unclipped_tokens=spec.mean_tokens,
        cv=spec.cv,
        min_tokens=spec.min_tokens,
        max_tokens=upper,
    )


def min_tokens(spec: LengthIn) -> int:
    """The shortest length a spec can draw."""
    if isinstance(spec, int):
        return spec
    if isinstance(spec, FixedLengthIn):
        return spec.tokens
    if isinstance(spec, UniformLengthIn):
        return spec.low_tokens
    return spec.min_tokens


def build_workload(
    traffic: TrafficIn,
    max_model_len: int,
    workload_seed: np.random.SeedSequence,
    *,
    pointer: str = "/traffic",
) -> Workload:
    """Draw the requests, refusing runs that are too large or requests that cannot fit
    (422s point below ``pointer``)."""
    prompt = length_distribution(
        traffic.input_tokens, max_model_len - min_tokens(traffic.output_tokens)
    )
    output = length_distribution(
        traffic.output_tokens, max_model_len - min_tokens(traffic.input_tokens)
    )
    expected = traffic.num_requests * (prompt.mean_tokens + output.mean_tokens)
    if expected > MAX_EXPECTED_TOKENS:
        raise UnprocessableError(
            f"the run would process about {expected:,.0f} tokens; one simulation is limited to "
            f"{MAX_EXPECTED_TOKENS:,} (fewer requests or shorter lengths)",
            slug="simulation-too-large",
            errors=[
                {"location": "body", "pointer": f"{pointer}/num_requests", "detail": "too many"},
            ],
        )
    rng = np.random.default_rng(workload_seed)
    timeout_s = traffic.timeout_s if traffic.timeout_s is not None else math.inf
    workload: Workload
    if traffic.mode == "open_loop":
        workload = open_loop_workload(
            num_requests=traffic.num_requests,
            rate_per_s=traffic.arrival.rate_per_s,
            input_tokens=prompt,
            output_tokens=output,
            rng=rng,
            process=traffic.arrival.process,
            cv=traffic.arrival.cv,
            timeout_s=timeout_s,
            warmup_requests=traffic.warmup_requests,
        )
    else:
        workload = closed_loop_workload(
            clients=traffic.concurrency,
            num_requests=traffic.num_requests,
            input_tokens=prompt,
            output_tokens=output,
            rng=rng,
            think_time_s=traffic.think_time_s,
            timeout_s=timeout_s,
            warmup_requests=traffic.warmup_requests,
        )
    too_long = int(np.sum(workload.prompt_tokens + workload.output_tokens > max_model_len))
    if too_long:
        detail = (
            f"{too_long} drawn requests exceed max_model_len ({max_model_len} tokens of prompt "
            "plus output); shorten the lengths or set max_tokens"
        )
        raise UnprocessableError(
            detail,
            slug="request-too-long",
            errors=[
                {"location": "body", "pointer": f"{pointer}/input_tokens", "detail": detail},
                {"location": "body", "pointer": f"{pointer}/output_tokens", "detail": detail},
            ],
        )
    return workload


def run_simulation(
    built: EngineModel,
    traffic: TrafficIn,
    *,
    replicas: int = 1,
    routing: Routing = "round_robin",
    policy: SchedulingPolicy = "vllm_v1",
    pointer: str = "/traffic",
) -> SimulationRun:
    """Simulate ``replicas`` copies of the built engine under ``traffic`` (seeded by
    ``traffic.seed``)."""
    memory = built.memory
    engine, warnings = engine_config(memory, policy)
    # Independent streams for the requests and the router, both fixed by the seed.
    workload_seed, routing_seed = np.random.SeedSequence(traffic.seed).spawn(2)
    workload = build_workload(traffic, memory.max_model_len, workload_seed, pointer=pointer)
    overhead_s = built.step_model.engine.request_overhead_s
    result = simulate(
        workload,
        engine,
        steptime_adapter(built.step_model),
        replicas=replicas,
        routing=routing,
        routing_rng=np.random.default_rng(routing_seed),
        overheads=ClientOverheads(preprocess_s=overhead_s),
    )
    return SimulationRun(
        engine=engine,
        workload=workload,
        result=result,
        overhead_s=overhead_s,
        replicas=replicas,
        warnings=list(memory.warnings) + warnings,
    )
