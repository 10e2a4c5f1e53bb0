"""Auto-sizing (modeling.md §3.11): the cheapest deployment that meets an SLO at a target rate.

1. **Enumerate** hardware × engine × parallelism × knobs (:mod:`.space`).
2. **Prune** with a reason: over the GPU limit (before any work), invalid for the engine, does
   not fit by the memory ledger (its reason), SLO missed even at zero load (which target, by how
   much), or too many replicas for the GPU limit.
3. **Screen** every survivor with Tier A (:func:`open_loop_curve`, one vectorised pass): the
   per-replica maximum rate ``λ*`` under the SLO (:mod:`.screen`), then
   ``replicas = ceil(target / (λ* × headroom))``; the headroom absorbs model and forecast error
   and is reported, never hidden. Disaggregated candidates size a prefill pool on the prefill
   load (TTFT targets) and a decode pool on the decode load (TPOT/ITL targets), rate-matched
   from the same step-time model, with the KV transfer ``latency + P·kv_bytes/bandwidth`` over
   the hardware interconnect; E2E and attainment targets scale both pools' load together.
4. **Rank** by ``cost_per_hour = replicas × GPUs per replica × price`` (unpriced plans last),
   ties to fewer GPUs, then to more spare capacity.
5. **Verify** the best plans by simulation at the target load. A small fleet (at most
   :data:`FLEET_MAX_REPLICAS` replicas) is simulated whole, with least-loaded routing
   (``verification = "fleet"``). A larger one is checked on one replica at ``target / R``
   (``"one-replica-thinned"``): with random routing each replica's arrivals are an independent
   thinning of the fleet's, a Poisson stream of rate ``target / R`` when the fleet's is Poisson
   (renewal arrivals of squared CV ``c²`` thin to ``1 + (c² − 1)/R``, simulated as gamma gaps
   with that CV), so the one-replica run is exact for a randomly routed fleet and conservative
   for least-loaded routing, which only shortens queues. A large disaggregated plan runs a
   sub-fleet of ``p + d <= FLEET_MAX_REPLICAS`` replicas whose ratio is nearest ``x : y``, at the
   rate that gives each pool at least its share (``"sub-fleet-thinned"``, conservative). Runs
   measure at least :data:`VERIFY_MIN_MEASURED` requests and :data:`VERIFY_RESIDENCES` Tier A
   mean residences ``W̄`` (after a warm-up of at least two), so the simulator's stability
   verdict is conclusive; a plan whose run is still inconclusive stays, decided by Tier A, with
   a note — only a conclusive miss rejects. A plan that misses gets one more replica (the busier
   pool for P/D) and is simulated again, at most :data:`MAX_EXTRA_REPLICAS` times, else it is
   rejected with the simulated reason. Verification walks the ranking until ``verify_top``
   plans pass, so the plan ranked first is a verified one whenever any passes. Simulated work
   is bounded per sizing (:data:`MAX_SIMULATED_REQUESTS`, :data:`MAX_SIMULATED_WORK`): a plan
   whose run would exceed what is left stays decided by Tier A, with a note.

Compared with AIConfigurator (``replicas = ceil(rate / seq_per_s)`` at zero queueing) and the
llm-d planner (``ceil(1.2 × qps / qps_per_replica)`` from benchmarks), the per-replica rate here
already includes queueing delay at that load, and the fleet is checked by simulation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from servesize.core.architecture import Architecture, summarize
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment, InvalidDeploymentError, MemoryPlan, plan_memory
from servesize.core.simulation import (
    ClientOverheads,
    KVTransfer,
    SchedulerConfig,
    SimulationResult,
    SimulationSummary,
    engine_scheduler,
    simulate,
    simulate_disaggregated,
    whole_prompt_overflow,
)
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.sizing.screen import (
    SATURATION,
    UTILIZATION_CAP,
    Miss,
    ScreenResult,
    screen_curve,
    target_curves,
)
from servesize.core.sizing.space import Candidate, SearchSpace, enumerate_candidates
from servesize.core.slo.evaluate import SloEvaluation, evaluate_result
from servesize.core.slo.spec import ServiceLevelObjective
from servesize.core.steptime import (
    MeasuredProfile,
    StepTimeModel,
    StepWork,
    build_step_model,
    engine_profile,
    simulator_constants,
)
from servesize.core.steptime.openloop import OpenLoopCurve, open_loop_curve
from servesize.core.traffic import (
    ArrivalProcess,
    FixedLength,
    HistogramLength,
    LengthDistribution,
    LogNormalLength,
    NormalLength,
    UniformLength,
    open_loop_workload,
)

__all__ = [
    "DEFAULT_HEADROOM",
    "FLEET_MAX_REPLICAS",
    "MAX_CANDIDATES",
    "MAX_EXTRA_REPLICAS",
    "Plan",
    "Predicted",
    "Rejection",
    "SizingResult",
    "SizingTooLargeError",
    "SizingTraffic",
    "VerificationMode",
    "ZeroLoadBest",
    "replicas_needed",
    "size",
    "zero_load_infeasibility",
]

DEFAULT_HEADROOM = 0.85
MAX_EXTRA_REPLICAS = 2
KV_TRANSFER_LATENCY_S = 1e-3
"""Fixed cost per KV transfer (connection set-up, first byte): an assumption, not a
measurement."""
PCIE_BANDWIDTH_BYTES_PER_S = 25e9
"""PCIe 4.0 x16 moves about 25 GB/s each way in practice (32 GB/s raw); used when a profile
has no interconnect bandwidth."""
FLEET_MAX_REPLICAS = 8
"""Fleets up to this many replicas are simulated whole; larger ones by thinning."""
VERIFY_MIN_MEASURED = 1800
"""Measured requests of a verification run at least (percentiles up to p99 from ~18 tail
requests)."""
VERIFY_RESIDENCES = 10
"""The measured window spans at least this many Tier A mean residences ``W̄``: the simulator
needs ``2 W̄`` to tell a growing queue from one filling up."""
VERIFY_WARMUP_RESIDENCES = 2
VERIFY_WARMUP_FRACTION = 0.1
MAX_SIMULATED_REQUESTS = 12_000
"""Requests simulated by one sizing, all verification runs together (a run costs about 0.1 to
0.5 ms of CPU per request)."""
MAX_SIMULATED_WORK = 40_000
"""Scheduler work of one sizing's verification runs, in request-chunks: each request costs
``1 + ceil(prompt / max_num_batched_tokens)`` (its prefill chunks and its decode run)."""
MAX_CANDIDATES = 512
"""Candidate configurations one sizing may enumerate (Tier A screens one in about 10 ms)."""
MAX_PLANS = 10
"""Plans returned (the best by rank); every other survivor is counted, not listed."""

RejectReason = Literal[
    "over-gpu-limit",
    "invalid-deployment",
    "does-not-fit",
    "context-too-short",
    "unsupported",
    "infeasible-at-zero-load",
    "slo-missed",
    "verification-failed",
]
VerificationMode = Literal["fleet", "one-replica-thinned", "sub-fleet-thinned"]


class SizingTooLargeError(ValueError):
    """The search space enumerates more than :data:`MAX_CANDIDATES` candidates."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SizingTraffic:
    """The forecast: open-loop arrivals at ``rate_per_s`` with these lengths."""

    rate_per_s: float
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    process: ArrivalProcess = "poisson"
    cv: float = 1.0
    timeout_s: float = math.inf
    seed: int = 0
    longest_request_tokens: int | None = None
    """Prompt + output tokens of the longest request a plan's ``max_model_len`` must hold;
    ``None``: the largest prompt plus the largest output the distributions draw."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_per_s) and self.rate_per_s > 0):
            raise ValueError(f"rate_per_s must be > 0, got {self.rate_per_s}")

    @property
    def longest_tokens(self) -> int | None:
        """:attr:`longest_request_tokens`, or the sum of the distributions' largest draws
        (``None`` for an unbounded one, e.g. geometric)."""
        if self.longest_request_tokens is not None:
            return self.longest_request_tokens
        a, b = _largest_draw(self.input_tokens), _largest_draw(self.output_tokens)
        return a + b if a is not None and b is not None else None


def _largest_draw(dist: LengthDistribution) -> int | None:
    if isinstance(dist, FixedLength):
        return dist.tokens
    if isinstance(dist, UniformLength):
        return dist.high_tokens
    if isinstance(dist, NormalLength | LogNormalLength):
        return dist.max_tokens
    if isinstance(dist, HistogramLength):
        return dist.bin_edges_tokens[-1] - 1
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Predicted:
    """Metrics of a whole plan at the target load, from one tier."""

    source: Literal["tier_a", "simulation"]
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p95_s: float
    e2e_p95_s: float
    throughput_requests_per_s: float
    goodput_requests_per_s: float
    feasible: bool
    binding: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A costed deployment that meets the SLO (by Tier A, and by simulation once verified)."""

    candidate: Candidate
    memory: MemoryPlan
    replicas: int
    """Aggregated: engine replicas. Disaggregated: prefill + decode replicas."""
    prefill_replicas: int | None
    decode_replicas: int | None
    max_rate_per_replica_per_s: float
    """Tier A ``λ*`` (disaggregated: of a prefill replica)."""
    decode_max_rate_per_replica_per_s: float | None
    utilization: float
    """Target rate over the plan's Tier A capacity ``replicas × λ*`` (the busier pool)."""
    headroom: float
    binding: str
    kv_transfer_s: float | None
    price_per_gpu_hour: float | None
    tier_a: Predicted | None = None
    """Filled in for the returned plans only (the screen itself needs no percentiles)."""
    simulation: Predicted | None = None
    """The conclusive verification run (None when not simulated or inconclusive)."""
    verified: bool = False
    verification: VerificationMode | None = None
    """How the plan was simulated (None when it was not)."""
    notes: tuple[str, ...] = ()
    """Why a plan is decided by Tier A although verification was asked for, and the like."""
    target_output_tokens_per_s: float = 0.0

    @property
    def gpus_per_replica(self) -> int:
        return self.candidate.gpus_per_replica

    @property
    def total_gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    @property
    def cost_per_hour(self) -> float | None:
        """``replicas × GPUs per replica × price per GPU-hour``."""
        if self.price_per_gpu_hour is None:
            return None
        return self.total_gpus * self.price_per_gpu_hour

    @property
    def cost_per_million_output_tokens(self) -> float | None:
        """``cost_per_hour / (target output tokens/s × 3600) × 1e6``."""
        cost = self.cost_per_hour
        if cost is None or self.target_output_tokens_per_s <= 0:
            return None
        return cost / (self.target_output_tokens_per_s * 3600) * 1e6

    @property
    def decided_by(self) -> Literal["tier_a", "simulation"]:
        return "simulation" if self.verified else "tier_a"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """A candidate that did not become a plan, and why."""

    candidate: Candidate
    reason: RejectReason
    detail: str
    miss: float | None = None
    """For SLO misses: how far past the limit, as a fraction of it."""
    zero_load: tuple[Miss, ...] = ()
    """For ``infeasible-at-zero-load``: every target's value at the lowest load, met or not."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SizingResult:
    plans: tuple[Plan, ...]
    plans_found: int
    """Survivors of the search; ``plans`` holds the best ``max_plans`` of them."""
    rejected: tuple[Rejection, ...]
    candidates_evaluated: int
    target_rate_per_s: float
    headroom: float
    simulations: int
    elapsed_s: float
    warnings: tuple[str, ...] = ()
    passed_zero_load: int = 0
    """Candidates that met every target at the lowest load (plans and later rejections)."""
    simulated_requests: int = 0


def replicas_needed(
    target_rate_per_s: float, max_rate_per_replica_per_s: float, headroom: float
) -> int:
    """``ceil(target / (λ* × headroom))``, at least 1.

    >>> replicas_needed(100.0, 12.0, 0.85)  # 100 / 10.2 = 9.8
    10
    """
    if max_rate_per_replica_per_s <= 0:
        raise ValueError("max_rate_per_replica_per_s must be > 0")
    if not 0 < headroom <= 1:
        raise ValueError(f"headroom must be in (0, 1], got {headroom}")
    # Round first so that exact quotients (e.g. 10 / (5 × 1.0)) are not pushed up by float error.
    return max(1, math.ceil(round(target_rate_per_s / (max_rate_per_replica_per_s * headroom), 9)))


@dataclass(slots=True)
class _Built:
    memory: MemoryPlan
    model: StepTimeModel


@dataclass(slots=True)
class _Context:
    arch: Architecture
    model_name: str
    hardware: dict[str, HardwareSpec]
    measured: Mapping[str, MeasuredProfile]
    prices: Mapping[str, float]
    objective: ServiceLevelObjective
    traffic: SizingTraffic
    target_rate_per_s: float
    headroom: float
    calibrated: bool
    input_tokens: float
    output_tokens: float
    max_gpus: int | None
    base_models: dict[tuple[object, ...], StepTimeModel] = field(default_factory=dict)
    curves: dict[str, OpenLoopCurve] = field(default_factory=dict)
    decode_curves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    simulated_requests: int = 0
    simulated_work: int = 0


def _deployment(c: Candidate) -> Deployment:
    return Deployment(
        tensor_parallel_size=c.tensor_parallel_size,
        pipeline_parallel_size=c.pipeline_parallel_size,
        data_parallel_size=c.data_parallel_size,
        enable_expert_parallel=c.enable_expert_parallel,
        kv_cache_dtype=c.kv_cache_dtype,
        gpu_memory_utilization=c.gpu_memory_utilization,
        max_model_len=c.max_model_len,
        max_num_seqs=c.max_num_seqs,
        max_num_batched_tokens=c.max_num_batched_tokens,
        engine=c.engine,
    )


def _build(ctx: _Context, c: Candidate, memory: MemoryPlan) -> StepTimeModel:
    """The step-time model with the plan's scheduler limits (the base model is shared by every
    knob setting of one layout)."""
    res = memory.deployment
    key = (
        c.hardware_id,
        res.engine,
        res.tensor_parallel_size,
        res.pipeline_parallel_size,
        res.data_parallel_size,
        res.expert_parallel_size,
        res.kv_cache.element_dtype,
        res.enforce_eager,
    )
    base = ctx.base_models.get(key)
    if base is None:
        base = build_step_model(
            ctx.arch,
            ctx.hardware[c.hardware_id],
            engine=engine_profile(res.engine, calibrated=ctx.calibrated),
            tensor_parallel_size=res.tensor_parallel_size,
            pipeline_parallel_size=res.pipeline_parallel_size,
            data_parallel_size=res.data_parallel_size,
            expert_parallel_size=res.expert_parallel_size,
            kv_dtype=res.kv_cache.element_dtype,
            cuda_graphs=not res.enforce_eager,
            measured=ctx.measured.get(c.hardware_id),
            calibrated=ctx.calibrated,
        )
        ctx.base_models[key] = base
    seqs = res.max_num_seqs if res.max_num_seqs is not None else max(memory.kv_blocks, 1)
    profile = replace(
        base.engine, max_num_batched_tokens=res.max_num_batched_tokens, max_num_seqs=seqs
    )
    return replace(base, engine=profile)


def _engine_config(memory: MemoryPlan) -> SchedulerConfig:
    """The simulated replica: one engine stands for the DP group, limits and blocks pooled."""
    res = memory.deployment
    dp = res.data_parallel_size
    seqs = res.max_num_seqs if res.max_num_seqs is not None else memory.kv_blocks
    return SchedulerConfig(
        max_num_batched_tokens=res.max_num_batched_tokens * dp,
        max_num_seqs=max(seqs, 1) * dp,
        block_size_tokens=memory.kv_block_size,
        num_kv_blocks=max(memory.kv_blocks, 1) * dp,
        policy=engine_scheduler(res.engine),
    )


def _describe_misses(misses: tuple[Miss, ...]) -> str:
    parts = []
    for m in misses:
        relation = ">" if m.direction == "max" else "<"
        parts.append(
            f"{m.name} {m.predicted:.4g} {relation} limit {m.limit:.4g} "
            f"(missed by {m.relative_miss:.0%})"
        )
    return "; ".join(parts)


def _tier_a_metrics(
    ctx: _Context, curve: OpenLoopCurve, rate_per_replica: float, replicas: int, binding: str
) -> Predicted:
    """Tier A at one replica's share of the target load (interpolated between grid points)."""
    i = int(
        np.clip(np.searchsorted(curve.rate_per_s, rate_per_replica), 1, curve.rate_per_s.size - 1)
    )
    pair = curve.take([i - 1, i])

    def at(values: np.ndarray) -> float:
        return pair.interpolate(values, rate_per_replica)

    tpot = at(pair.tpot_s)
    decode_steps = max(ctx.output_tokens - 1.0, 0.0)
    ttft95 = at(pair.ttft_quantile(0.95))
    slo = ctx.objective.request_slo()
    good = 1.0
    if slo is not None:
        if slo.tpot_s is not None and tpot > slo.tpot_s and ctx.output_tokens >= 2:
            good = 0.0
        else:
            limit = min(
                slo.ttft_s if slo.ttft_s is not None else math.inf,
                slo.e2e_s - decode_steps * tpot if slo.e2e_s is not None else math.inf,
            )
            good = at(pair.ttft_cdf(limit)) if math.isfinite(limit) else 1.0
    rate = rate_per_replica * replicas
    return Predicted(
        source="tier_a",
        ttft_p50_s=at(pair.ttft_quantile(0.5)),
        ttft_p95_s=ttft95,
        ttft_p99_s=at(pair.ttft_quantile(0.99)),
        tpot_p50_s=tpot,
        tpot_p95_s=tpot,
        e2e_p95_s=ttft95 + decode_steps * tpot,
        throughput_requests_per_s=rate,
        goodput_requests_per_s=rate * good,
        feasible=True,
        binding=binding,
    )


