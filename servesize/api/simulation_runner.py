"""Traffic spec → requests → one run of the compiled replica (shared by ``/v1/simulate`` and
the SLO planners).

The replica is the core's (:mod:`servesize.core.replica`: scheduler, KV link and the checks
before a run are made there); here the requests are drawn from the traffic spec with a seed
split into independent streams for the workload and the router, so the same seed gives the same
run — and, because every arrival process scales its gaps by ``1/rate`` from the same standard
draws, runs at different rates with one seed share their random numbers (common random numbers
for capacity searches).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from servesize.api.exceptions import UnprocessableError
from servesize.api.resolved import ResolvedReplica
from servesize.core.replica import (
    DisaggregatedPools,
    KVLink,
    Replica,
    ReplicaRun,
    simulate_replica,
)
from servesize.core.simulation import (
    ClientOverheads,
    KVTransfer,
    Routing,
    SchedulerConfig,
    SchedulingPolicy,
    SimulationResult,
)
from servesize.core.traffic import (
    FixedLength,
    GeometricLength,
    HistogramLength,
    LengthDistribution,
    LogNormalLength,
    NormalLength,
    SessionTraffic,
    Trace,
    TraceError,
    UniformLength,
    Workload,
    check_trace,
    closed_loop_workload,
    open_loop_workload,
    parse_trace,
    session_means,
    session_workload,
    trace_workload,
    with_prefixes,
)
from servesize.schemas.prefix import prefix_traffic
from servesize.schemas.sessions import SessionsIn, TurnsIn, UniformTurnsIn
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

    scheduler: SchedulerConfig
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
    if spec is None and traffic.trace_id is not None:
        raise _unprocessable(
            "trace_id refers to a stored trace, which only /v1/simulate reads; send the trace "
            "itself as traffic.trace here",
            "invalid-trace",
            f"{pointer}/trace_id",
        )
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
    (422s point below ``pointer``), with the shared prefixes of ``traffic.prefix``."""
    workload = _draw_workload(traffic, max_model_len, workload_seed, pointer=pointer)
    return with_prefixes(workload, prefix_traffic(traffic.prefix))


def _draw_workload(
    traffic: TrafficIn,
    max_model_len: int,
    workload_seed: np.random.SeedSequence,
    *,
    pointer: str,
) -> Workload:
    timeout_s = traffic.timeout_s if traffic.timeout_s is not None else math.inf
    if traffic.sessions is not None:
        return _draw_sessions(traffic, traffic.sessions, max_model_len, workload_seed, pointer)
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


def turns_distribution(spec: TurnsIn) -> LengthDistribution:
    """The core distribution of a session's turn count."""
    if isinstance(spec, int):
        return FixedLength(spec)
    if isinstance(spec, UniformTurnsIn):
        return UniformLength(spec.low_turns, spec.high_turns)
    return GeometricLength(spec.mean_turns)


def session_traffic(spec: SessionsIn, max_model_len: int) -> SessionTraffic:
    """The core description of ``traffic.sessions`` (lengths clipped below the context)."""
    return SessionTraffic(
        sessions_per_s=spec.sessions_per_s,
        turns=turns_distribution(spec.turns),
        new_tokens=length_distribution(spec.new_tokens, max_model_len - 1),
        output_tokens=length_distribution(spec.output_tokens, max_model_len - 1),
        think_time_s=spec.think_time_s,
        think_process=spec.think_process,
    )


