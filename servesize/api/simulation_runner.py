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
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from servesize.api.engine_model import EngineModel
from servesize.api.errors import UnprocessableError
from servesize.core.memory import MemoryPlan
from servesize.core.simulation import (
    ClientOverheads,
    KVTransfer,
    Routing,
    SchedulerConfig,
    SchedulingPolicy,
    SimulationResult,
    engine_scheduler,
    simulate,
    simulate_disaggregated,
    whole_prompt_overflow,
)
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.steptime import simulator_constants
from servesize.core.traffic import (
    FixedLength,
    HistogramLength,
    LengthDistribution,
    LogNormalLength,
    NormalLength,
    UniformLength,
    Workload,
    closed_loop_workload,
    open_loop_workload,
    trace_workload,
)
from servesize.core.traffic.traces import Trace, TraceError, check_trace, parse_trace
from servesize.schemas.simulate import (
    MAX_EXPECTED_TOKENS,
    MAX_REQUESTS,
    DisaggregationIn,
    FixedLengthIn,
    HistogramLengthIn,
    LengthIn,
    NormalLengthIn,
    TrafficIn,
    UniformLengthIn,
)


@dataclass(frozen=True, slots=True)
class SimulationRun:
    """One run and what it was given."""

    engine: SchedulerConfig
    workload: Workload
    result: SimulationResult
    overhead_s: float
    replicas: int
    warnings: list[str] = field(default_factory=list)
    overheads: ClientOverheads = field(default_factory=ClientOverheads)
    overheads_from_profile: bool = True
    """True when no overheads were given and the profile's ``request_overhead_s`` stands in."""
    transfer: KVTransfer | None = None
    """The KV transfer of a disaggregated run (None otherwise)."""
    transfer_bandwidth_from_hardware: bool = False