def _plan_or_reject(
    ctx: _Context,
    c: Candidate,
    built: _Built,
    screen: ScreenResult,
    *,
    curve: OpenLoopCurve,
) -> Plan | Rejection:
    if screen.max_rate_per_s <= 0:
        return Rejection(
            candidate=c,
            reason="infeasible-at-zero-load",
            detail=_describe_misses(screen.misses),
            miss=max(m.relative_miss for m in screen.misses) if screen.misses else None,
            zero_load=screen.zero_load,
        )
    replicas = replicas_needed(ctx.target_rate_per_s, screen.max_rate_per_s, ctx.headroom)
    total = replicas * c.gpus_per_replica
    if ctx.max_gpus is not None and total > ctx.max_gpus:
        return Rejection(
            candidate=c,
            reason="over-gpu-limit",
            detail=(
                f"needs {replicas} replicas × {c.gpus_per_replica} GPUs = {total} GPUs "
                f"(λ* = {screen.max_rate_per_s:.3g}/s per replica, limited by {screen.binding}) "
                f"> max_gpus {ctx.max_gpus}"
            ),
        )
    per_replica = ctx.target_rate_per_s / replicas
    return Plan(
        candidate=c,
        memory=built.memory,
        replicas=replicas,
        prefill_replicas=None,
        decode_replicas=None,
        max_rate_per_replica_per_s=screen.max_rate_per_s,
        decode_max_rate_per_replica_per_s=None,
        utilization=per_replica / screen.max_rate_per_s,
        headroom=ctx.headroom,
        binding=screen.binding,
        kv_transfer_s=None,
        price_per_gpu_hour=ctx.prices.get(c.hardware_id),
        target_output_tokens_per_s=ctx.target_rate_per_s * ctx.output_tokens,
    )


