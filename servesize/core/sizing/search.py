"""Auto-sizing (docs/modeling.md §3.11): the cheapest deployment that meets an SLO at a target rate.

1. **Enumerate** hardware × engine × parallelism × knobs (:mod:`.space`).
2. **Prune** with a reason (:mod:`.build`): over the GPU limit (before any work), invalid for
   the engine, does not fit by the memory ledger (its reason), a context shorter than the
   longest request, a KV format or layout the engine release cannot launch
   (``engine-unsupported``), or a layout the step-time model cannot run (``unsupported``).
3. **Screen** every survivor with Tier A (:mod:`.tier_a`, :mod:`.screen`; one vectorised
   :func:`open_loop_curve` pass): the per-replica maximum rate ``λ*`` under the SLO, then
   ``replicas = ceil(target / (λ* × headroom))``; the headroom absorbs model and forecast error
   and is reported, never hidden. SLO missed even at zero load (which target, by how much) or
   too many replicas for the GPU limit reject. Disaggregated candidates size a prefill and a
   decode pool, rate-matched from the same step-time model.
4. **Rank** by cost per hour (:mod:`.rank`), unpriced plans last, ties to fewer GPUs, then to
   more spare capacity.
5. **Verify** the best plans by simulation at the target load (:mod:`.verify`): the whole fleet
   when small, one thinned replica or a thinned sub-fleet when large; misses add replicas, and
   verification walks the ranking until ``verify_top`` plans pass.

Every step reads the sizing's fixed inputs (:class:`~.inputs.SizingInputs`) and returns its
result; :func:`size` threads them through and assembles the :class:`~.result.SizingResult`.

Compared with AIConfigurator (``replicas = ceil(rate / seq_per_s)`` at zero queueing) and the
llm-d planner (``ceil(1.2 × qps / qps_per_replica)`` from benchmarks), the per-replica rate here
already includes queueing delay at that load, and the fleet is checked by simulation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from servesize.core.architecture import Architecture, summarize
from servesize.core.energy import PowerProfile
from servesize.core.errors import UnsupportedDeploymentError
from servesize.core.replica import StepModelCache
from servesize.core.sizing.build import compile_candidate, plan_candidate
from servesize.core.sizing.energy import with_energy
from servesize.core.sizing.inputs import DEFAULT_HEADROOM, SizingInputs, SizingTraffic
from servesize.core.sizing.launch import launch_plan
from servesize.core.sizing.rank import ranked, unpriced_warning
from servesize.core.sizing.result import Plan, RankBy, Rejection, SizingResult
from servesize.core.sizing.screen import TargetCurve, target_curves
from servesize.core.sizing.space import Candidate, SearchSpace, enumerate_candidates
from servesize.core.sizing.tasks import TaskMap, serial_map
from servesize.core.sizing.tier_a import (
    Screened,
    screen_aggregated,
    screen_disaggregated,
    with_tier_a,
)
from servesize.core.sizing.verify import SimulationSpent, Verified, VerifyInputs, verify_ranked
from servesize.core.slo.spec import ServiceLevelObjective
from servesize.core.steptime import MeasuredProfile

__all__ = [
    "MAX_CANDIDATES",
    "MAX_PLANS",
    "SCREEN_PIECE",
    "SizingTooLargeError",
    "screen_piece",
    "size",
]

MAX_CANDIDATES = 512
"""Candidate configurations one sizing may enumerate (Tier A screens one in about 10 ms)."""
MAX_PLANS = 10
"""Plans returned (the best by rank); every other survivor is counted, not listed."""
SCREEN_PIECE = 4
"""Candidates one screening task takes when the map runs tasks in parallel (a few hundred ms of
work each: enough to outweigh sending the sizing's inputs, small enough to balance workers)."""


class SizingTooLargeError(ValueError):
    """The search space enumerates more than :data:`MAX_CANDIDATES` candidates."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Screening:
    """The screen of a whole search space: the plans in enumeration order, what each was
    screened on (by label), the rejections, the candidates seen and how many of them met every
    target at the lowest load."""

    plans: tuple[Plan, ...]
    screened: Mapping[str, Screened]
    rejected: tuple[Rejection, ...]
    evaluated: int
    passed_zero_load: int


def _screen_space(
    inputs: SizingInputs,
    space: SearchSpace,
    targets: list[TargetCurve],
    progress: Callable[[int, int], None] | None = None,
    map_tasks: TaskMap = serial_map,
) -> _Screening:
    """Prune, build and screen every candidate of ``space`` (steps 1 to 3); ``progress`` is
    called with (candidates done, candidates in all) after each one (after each piece of
    :data:`SCREEN_PIECE` when ``map_tasks`` runs them in parallel: :func:`screen_piece`)."""
    plans: list[Plan] = []
    screened: dict[str, Screened] = {}
    rejected: list[Rejection] = []
    evaluated = 0
    passed_zero_load = 0
    total = space.candidate_count
    candidates = list(enumerate_candidates(space))
    if map_tasks.parallel:
        pieces = [
            (inputs, tuple(candidates[i : i + SCREEN_PIECE]))
            for i in range(0, len(candidates), SCREEN_PIECE)
        ]

        def done(k: int) -> None:
            if progress is not None:
                progress(min(k * SCREEN_PIECE, total), total)

        outcomes = [o for piece in map_tasks(screen_piece, pieces, done) for o in piece]
    else:
        step_models = StepModelCache()
        is_moe = summarize(inputs.arch).num_experts > 0
        outcomes = []
        for c in candidates:
            outcomes.append(_screen_one(inputs, c, targets, step_models, is_moe=is_moe))
            if progress is not None:
                progress(len(outcomes), total)
    for c, outcome in zip(candidates, outcomes, strict=True):
        evaluated += 1
        if isinstance(outcome, Rejection):
            rejected.append(outcome)
            passed_zero_load += outcome.reason == "over-gpu-limit"
        else:
            plan, basis = outcome
            plans.append(plan)
            screened[c.label] = basis
            passed_zero_load += 1
    return _Screening(
        plans=tuple(plans),
        screened=screened,
        rejected=tuple(rejected),
        evaluated=evaluated,
        passed_zero_load=passed_zero_load,
    )


def screen_piece(
    piece: tuple[SizingInputs, tuple[Candidate, ...]],
) -> list[Rejection | tuple[Plan, Screened]]:
    """One screening task: ``(inputs, candidates)`` → each candidate's outcome, in order
    (:func:`_screen_one`; a pure function of the piece). The target curves hold closures, so
    the piece rebuilds them from the inputs (as :func:`size` does)."""
    inputs, candidates = piece
    targets = target_curves(inputs.objective, inputs.output_tokens)
    step_models = StepModelCache()
    is_moe = summarize(inputs.arch).num_experts > 0
    return [_screen_one(inputs, c, targets, step_models, is_moe=is_moe) for c in candidates]


def _screen_one(
    inputs: SizingInputs,
    c: Candidate,
    targets: list[TargetCurve],
    step_models: StepModelCache,
    *,
    is_moe: bool,
) -> Rejection | tuple[Plan, Screened]:
    """One candidate pruned, built and screened: its plan and what it was screened on, or
    why it was rejected."""
    memory = plan_candidate(inputs, c, is_moe=is_moe)
    if isinstance(memory, Rejection):
        return memory
    try:
        replica = compile_candidate(inputs, c, memory, step_models)
    except UnsupportedDeploymentError as exc:
        return Rejection(candidate=c, reason="unsupported", detail=str(exc))
    if c.kind == "disaggregated":
        return screen_disaggregated(inputs, c, replica)
    return screen_aggregated(inputs, c, replica, targets)


def _with_launch(inputs: SizingInputs, model_name: str, plan: Plan, *, is_moe: bool) -> Plan:
    """The plan with its engine's launch commands (:func:`launch_plan`)."""
    link = inputs.hardware[plan.candidate.hardware_id].interconnect
    launch = launch_plan(
        model_name,
        plan.memory,
        is_moe=is_moe,
        gpus_per_node=link.gpus_per_node if link is not None else None,
        disaggregated=plan.candidate.kind == "disaggregated",
        speculative=plan.candidate.speculative,
        credits_prefix=inputs.traffic.prefix is not None
        and plan.memory.deployment.enable_prefix_caching,
    )
    return replace(plan, launch=launch)


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
    progress: Callable[[int, int], None] | None = None,
    power: Mapping[str, PowerProfile] | None = None,
    rank_by: RankBy = "cost",
    verify_progress: Callable[[int, int], None] | None = None,
    map_tasks: TaskMap = serial_map,
) -> SizingResult:
    """Rank the deployments of ``space`` that serve ``traffic`` within ``objective`` (see the
    module docstring). ``prices`` are per GPU-hour by hardware id; ``measured`` kernel tables by
    hardware id. ``progress``, when given, is called with (candidates screened, candidates in
    all) after each candidate's screen. ``power`` (board power by hardware id) gives every plan
    its energy at the target load; ``rank_by="energy"`` ranks by energy per million output
    tokens instead of cost (:mod:`~servesize.core.sizing.energy`). ``verify_progress``, when
    given, is called with (plans verified so far, ``verify_top``) after each verification.
    ``map_tasks`` runs the screening pieces and the verification simulations
    (:mod:`~servesize.core.sizing.tasks`); the answer does not depend on it."""
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
    inputs = SizingInputs(
        arch=arch,
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
        power=power or {},
    )
    warnings: list[str] = []
    if floor > traffic.rate_per_s:
        warnings.append(
            f"sized for min_throughput_requests_per_s = {floor:g}/s, above the forecast rate"
        )
    curves = target_curves(objective, inputs.output_tokens)
    screening = _screen_space(inputs, space, curves, progress, map_tasks)
    if rank_by == "energy" and not inputs.power:
        warnings.append("no power figure for any candidate GPU: plans are ranked by cost")
    screened_plans = tuple(
        with_energy(inputs, screening.screened, replace(p, rank_by=rank_by))
        for p in screening.plans
    )
    if verify_top:
        on_verified = (
            None if verify_progress is None else lambda passed: verify_progress(passed, verify_top)
        )
        verified = verify_ranked(
            VerifyInputs(sizing=inputs, screened=screening.screened),
            screened_plans,
            verify_top,
            on_verified,
            map_tasks,
        )
    else:
        verified = Verified(plans=ranked(screened_plans), rejected=(), spent=SimulationSpent())
    plans, spent = verified.plans, verified.spent
    unpriced = unpriced_warning(plans)
    if unpriced is not None:
        warnings.append(unpriced)
    is_moe = summarize(arch).num_experts > 0
    returned = [
        with_energy(
            inputs,
            screening.screened,
            with_tier_a(inputs, screening.screened[p.candidate.label], p),
        )
        for p in plans[:max_plans]
    ]
    return SizingResult(
        plans=tuple(_with_launch(inputs, model_name, p, is_moe=is_moe) for p in returned),
        plans_found=len(plans),
        rejected=(*screening.rejected, *verified.rejected),
        candidates_evaluated=screening.evaluated,
        target_rate_per_s=inputs.target_rate_per_s,
        headroom=headroom,
        simulations=spent.runs,
        elapsed_s=time.perf_counter() - started,
        warnings=tuple(warnings),
        passed_zero_load=screening.passed_zero_load,
        simulated_requests=spent.requests,
    )