def engine_config(
    memory: MemoryPlan, policy: SchedulingPolicy | None
) -> tuple[SchedulerConfig, list[str]]:
    """The simulated replica of a memory plan, and any warning about what it could not model.
    ``policy`` None: the deployment engine's own scheduler (``engine_scheduler``).

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
    engine = SchedulerConfig(
        max_num_batched_tokens=res.max_num_batched_tokens * dp,
        max_num_seqs=max_num_seqs * dp,
        block_size_tokens=memory.kv_block_size,
        num_kv_blocks=memory.kv_blocks * dp,
        policy=policy or engine_scheduler(res.engine),
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
    if isinstance(spec, HistogramLengthIn):
        return HistogramLength.from_values(spec.tokens, spec.weights)
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
    if isinstance(spec, HistogramLengthIn):
        return min(spec.tokens)
    return spec.min_tokens


def _unprocessable(detail: str, slug: str, *pointers: str) -> UnprocessableError:
    return UnprocessableError(
        detail,
        slug=slug,
        errors=[{"location": "body", "pointer": p, "detail": detail} for p in pointers],
    )


def traffic_trace(traffic: TrafficIn, *, pointer: str = "/traffic") -> Trace | None:
    """The checked trace of ``traffic`` (None without one); a 422 points at the offending
    entry, e.g. ``/traffic/trace/arrival_s/3``, or at ``/traffic/trace/file``."""
    spec = traffic.trace
    if spec is None:
        return None
    where = f"{pointer}/trace"
    try:
        if spec.file is not None:
            assert spec.format is not None
            trace = parse_trace(spec.file, spec.format, max_rows=MAX_REQUESTS)
        else:
            assert spec.arrival_s is not None
            trace = check_trace(
                np.asarray(spec.arrival_s, dtype=np.float64),
                np.asarray(spec.input_tokens, dtype=np.int64),
                np.asarray(spec.output_tokens, dtype=np.int64),
            )
    except TraceError as exc:
        at = f"{where}/{exc.field}"
        if exc.index is not None and exc.field != "file":
            at = f"{at}/{exc.index}"
        raise _unprocessable(str(exc), "invalid-trace", at) from None
    unmeasured = traffic.warmup_requests + traffic.cooldown_requests
    if unmeasured >= trace.size:
        raise _unprocessable(
            f"warmup_requests + cooldown_requests ({unmeasured}) must be below the trace's "
            f"{trace.size} requests so that some are measured",
            "invalid-trace",
            f"{pointer}/warmup_requests",
            f"{pointer}/cooldown_requests",
        )
    return trace


def build_workload(
    traffic: TrafficIn,
    max_model_len: int,
    workload_seed: np.random.SeedSequence,
    *,
    pointer: str = "/traffic",
) -> Workload:
    """Draw the requests, refusing runs that are too large or requests that cannot fit
    (422s point below ``pointer``)."""
    timeout_s = traffic.timeout_s if traffic.timeout_s is not None else math.inf
    trace = traffic_trace(traffic, pointer=pointer)
    if trace is not None:
        expected = float(np.sum(trace.input_tokens) + np.sum(trace.output_tokens))
        if expected > MAX_EXPECTED_TOKENS:
            raise _unprocessable(
                f"the trace holds {expected:,.0f} tokens; one simulation is limited to "
                f"{MAX_EXPECTED_TOKENS:,}",
                "simulation-too-large",
                f"{pointer}/trace",
            )
        over = np.flatnonzero(trace.input_tokens + trace.output_tokens > max_model_len)
        if over.size:
            i = int(over[0])
            raise _unprocessable(
                f"{over.size} trace requests exceed max_model_len ({max_model_len} tokens of "
                f"prompt plus output), the first is request {i}",
                "request-too-long",
                f"{pointer}/trace/input_tokens/{i}"
                if traffic.trace and traffic.trace.file is None
                else f"{pointer}/trace/file",
            )
        return trace_workload(
            arrival_s=trace.arrival_s,
            prompt_tokens=trace.input_tokens,
            output_tokens=trace.output_tokens,
            timeout_s=timeout_s,
            warmup_requests=traffic.warmup_requests,
            cooldown_requests=traffic.cooldown_requests,
        )
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
    workload: Workload
    if traffic.mode == "open_loop":
        assert traffic.arrival.process != "trace"  # the schema requires traffic.trace for it
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
            cooldown_requests=traffic.cooldown_requests,
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
            cooldown_requests=traffic.cooldown_requests,
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


def kv_transfer(
    built: EngineModel, spec: DisaggregationIn, *, pointer: str = "/disaggregation"
) -> tuple[KVTransfer, bool]:
    """The KV hand-off of a disaggregated run and whether its bandwidth is the hardware
    profile's interconnect: ``latency + prompt · kv_bytes_per_token_per_gpu / bandwidth``."""
    bandwidth = spec.kv_transfer.bandwidth_bytes_per_s
    from_hardware = bandwidth is None
    if bandwidth is None:
        link = built.hardware.interconnect
        bandwidth = link.bandwidth_bytes_per_s if link is not None else None
        if bandwidth is None:
            raise _unprocessable(
                f"{built.hardware.id} has no interconnect bandwidth; give "
                "kv_transfer.bandwidth_bytes_per_s",
                "missing-bandwidth",
                f"{pointer}/kv_transfer/bandwidth_bytes_per_s",
            )
    transfer = KVTransfer(
        latency_s=spec.kv_transfer.latency_s,
        bandwidth_bytes_per_s=float(bandwidth),
        kv_bytes_per_token=float(built.memory.kv_bytes_per_token_per_gpu),
        first_token_after_transfer=spec.kv_transfer.first_token_after_transfer,
    )
    return transfer, from_hardware


MAX_PREFILL_STEPS = 2_000_000
"""Most prefill steps one run may need (prompt tokens over the token budget): a tiny budget
multiplies the scheduler's work per request."""


def _check_steps(workload: Workload, engine: SchedulerConfig) -> None:
    """422 when the prompts need more than ``MAX_PREFILL_STEPS`` steps at this token budget."""
    steps = float(np.sum(workload.prompt_tokens)) / engine.max_num_batched_tokens
    if steps > MAX_PREFILL_STEPS:
        detail = (
            f"the prompts need about {steps:,.0f} prefill steps at a budget of "
            f"{engine.max_num_batched_tokens} tokens per step; one simulation is limited to "
            f"{MAX_PREFILL_STEPS:,} (a larger max_num_batched_tokens or fewer requests)"
        )
        raise UnprocessableError(
            detail,
            slug="simulation-too-large",
            errors=[
                {
                    "location": "body",
                    "pointer": "/deployment/max_num_batched_tokens",
                    "detail": detail,
                },
            ],
        )