# ----------------------------------------------------------------------------- disaggregation


def _kv_transfer(ctx: _Context, c: Candidate, memory: MemoryPlan) -> KVTransfer:
    link = ctx.hardware[c.hardware_id].interconnect
    bandwidth = (
        float(link.bandwidth_bytes_per_s)
        if link is not None and link.bandwidth_bytes_per_s
        else PCIE_BANDWIDTH_BYTES_PER_S
    )
    return KVTransfer(
        latency_s=KV_TRANSFER_LATENCY_S,
        bandwidth_bytes_per_s=bandwidth,
        kv_bytes_per_token=float(memory.kv_bytes_per_token_per_gpu),
    )


def _decode_curve(
    ctx: _Context, model: StepTimeModel, memory: MemoryPlan, points: int = 96
) -> tuple[np.ndarray, np.ndarray, float]:
    """Decode pool of one replica: rate ``X(L) = L / ((n − 1)·τ_dec(L))`` and ``τ_dec(L)`` for
    ``L`` resident decodes at context ``P + n/2``, up to the residency cap."""
    p, n = ctx.input_tokens, ctx.output_tokens
    seqs = float(model.engine.max_num_seqs * model.inventory.data_parallel_size)
    cap = max(min(seqs, math.floor(memory.kv_capacity_tokens / (p + n / 2))), 1.0)
    resident = np.geomspace(min(1e-3, cap / 2), cap, points)
    pp = float(model.inventory.pipeline_parallel_size)
    step = model.step_time(StepWork.decode(np.maximum(resident / pp, 1.0), p + n / 2)).total_s
    rate = resident / ((n - 1) * step)
    return np.asarray(rate), np.asarray(step), float(rate[-1])


