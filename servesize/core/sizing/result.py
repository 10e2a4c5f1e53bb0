"""What a sizing returns: costed plans, rejected candidates with their reasons, and the SLO
targets no candidate meets even idle.

=========================  ======================================================================
``Plan``                   a deployment, its replica count and cost, Tier A and simulated metrics
``Rejection``              a candidate that did not become a plan, and why (:data:`RejectReason`)
``Predicted``              the metrics of a whole plan at the target load, from one tier
``SizingResult``           the ranked plans, the rejections and what the search spent
``zero_load_infeasibility``  per target, its best zero-load value when no candidate meets all
=========================  ======================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from servesize.core.energy import EnergyEstimate
from servesize.core.memory import MemoryPlan
from servesize.core.sizing.launch import LaunchPlan
from servesize.core.sizing.screen import Miss
from servesize.core.sizing.space import Candidate

__all__ = [
    "Plan",
    "Predicted",
    "RejectReason",
    "Rejection",
    "SizingResult",
    "VerificationMode",
    "ZeroLoadBest",
    "zero_load_infeasibility",
]

RankBy = Literal["cost", "energy"]
"""What plans are ranked by: ``cost`` per hour, or ``energy`` per million output tokens."""

RejectReason = Literal[
    "over-gpu-limit",
    "invalid-deployment",
    "does-not-fit",
    "context-too-short",
    "unsupported",
    "engine-unsupported",
    "infeasible-at-zero-load",
    "verification-failed",
]
VerificationMode = Literal["fleet", "one-replica-thinned", "sub-fleet-thinned"]


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
    launch: LaunchPlan | None = None
    """The engine's launch commands (filled in for the returned plans)."""
    energy: EnergyEstimate | None = None
    """Fleet power and energy at the target load (None without a TDP or measured power)."""
    rank_by: RankBy = "cost"

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