def _check_whole_prompts(
    workload: Workload, engine: SchedulerConfig, rank_budget: int, explicit: bool
) -> None:
    """422 when a scheduler without chunked prefill meets a request longer than one rank's
    token budget: the engine would refuse it (TensorRT-LLM's default), so every such request
    would be rejected. The length is the prompt and all but the last output token
    (:func:`whole_prompt_overflow`: a preempted request recomputes them in one step)."""
    longest = whole_prompt_overflow(
        engine.policy, workload.prompt_tokens, workload.output_tokens, rank_budget
    )
    if not longest:
        return
    why = "policy 'no_chunking'" if explicit else "the engine's default scheduler (no chunking)"
    detail = (
        f"{why} computes a request's prompt (and, after a preemption, its output so far) in one "
        f"step, but requests reach {longest} tokens and the budget is {rank_budget} per rank: "
        f"raise max_num_batched_tokens to at least {longest} or choose a chunking policy "
        f"('vllm_v1')"
    )
    raise UnprocessableError(
        detail,
        slug="prompt-exceeds-budget",
        errors=[
            {"location": "body", "pointer": "/deployment/max_num_batched_tokens", "detail": detail}
        ],
    )


def run_simulation(
    built: EngineModel,
    traffic: TrafficIn,
    *,
    replicas: int = 1,
    routing: Routing = "round_robin",
    policy: SchedulingPolicy | None = None,
    pointer: str = "/traffic",
    overheads: ClientOverheads | None = None,
    disaggregation: DisaggregationIn | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationRun:
    """Simulate ``replicas`` copies of the built engine under ``traffic`` (seeded by
    ``traffic.seed``), or with ``disaggregation`` a prefill pool and a decode pool (``routing``
    spreads requests over the prefill pool). Steps are costed with the engine's simulator
    constants (``simulator_constants``); without ``overheads`` their ``request_overhead_s`` is
    the client-side preprocessing overhead."""
    memory = built.memory
    engine, warnings = engine_config(memory, policy)
    # Independent streams for the requests and the router, both fixed by the seed.
    workload_seed, routing_seed = np.random.SeedSequence(traffic.seed).spawn(2)
    workload = build_workload(traffic, memory.max_model_len, workload_seed, pointer=pointer)
    _check_steps(workload, engine)
    _check_whole_prompts(
        workload, engine, memory.deployment.max_num_batched_tokens, explicit=policy is not None
    )
    from_profile = overheads is None
    # Tier B runs on the constants fitted through the simulator (the steady-state ones absorb
    # queueing that the simulation produces itself).
    step_model = built.step_model.with_engine(simulator_constants(built.step_model.engine))
    if overheads is None:
        overheads = ClientOverheads(preprocess_s=step_model.engine.request_overhead_s)
    step_time = steptime_adapter(step_model)
    transfer: KVTransfer | None = None
    from_hardware = False
    if disaggregation is None:
        result = simulate(
            workload,
            engine,
            step_time,
            replicas=replicas,
            routing=routing,
            routing_rng=np.random.default_rng(routing_seed),
            overheads=overheads,
            progress=progress,
        )
    else:
        transfer, from_hardware = kv_transfer(built, disaggregation)
        replicas = disaggregation.prefill_replicas + disaggregation.decode_replicas
        result = simulate_disaggregated(
            workload,
            prefill=engine,
            decode=engine,
            prefill_step_time=step_time,
            decode_step_time=step_time,
            transfer=transfer,
            prefill_replicas=disaggregation.prefill_replicas,
            decode_replicas=disaggregation.decode_replicas,
            prefill_routing=routing,
            decode_routing=disaggregation.decode_routing,
            routing_rng=np.random.default_rng(routing_seed),
            overheads=overheads,
            progress=progress,
        )
    return SimulationRun(
        engine=engine,
        workload=workload,
        result=result,
        overhead_s=overheads.total_s,
        replicas=replicas,
        warnings=list(memory.warnings) + warnings,
        overheads=overheads,
        overheads_from_profile=from_profile,
        transfer=transfer,
        transfer_bandwidth_from_hardware=from_hardware,
    )