def _draw_sessions(
    traffic: TrafficIn,
    spec: SessionsIn,
    max_model_len: int,
    workload_seed: np.random.SeedSequence,
    pointer: str,
) -> Workload:
    """Draw ``traffic.sessions``' turns; 422s for runs too large, turns whose history outgrows
    the context, and windows that leave nothing measured."""
    where = f"{pointer}/sessions"
    core = session_traffic(spec, max_model_len)
    means = session_means(core)
    expected = spec.num_sessions * means.mean_turns * (means.input_tokens + means.output_tokens)
    if expected > MAX_EXPECTED_TOKENS or spec.num_sessions * means.mean_turns > MAX_REQUESTS:
        raise _unprocessable(
            f"the sessions would send about {spec.num_sessions * means.mean_turns:,.0f} turns "
            f"and {expected:,.0f} tokens; one simulation is limited to {MAX_REQUESTS:,} requests "
            f"and {MAX_EXPECTED_TOKENS:,} tokens",
            "simulation-too-large",
            f"{where}/num_sessions",
        )
    workload = session_workload(
        core,
        num_sessions=spec.num_sessions,
        rng=np.random.default_rng(workload_seed),
        timeout_s=traffic.timeout_s if traffic.timeout_s is not None else math.inf,
        warmup_requests=0,
        cooldown_requests=0,
    )
    if workload.num_requests > MAX_REQUESTS:
        raise _unprocessable(
            f"the sessions drew {workload.num_requests:,} turns; at most {MAX_REQUESTS:,}",
            "simulation-too-large",
            f"{where}/num_sessions",
        )
    over = np.flatnonzero(workload.prompt_tokens + workload.output_tokens > max_model_len)
    if over.size:
        r = int(over[0])
        raise _unprocessable(
            f"{over.size} turns outgrow max_model_len ({max_model_len} tokens of history, new "
            f"tokens and output), the first is turn {int(workload.turn[r]) + 1} of session "
            f"{int(workload.session[r])}; fewer turns or shorter lengths",
            "request-too-long",
            f"{where}/turns",
        )
    unmeasured = traffic.warmup_requests + traffic.cooldown_requests
    if unmeasured >= workload.num_requests:
        raise _unprocessable(
            f"warmup_requests + cooldown_requests ({unmeasured}) must be below the "
            f"{workload.num_requests} turns drawn so that some are measured",
            "invalid-traffic",
            f"{pointer}/warmup_requests",
            f"{pointer}/cooldown_requests",
        )
    return replace(
        workload,
        warmup_requests=traffic.warmup_requests,
        cooldown_requests=traffic.cooldown_requests,
    )


def seed_streams(seed: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """Independent streams for the requests and the router, both fixed by ``seed`` (the
    CLI's ``simulate --seed`` draws from the same ones)."""
    workload_seed, routing_seed = np.random.SeedSequence(seed).spawn(2)
    return workload_seed, routing_seed


def run_simulation(
    built: ResolvedReplica,
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
    """Draw ``traffic``'s requests (seeded by ``traffic.seed``; 422s point below ``pointer``)
    and run :func:`~servesize.core.replica.simulate_replica` on ``replicas`` copies of the
    built replica, or with ``disaggregation`` on a prefill pool and a decode pool (``routing``
    spreads requests over the prefill pool). ``policy`` overrides the engine's scheduler."""
    replica = built.replica
    kv_link = None
    if disaggregation is not None:
        spec = disaggregation.kv_transfer
        kv_link = KVLink(
            latency_s=spec.latency_s,
            bandwidth_bytes_per_s=spec.bandwidth_bytes_per_s,
            first_token_after_transfer=spec.first_token_after_transfer,
        )
    if policy is not None or kv_link is not None:
        replica = replica.configured(policy=policy, kv_link=kv_link)
    workload_seed, routing_seed = seed_streams(traffic.seed)
    workload = build_workload(traffic, replica.memory.max_model_len, workload_seed, pointer=pointer)
    pools = (
        DisaggregatedPools(
            prefill_replicas=disaggregation.prefill_replicas,
            decode_replicas=disaggregation.decode_replicas,
            decode_routing=disaggregation.decode_routing,
        )
        if disaggregation is not None
        else None
    )
    run = simulate_replica(
        replica,
        workload,
        replicas=replicas,
        routing=routing,
        routing_rng=np.random.default_rng(routing_seed),
        overheads=overheads,
        pools=pools,
        progress=progress,
    )
    return simulation_run(replica, workload, run)


def simulation_run(replica: Replica, workload: Workload, run: ReplicaRun) -> SimulationRun:
    """The run of ``workload`` on ``replica`` as the renderers read it (also the CLI's)."""
    return SimulationRun(
        scheduler=run.scheduler,
        workload=workload,
        result=run.result,
        overhead_s=run.overheads.total_s,
        replicas=run.replicas,
        warnings=list(run.warnings),
        overheads=run.overheads,
        overheads_from_profile=run.overheads_from_profile,
        transfer=run.transfer,
        transfer_bandwidth_from_hardware=replica.kv_bandwidth_from_hardware,
    )