def _disaggregated(ctx: _Context, c: Candidate, built: _Built) -> Plan | Rejection:
    n = ctx.output_tokens
    if n < 2:
        return Rejection(
            candidate=c,
            reason="unsupported",
            detail="disaggregation needs at least two output tokens per request",
        )
    transfer = _kv_transfer(ctx, c, built.memory)
    xfer_s = float(transfer.transfer_time_s(np.array([round(ctx.input_tokens)]))[0])
    prefill = open_loop_curve(
        built.model,
        input_tokens=ctx.input_tokens,
        output_tokens=1,
        kv_capacity_tokens=built.memory.kv_capacity_tokens,
    )
    # TTFT targets bind the prefill pool (the first token comes from the prefill worker).
    ttft_targets = [t for t in target_curves(ctx.objective, 1.0) if t.name.startswith("ttft_s.")]
    p_screen = screen_curve(prefill, ttft_targets)
    if p_screen.max_rate_per_s <= 0:
        return Rejection(
            candidate=c,
            reason="infeasible-at-zero-load",
            detail="prefill pool: " + _describe_misses(p_screen.misses),
            miss=max(m.relative_miss for m in p_screen.misses) if p_screen.misses else None,
            zero_load=p_screen.zero_load,
        )
    d_rate, d_step, d_sat = _decode_curve(ctx, built.model, built.memory)
    # TPOT = (E2E − TTFT)/(n − 1) also carries the transfer; ITL gaps are decode steps.
    tpot = d_step + xfer_s / (n - 1)
    d_max, binding_d = UTILIZATION_CAP * d_sat, SATURATION
    for t in ctx.objective.targets:
        if t.metric not in ("tpot", "itl"):
            continue
        values = tpot if (t.metric == "tpot" or t.statistic == "mean") else d_step
        holds = values <= t.limit_s
        if not holds[0]:
            miss = (float(values[0]) - t.limit_s) / t.limit_s
            return Rejection(
                candidate=c,
                reason="infeasible-at-zero-load",
                detail=(
                    f"decode pool: {t.name} {values[0]:.4g} > limit {t.limit_s:.4g} "
                    f"(missed by {miss:.0%})"
                ),
                miss=miss,
                zero_load=(
                    Miss(name=t.name, predicted=float(values[0]), limit=t.limit_s, direction="max"),
                ),
            )
        if holds.all():
            continue
        k = int(np.argmin(holds))
        v0, v1 = float(values[k - 1]), float(values[k])
        fraction = (t.limit_s - v0) / (v1 - v0) if v1 != v0 else 0.0
        rate = float(d_rate[k - 1] + fraction * (d_rate[k] - d_rate[k - 1]))
        if rate < d_max:
            d_max, binding_d = rate, t.name
    # E2E and attainment couple the pools: scale both loads together until they hold, on the
    # prefill curve's grid (E2E = TTFT + transfer + (n − 1)·τ_dec = TTFT + (n − 1)·TPOT).
    scale = 1.0
    joint = [
        t
        for t in target_curves(ctx.objective, n)
        if t.name.startswith("e2e") or t.name == "attainment"
    ]
    if joint:
        fractions = prefill.rate_per_s / p_screen.max_rate_per_s
        usable = fractions <= 1.0
        coupled = replace(prefill, tpot_s=np.interp(fractions * d_max, d_rate, tpot))
        ok = np.all(np.vstack([t.holds(coupled) for t in joint]), axis=0) & usable
        if not ok[0]:
            return Rejection(
                candidate=c,
                reason="infeasible-at-zero-load",
                detail="an E2E or attainment target is missed at the lowest load of both pools",
            )
        last = int(np.argmin(ok)) - 1 if not ok.all() else int(np.max(np.nonzero(usable)))
        scale = min(1.0, float(fractions[last]))
    p_max, d_max = p_screen.max_rate_per_s * scale, d_max * scale
    x = replicas_needed(ctx.target_rate_per_s, p_max, ctx.headroom)
    y = replicas_needed(ctx.target_rate_per_s, d_max, ctx.headroom)
    total = (x + y) * c.gpus_per_replica
    if ctx.max_gpus is not None and total > ctx.max_gpus:
        return Rejection(
            candidate=c,
            reason="over-gpu-limit",
            detail=(
                f"needs {x} prefill + {y} decode replicas = {total} GPUs > max_gpus {ctx.max_gpus}"
            ),
        )
    p_load = ctx.target_rate_per_s / x
    d_load = ctx.target_rate_per_s / y
    ctx.curves[c.label] = prefill
    ctx.decode_curves[c.label] = (d_rate, tpot)
    return Plan(
        candidate=c,
        memory=built.memory,
        replicas=x + y,
        prefill_replicas=x,
        decode_replicas=y,
        max_rate_per_replica_per_s=p_max,
        decode_max_rate_per_replica_per_s=d_max,
        utilization=max(p_load / p_max, d_load / d_max),
        headroom=ctx.headroom,
        binding=p_screen.binding if p_load / p_max >= d_load / d_max else binding_d,
        kv_transfer_s=xfer_s,
        price_per_gpu_hour=ctx.prices.get(c.hardware_id),
        target_output_tokens_per_s=ctx.target_rate_per_s * n,
    )


def _with_tier_a(ctx: _Context, plan: Plan) -> Plan:
    """The plan with its Tier A metrics at its share of the target load."""
    curve = ctx.curves[plan.candidate.label]
    if plan.prefill_replicas is None or plan.decode_replicas is None:
        per_replica = ctx.target_rate_per_s / plan.replicas
        metrics = _tier_a_metrics(ctx, curve, per_replica, plan.replicas, plan.binding)
        return replace(plan, tier_a=metrics)
    d_rate, tpot = ctx.decode_curves[plan.candidate.label]
    x, y = plan.prefill_replicas, plan.decode_replicas
    base = _tier_a_metrics(ctx, curve, ctx.target_rate_per_s / x, x, plan.binding)
    tpot_at = float(np.interp(ctx.target_rate_per_s / y, d_rate, tpot))
    decode_steps = ctx.output_tokens - 1
    return replace(
        plan,
        tier_a=replace(
            base,
            tpot_p50_s=tpot_at,
            tpot_p95_s=tpot_at,
            e2e_p95_s=base.ttft_p95_s + decode_steps * tpot_at,
        ),
    )


# ----------------------------------------------------------------------------- verification


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """One verification run: what is simulated, at what rate, for how many requests."""

    mode: VerificationMode
    rate_per_s: float
    """Arrival rate of the simulated replicas (the fleet's ``target`` for ``fleet``)."""
    replicas: int
    prefill_replicas: int | None = None
    decode_replicas: int | None = None
    kept_fraction: float
    """Share of the fleet's arrivals the simulated replicas see."""
    residence_s: float
    num_requests: int
    warmup_requests: int
    work: int


def _interp(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
    return float(np.interp(x, xs, ys))


def _residence_s(ctx: _Context, plan: Plan, per_prefill: float, per_decode: float) -> float:
    """Tier A mean residence ``W̄ = TTFT̄ + (n − 1)·TPOT`` at the given per-replica loads
    (aggregated: both are the replica's load; P/D: plus the KV transfer)."""
    curve = ctx.curves[plan.candidate.label]
    decode_steps = max(ctx.output_tokens - 1.0, 0.0)
    ttft = _interp(per_prefill, curve.rate_per_s, curve.ttft_mean_s)
    if plan.prefill_replicas is None:
        return ttft + decode_steps * _interp(per_prefill, curve.rate_per_s, curve.tpot_s)
    d_rate, tpot = ctx.decode_curves[plan.candidate.label]
    return ttft + (plan.kv_transfer_s or 0.0) + decode_steps * _interp(per_decode, d_rate, tpot)


def _sub_fleet(x: int, y: int) -> tuple[int, int]:
    """``(p, d)`` with ``p + d <= FLEET_MAX_REPLICAS`` whose ratio is nearest ``x : y`` (in
    log), the smaller on ties.

    >>> _sub_fleet(10, 2), _sub_fleet(9, 9), _sub_fleet(20, 3)  # 20/3 = 6.67: 7/6.67 < 6.67/6
    ((5, 1), (1, 1), (7, 1))
    """
    options = (
        (max(d * x / (p * y), p * y / (d * x)), p + d, p, d)
        for p in range(1, FLEET_MAX_REPLICAS)
        for d in range(1, FLEET_MAX_REPLICAS - p + 1)
    )
    _, _, p, d = min(options)
    return p, d


def _run(ctx: _Context, plan: Plan, mode: VerificationMode) -> _Run:
    """The run of ``mode``: its rate, replicas and length. The measured window holds at least
    ``VERIFY_RESIDENCES · L`` requests (``L = rate · W̄`` resident, Little), so it spans that
    many mean residences; the warm-up at least two."""
    target = ctx.target_rate_per_s
    x, y = plan.prefill_replicas, plan.decode_replicas
    p: int | None = None
    d: int | None = None
    if x is None or y is None:
        per = target / plan.replicas
        rate, replicas = (target, plan.replicas) if mode == "fleet" else (per, 1)
        residence = _residence_s(ctx, plan, per, per)
    else:
        p, d = (x, y) if mode == "fleet" else _sub_fleet(x, y)
        rate = target * max(p / x, d / y)
        replicas = p + d
        residence = _residence_s(ctx, plan, rate / p, rate / d)
    resident = rate * residence
    measured = max(VERIFY_MIN_MEASURED, math.ceil(VERIFY_RESIDENCES * resident))
    warmup = max(
        math.ceil(VERIFY_WARMUP_FRACTION * measured),
        math.ceil(VERIFY_WARMUP_RESIDENCES * resident),
    )
    budget = plan.memory.deployment.max_num_batched_tokens
    chunks = 1 + math.ceil(ctx.input_tokens / max(budget, 1))
    return _Run(
        mode=mode,
        rate_per_s=rate,
        replicas=replicas,
        prefill_replicas=p,
        decode_replicas=d,
        kept_fraction=min(rate / target, 1.0),
        residence_s=residence,
        num_requests=measured + warmup,
        warmup_requests=warmup,
        work=(measured + warmup) * chunks,
    )


def _plan_run(ctx: _Context, plan: Plan) -> _Run | str:
    """The verification run of ``plan`` (see the module docstring), or why there is none: the
    whole fleet when small, else the thinned check; the cheaper one when over the budget."""
    small = plan.replicas <= FLEET_MAX_REPLICAS
    thinned: VerificationMode = (
        "one-replica-thinned" if plan.prefill_replicas is None else "sub-fleet-thinned"
    )
    modes: list[VerificationMode] = ["fleet", thinned] if small else [thinned]
    left_requests = MAX_SIMULATED_REQUESTS - ctx.simulated_requests
    left_work = MAX_SIMULATED_WORK - ctx.simulated_work
    run = _run(ctx, plan, modes[0])
    for mode in modes:
        run = _run(ctx, plan, mode)
        if run.num_requests <= left_requests and run.work <= left_work:
            return run
    return (
        f"not simulated: a conclusive {run.mode} run needs {run.num_requests} requests "
        f"({run.work} request-chunks; W̄ ≈ {run.residence_s:.3g} s), more than this sizing's "
        f"budget has left ({max(left_requests, 0)} requests, {max(left_work, 0)} "
        f"request-chunks); Tier A decides"
    )


def _thinned_arrivals(
    process: ArrivalProcess, cv: float, kept: float
) -> tuple[ArrivalProcess, float]:
    """Arrivals of a ``kept`` share of a renewal stream split at random: Poisson stays Poisson;
    otherwise a geometric sum of gaps, of squared CV ``1 + (c² − 1)·kept``, drawn as gamma gaps
    with that CV (the first two moments).

    >>> _thinned_arrivals("constant", 1.0, 0.25)  # c² = 0 → 0.75
    ('gamma', 0.8660254037844386)
    """
    if kept >= 1.0 or process == "poisson":
        return process, cv
    c2 = 0.0 if process == "constant" else cv * cv
    return "gamma", math.sqrt(1.0 + (c2 - 1.0) * kept)


CHUNKED_PREFILL_NOTE = (
    "requests exceed one rank's max_num_batched_tokens: verified with chunked prefill on "
    "(TensorRT-LLM: enable_chunked_prefill: true), which the engine needs to serve them"
)


def _simulate(
    ctx: _Context, plan: Plan, run: _Run
) -> tuple[SimulationResult, SimulationSummary, SloEvaluation, bool]:
    """Simulate ``run`` of ``plan``; the flag says whether chunked prefill had to be turned on
    (requests longer than one rank's budget under an engine that runs prompts whole)."""
    c = plan.candidate
    memory = plan.memory
    model = _build(ctx, c, memory)
    traffic = ctx.traffic
    process, cv = _thinned_arrivals(traffic.process, traffic.cv, run.kept_fraction)
    workload = open_loop_workload(
        num_requests=run.num_requests,
        rate_per_s=run.rate_per_s,
        input_tokens=traffic.input_tokens,
        output_tokens=traffic.output_tokens,
        rng=np.random.default_rng(traffic.seed),
        process=process,
        cv=cv,
        timeout_s=traffic.timeout_s,
        warmup_requests=run.warmup_requests,
    )
    ctx.simulated_requests += run.num_requests
    ctx.simulated_work += run.work
    engine = _engine_config(memory)
    rank_budget = memory.deployment.max_num_batched_tokens
    chunked = bool(
        whole_prompt_overflow(
            engine.policy, workload.prompt_tokens, workload.output_tokens, rank_budget
        )
    )
    if chunked:
        # Requests longer than one rank's budget need chunked prefill (TensorRT-LLM's
        # enable_chunked_prefill); without it the engine would refuse them.
        engine = replace(engine, policy="vllm_v1")
    model = model.with_engine(simulator_constants(model.engine))
    steps = steptime_adapter(model)
    overheads = ClientOverheads(preprocess_s=model.engine.request_overhead_s)
    if run.prefill_replicas is not None and run.decode_replicas is not None:
        result = simulate_disaggregated(
            workload,
            prefill=engine,
            decode=engine,
            prefill_step_time=steps,
            decode_step_time=steps,
            transfer=_kv_transfer(ctx, c, memory),
            prefill_replicas=run.prefill_replicas,
            decode_replicas=run.decode_replicas,
            prefill_routing="least_loaded",
            decode_routing="least_loaded",
            overheads=overheads,
        )
    else:
        result = simulate(
            workload,
            engine,
            steps,
            replicas=run.replicas,
            routing="least_loaded",
            overheads=overheads,
        )
    summary, evaluation = evaluate_result(result, ctx.objective)
    return result, summary, evaluation, chunked


def _simulated(summary: SimulationSummary, evaluation: SloEvaluation, scale: float) -> Predicted:
    """The run's metrics; rates times ``scale`` (fleet rate over simulated rate)."""
    return Predicted(
        source="simulation",
        ttft_p50_s=summary.ttft_s.p50,
        ttft_p95_s=summary.ttft_s.p95,
        ttft_p99_s=summary.ttft_s.p99,
        tpot_p50_s=summary.tpot_s.p50,
        tpot_p95_s=summary.tpot_s.p95,
        e2e_p95_s=summary.e2e_s.p95,
        throughput_requests_per_s=evaluation.throughput_requests_per_s * scale,
        goodput_requests_per_s=evaluation.goodput_requests_per_s * scale,
        feasible=evaluation.feasible,
        binding=evaluation.binding,
        reason=evaluation.reason,
    )


def _inconclusive(summary: SimulationSummary, evaluation: SloEvaluation) -> bool:
    """Every latency and rate check holds and the only objection is a stability verdict the
    simulator itself calls inconclusive (a window too short to tell)."""
    return (
        not evaluation.feasible
        and not summary.stable
        and not summary.stability_conclusive
        and all(check.holds for check in evaluation.checks)
    )


def _one_more(plan: Plan) -> Plan:
    """The plan with one more replica (for P/D, in the busier pool)."""
    if plan.prefill_replicas is None or plan.decode_replicas is None:
        return replace(
            plan,
            replicas=plan.replicas + 1,
            utilization=plan.utilization * plan.replicas / (plan.replicas + 1),
        )
    assert plan.decode_max_rate_per_replica_per_s is not None
    p_util = 1 / (plan.prefill_replicas * plan.max_rate_per_replica_per_s)
    d_util = 1 / (plan.decode_replicas * plan.decode_max_rate_per_replica_per_s)
    if p_util >= d_util:
        return replace(plan, prefill_replicas=plan.prefill_replicas + 1, replicas=plan.replicas + 1)
    return replace(plan, decode_replicas=plan.decode_replicas + 1, replicas=plan.replicas + 1)


def _describe_run(run: _Run) -> str:
    if run.mode == "fleet":
        return f"the whole fleet at {run.rate_per_s:.4g}/s"
    if run.mode == "one-replica-thinned":
        return f"one replica at its share {run.rate_per_s:.4g}/s"
    return f"a {run.prefill_replicas}P+{run.decode_replicas}D sub-fleet at {run.rate_per_s:.4g}/s"


def _verify_one(ctx: _Context, plan: Plan) -> tuple[Plan | Rejection, int]:
    """Simulate ``plan``, adding replicas after conclusive misses: the verified plan, the plan
    left to Tier A with a note (inconclusive run, over the budget), or a rejection."""
    runs = 0
    notes: list[str] = []
    for extra in range(MAX_EXTRA_REPLICAS + 1):
        if extra and ctx.max_gpus is not None and plan.total_gpus > ctx.max_gpus:
            notes.append(f"{plan.replicas} replicas would exceed max_gpus {ctx.max_gpus}")
            break
        run = _plan_run(ctx, plan)
        if isinstance(run, str):
            # Unverified (with the misses that added replicas, if any): Tier A decides.
            return replace(plan, notes=(*notes, run)), runs
        _, summary, evaluation, chunked = _simulate(ctx, plan, run)
        runs += 1
        scale = ctx.target_rate_per_s / run.rate_per_s
        if chunked and CHUNKED_PREFILL_NOTE not in notes:
            notes.append(CHUNKED_PREFILL_NOTE)
        if evaluation.feasible:
            return replace(
                plan,
                simulation=_simulated(summary, evaluation, scale),
                verified=True,
                verification=run.mode,
                notes=tuple(notes),
            ), runs
        if _inconclusive(summary, evaluation):
            notes.append(
                f"not verified: the simulation of {_describe_run(run)} with {plan.replicas} "
                f"replicas was inconclusive ({summary.stability_reason}); Tier A decides"
            )
            return replace(plan, verification=run.mode, notes=tuple(notes)), runs
        notes.append(
            f"simulated {_describe_run(run)} with {plan.replicas} replicas: {evaluation.reason}"
        )
        if extra < MAX_EXTRA_REPLICAS:
            plan = _one_more(plan)
    return Rejection(
        candidate=plan.candidate,
        reason="verification-failed",
        detail="; ".join(notes),
    ), runs


def _rank_key(plan: Plan) -> tuple[int, float, int, float]:
    cost = plan.cost_per_hour
    return (cost is None, cost if cost is not None else 0.0, plan.total_gpus, plan.utilization)


def _verify(
    ctx: _Context, plans: list[Plan], verify_top: int, rejected: list[Rejection]
) -> tuple[list[Plan], int]:
    """Simulate in rank order until ``verify_top`` plans pass (see the module docstring)."""
    runs = 0
    passed = 0
    tried = 0
    done: set[str] = set()
    limit = 3 * verify_top + MAX_EXTRA_REPLICAS
    while passed < verify_top and runs < limit and tried < limit:
        plans.sort(key=_rank_key)
        pending = [i for i, p in enumerate(plans) if p.candidate.label not in done]
        if not pending:
            break
        i = pending[0]
        done.add(plans[i].candidate.label)
        outcome, n = _verify_one(ctx, plans[i])
        runs += n
        tried += 1
        if isinstance(outcome, Rejection):
            plans.pop(i)
            rejected.append(outcome)
            continue
        plans[i] = outcome
        passed += outcome.verified
    plans.sort(key=lambda p: (not p.verified, *_rank_key(p)))
    return plans, runs


def size(
    arch: Architecture,
    *,
    model_name: str,
    space: SearchSpace,
    traffic: SizingTraffic,
    objective: ServiceLevelObjective,
    prices: Mapping[str, float],
    measured: Mapping[str, MeasuredProfile] | None = None,
    headroom: float = DEFAULT_HEADROOM,
    verify_top: int = 3,
    calibrated: bool = True,
    max_plans: int = MAX_PLANS,
) -> SizingResult:
    """Rank the deployments of ``space`` that serve ``traffic`` within ``objective`` (see the
    module docstring). ``prices`` are per GPU-hour by hardware id; ``measured`` kernel tables by
    hardware id."""
    if not 0 < headroom <= 1:
        raise ValueError(f"headroom must be in (0, 1], got {headroom}")
    if verify_top < 0:
        raise ValueError(f"verify_top must be >= 0, got {verify_top}")
    if space.candidate_count > MAX_CANDIDATES:
        raise SizingTooLargeError(
            f"the candidate sets combine into {space.candidate_count} configurations, more than "
            f"the {MAX_CANDIDATES} one sizing screens: narrow the hardware, parallel sizes or "
            "knob grids"
        )
    started = time.perf_counter()
    floor = objective.min_throughput_requests_per_s or 0.0
    ctx = _Context(
        arch=arch,
        model_name=model_name,
        hardware={h.id: h for h in space.hardware},
        measured=measured or {},
        prices=prices,
        objective=objective,
        traffic=traffic,
        target_rate_per_s=max(traffic.rate_per_s, floor),
        headroom=headroom,
        calibrated=calibrated,
        input_tokens=traffic.input_tokens.mean_tokens,
        output_tokens=traffic.output_tokens.mean_tokens,
        max_gpus=space.max_gpus,
    )
    if floor > traffic.rate_per_s:
        ctx.warnings.append(
            f"sized for min_throughput_requests_per_s = {floor:g}/s, above the forecast rate"
        )
    targets = target_curves(objective, ctx.output_tokens)
    plans: list[Plan] = []
    rejected: list[Rejection] = []
    evaluated = 0
    passed_zero_load = 0
    is_moe = summarize(arch).num_experts > 0
    for c in enumerate_candidates(space):
        evaluated += 1
        pools = 2 if c.kind == "disaggregated" else 1
        if space.max_gpus is not None and c.gpus_per_replica * pools > space.max_gpus:
            rejected.append(
                Rejection(
                    candidate=c,
                    reason="over-gpu-limit",
                    detail=(
                        f"at least {pools * c.gpus_per_replica} GPUs > max_gpus {space.max_gpus}"
                    ),
                )
            )
            continue
        if c.enable_expert_parallel and not is_moe:
            rejected.append(
                Rejection(
                    candidate=c,
                    reason="invalid-deployment",
                    detail="expert parallelism needs an MoE model",
                )
            )
            continue
        try:
            memory = plan_memory(arch, ctx.hardware[c.hardware_id], _deployment(c))
        except InvalidDeploymentError as exc:
            detail = "; ".join(f"{i.field}: {i.problem}" for i in exc.issues) or str(exc)
            rejected.append(Rejection(candidate=c, reason="invalid-deployment", detail=detail))
            continue
        longest = traffic.longest_tokens
        context = memory.deployment.max_model_len
        if longest is not None and context < longest:
            rejected.append(
                Rejection(
                    candidate=c,
                    reason="context-too-short",
                    detail=(
                        f"max_model_len {context} < the longest request, {longest} tokens of "
                        "prompt + output: the engine would refuse it; raise max_model_len or "
                        "bound the lengths"
                    ),
                )
            )
            continue
        if not memory.fits:
            rejected.append(
                Rejection(
                    candidate=c,
                    reason="does-not-fit",
                    detail="; ".join(memory.reasons) or "the deployment does not fit",
                )
            )
            continue
        try:
            model = _build(ctx, c, memory)
        except (ValueError, KeyError) as exc:
            rejected.append(Rejection(candidate=c, reason="unsupported", detail=str(exc)))
            continue
        built = _Built(memory=memory, model=model)
        outcome: Plan | Rejection
        if c.kind == "disaggregated":
            outcome = _disaggregated(ctx, c, built)
        else:
            curve = open_loop_curve(
                model,
                input_tokens=ctx.input_tokens,
                output_tokens=ctx.output_tokens,
                kv_capacity_tokens=memory.kv_capacity_tokens,
            )
            ctx.curves[c.label] = curve
            outcome = _plan_or_reject(ctx, c, built, screen_curve(curve, targets), curve=curve)
        if isinstance(outcome, Plan):
            plans.append(outcome)
        else:
            rejected.append(outcome)
        if isinstance(outcome, Plan) or outcome.reason in ("over-gpu-limit", "slo-missed"):
            passed_zero_load += 1
    plans, runs = (
        _verify(ctx, plans, verify_top, rejected)
        if verify_top
        else (sorted(plans, key=_rank_key), 0)
    )
    if any(p.price_per_gpu_hour is None for p in plans):
        unpriced = sorted({p.candidate.hardware_id for p in plans if p.price_per_gpu_hour is None})
        ctx.warnings.append(
            f"no price for {', '.join(unpriced)}: those plans are ranked after the priced ones "
            "(give prices per GPU-hour)"
        )
    return SizingResult(
        plans=tuple(_with_tier_a(ctx, p) for p in plans[:max_plans]),
        plans_found=len(plans),
        rejected=tuple(rejected),
        candidates_evaluated=evaluated,
        target_rate_per_s=ctx.target_rate_per_s,
        headroom=headroom,
        simulations=runs,
        elapsed_s=time.perf_counter() - started,
        warnings=tuple(ctx.warnings),
        passed_zero_load=passed_zero_load,
        simulated_requests=ctx.simulated_requests,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeroLoadBest:
    """The best value of one target at zero load over every candidate screened."""

    name: str
    limit: float
    direction: str
    best: float
    """Lowest (``max`` targets) or highest (``min``) zero-load value of any candidate."""
    candidate: Candidate
    """The candidate that achieves :attr:`best`."""
    alone: bool
    """True when even :attr:`best` misses the limit; False when some candidate meets this
    target but none meets every target at once."""


def zero_load_infeasibility(result: SizingResult) -> tuple[ZeroLoadBest, ...]:
    """Why no plan exists when no candidate that could run meets the SLO even idle: for each
    target, its best zero-load value and who achieves it — the targets no candidate meets, or,
    when each is met by some candidate but none meets all, every target some candidate misses.
    Empty when a plan exists, when some candidate met every target at zero load, or when none
    was screened (nothing fits, the GPU limit, ...)."""
    screened = [r for r in result.rejected if r.reason == "infeasible-at-zero-load"]
    if result.plans or result.plans_found or result.passed_zero_load or not screened:
        return ()
    best: dict[str, tuple[Miss, Candidate]] = {}
    missed: set[str] = set()
    for r in screened:
        for m in r.zero_load:
            if m.relative_miss > 0:
                missed.add(m.name)
            held = best.get(m.name)
            if held is None or m.relative_miss < held[0].relative_miss:
                best[m.name] = (m, r.candidate)
    out = [
        ZeroLoadBest(
            name=name,
            limit=m.limit,
            direction=m.direction,
            best=m.predicted,
            candidate=c,
            alone=m.relative_miss > 0,
        )
        for name, (m, c) in best.items()
        if name in missed
    ]
    alone = [b for b in out if b.alone]
    return tuple(alone or out)
