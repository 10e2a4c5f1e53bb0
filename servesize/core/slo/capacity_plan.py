"""The capacity planner: the largest load one replica sustains within an SLO, from Tier A's
bracket, the simulator's bisection and a multi-seed confirmation (docs/modeling.md §3.11).

Tier A is the mean-field open-loop estimate (:func:`servesize.core.steptime.open_loop`); the
simulator decides. :func:`plan_capacity` runs, in order:

1. **Objective.** A minimum throughput holds only *above* a load, every other target only below
   one, so the search looks for the highest load meeting the others (the floor is taken out of
   the objective the probe judges) and checks the floor against that answer at the end. A floor
   alone has no largest load (:class:`ThroughputOnlyObjectiveError`); a floor at or above Tier
   A's saturation rate no load delivers (:class:`ThroughputFloorUnreachableError`).
2. **Bracket.** Open loop: Tier A's saturation rate ``λ_sat`` (its estimate at a vanishing rate)
   times ``SATURATION_BRACKET``, with Tier A's own largest rate meeting the SLO (bisection on
   ``[0, λ_sat]`` to ``TIER_A_RATE_TOLERANCE``) as the first guess. Closed loop: the resident
   capacity (at least one sequence), searched in whole concurrencies.
3. **Bisection** with common random numbers: :func:`~servesize.core.slo.capacity.search_capacity`.
4. **Confirmation.** Runs with ``CONFIRMATION_SEEDS`` other seeds at the answer show how much
   of it is one sample path's luck; while some miss, the answer steps down by ``2 × tolerance``
   (one concurrency in a closed loop), at most ``CONFIRMATION_STEPS − 1`` times, the search's
   own seed checked again at each step (:func:`confirm`).
5. **Binding constraint.** The search's (the target that breaks first past the answer);
   ``stability`` when the first miss above the answer was an unstable run; the floor when the
   answer lies below it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from servesize.core.errors import PlanningError, UnstableQueueError
from servesize.core.slo.capacity import CapacityResult, CurvePoint, search_capacity
from servesize.core.slo.evaluate import SloEvaluation, evaluate_analytic, evaluate_overload
from servesize.core.slo.spec import ServiceLevelObjective
from servesize.core.steptime import OpenLoopEstimate

__all__ = [
    "CLOSED_LOOP_WARNING",
    "CONFIRMATION_RUNS",
    "CONFIRMATION_SEEDS",
    "CONFIRMATION_STEPS",
    "MAX_CONCURRENCY",
    "MAX_RATE_PER_S",
    "SATURATION_BRACKET",
    "CapacityPlan",
    "SeededProbe",
    "ThroughputFloorUnreachableError",
    "ThroughputOnlyObjectiveError",
    "TierAEstimate",
    "confirm",
    "curve_fractions",
    "max_search_runs",
    "plan_capacity",
    "search_objective",
    "tier_a_max_rate",
    "tier_a_verdict",
]

SATURATION_BRACKET = 1.05
"""The open-loop search starts just above Tier A's saturation rate."""
SATURATION_PROBE_RATE_PER_S = 1e-6
"""The rate Tier A is evaluated at to read its saturation rate (a vanishing load)."""
TIER_A_BISECTIONS = 40
TIER_A_RATE_TOLERANCE = 1e-3
"""Tier A's own largest rate is bisected until ``high − low <= 1e-3 · high``."""
CONFIRMATION_SEEDS = 2
"""Extra runs at the answer with other seeds (docs/modeling.md §3.11)."""
CONFIRMATION_STEPS = 3
"""Times the answer may be lowered (by twice the tolerance) until every seed meets the SLO."""
CONFIRMATION_RUNS = CONFIRMATION_SEEDS + (CONFIRMATION_STEPS - 1) * (CONFIRMATION_SEEDS + 1)
"""Most runs the confirmation makes: the seeds at the answer, then at each lowered answer the
search's own seed and the others again."""
MAX_RATE_PER_S = 1_000_000.0
MAX_CONCURRENCY = 100_000
CLOSED_LOOP_WARNING = (
    "closed loop: the offered load falls as the service slows, which can hide overload; "
    "the open-loop capacity is the safer figure for user-facing traffic"
)

SeededProbe = Callable[[float, bool, int, ServiceLevelObjective], CurvePoint]
"""``probe(load, short, seed_offset, objective)``: simulate one replica at ``load`` (arrival
rate per second, or concurrency) and judge the run against ``objective``. ``short`` asks for the
screening run; ``seed_offset`` 0 is the search's own seed (common random numbers across loads),
``k > 0`` the ``k``-th other seed."""
TierAEstimate = Callable[[float], OpenLoopEstimate]
"""Tier A's steady state of one replica at an arrival rate (raises ``UnstableQueueError`` at or
past saturation)."""


class ThroughputOnlyObjectiveError(PlanningError, ValueError):
    """A capacity search for an objective whose only target is a minimum throughput."""

    def __init__(self) -> None:
        super().__init__(
            "a capacity search needs a latency or attainment target: a minimum throughput "
            "alone holds for every load from it up to saturation"
        )


class ThroughputFloorUnreachableError(PlanningError):
    """A minimum throughput at or above one replica's saturation rate (Tier A)."""

    def __init__(self, min_throughput_requests_per_s: float, saturation_rate_per_s: float) -> None:
        super().__init__(
            f"min_throughput_requests_per_s {min_throughput_requests_per_s:g} is at or above "
            f"the replica's saturation rate {saturation_rate_per_s:.4g}/s (Tier A): no load can "
            "deliver it"
        )
        self.min_throughput_requests_per_s = min_throughput_requests_per_s
        self.saturation_rate_per_s = saturation_rate_per_s


def search_objective(objective: ServiceLevelObjective) -> ServiceLevelObjective:
    """The objective the probes judge: ``objective`` without its minimum throughput (module
    docstring, step 1)."""
    if objective.min_throughput_requests_per_s is None:
        return objective
    if not objective.targets and objective.attainment is None:
        raise ThroughputOnlyObjectiveError()
    return dataclasses.replace(objective, min_throughput_requests_per_s=None)


def tier_a_verdict(
    estimate: TierAEstimate,
    objective: ServiceLevelObjective,
    *,
    rate_per_s: float,
    replicas: int = 1,
) -> tuple[SloEvaluation, float]:
    """Tier A at ``rate_per_s / replicas`` per replica: the verdict and one replica's
    saturation rate (``per_replica / utilization`` when the estimate is unstable)."""
    per_replica = rate_per_s / replicas
    try:
        state = estimate(per_replica)
    except UnstableQueueError as exc:
        saturation = per_replica / exc.utilization
        return (
            evaluate_overload(
                objective, rate_per_s=rate_per_s, saturation_rate_per_s=saturation * replicas
            ),
            saturation,
        )
    return evaluate_analytic(state, objective, replicas=replicas), state.saturation_rate_per_s


def tier_a_max_rate(
    estimate: TierAEstimate, objective: ServiceLevelObjective, saturation_rate_per_s: float
) -> float | None:
    """Tier A's largest rate meeting its screened targets: bisection on ``[0, λ_sat]`` until
    ``high − low <= TIER_A_RATE_TOLERANCE · high`` or ``TIER_A_BISECTIONS`` steps (``None`` when
    even a light load misses)."""
    low, high = 0.0, saturation_rate_per_s
    for _ in range(TIER_A_BISECTIONS):
        mid = 0.5 * (low + high)
        verdict, _ = tier_a_verdict(estimate, objective, rate_per_s=mid)
        low, high = (mid, high) if verdict.feasible else (low, mid)
        if high - low <= TIER_A_RATE_TOLERANCE * high:
            break
    return low if low > 0 else None


def max_search_runs(max_probes: int, curve_points: int) -> int:
    """Most full-length runs of one :func:`plan_capacity`: the bracket and bisection, the curve
    and the confirmation (each may add one screening run)."""
    return max_probes + curve_points + CONFIRMATION_RUNS


def curve_fractions(points: int) -> tuple[float, ...]:
    """Where the curve's extra points lie, as fractions of the answer: evenly from light load
    (p95 TTFT near its zero-load value) to 80 % of it, ``0.1 + 0.7 k / (m − 1)``."""
    if points > 1:
        return tuple(0.1 + 0.7 * k / (points - 1) for k in range(points))
    return (0.5,) * points


def confirm(
    probe: Callable[[float, int], bool], load: float, *, integer: bool, tolerance: float
) -> tuple[float, int, bool]:
    """``(answer, other seeds meeting the SLO there, lowered?)`` (module docstring, step 4).

    ``probe(load, seed_offset)`` says whether a full run with that seed meets the SLO.
    """
    answer, lowered = load, False
    confirmed = 0
    for step in range(CONFIRMATION_STEPS):
        if step:
            lower = answer - 1 if integer else answer * (1 - 2 * tolerance)
            if lower < (1 if integer else 0) or not probe(lower, 0):
                break
            answer, lowered = lower, True
        confirmed = sum(probe(answer, k) for k in range(1, CONFIRMATION_SEEDS + 1))
        if confirmed == CONFIRMATION_SEEDS:
            break
    return answer, confirmed, lowered


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityPlan:
    """The answer of :func:`plan_capacity`."""

    closed_loop: bool
    found: bool
    """Some load meets the whole SLO (the minimum throughput included)."""
    max_load: float
    """The confirmed answer (rate per second or concurrency); meaningful when ``found``."""
    binding: str | None
    search: CapacityResult
    """The bisection: bracket, curve, knee and probe counts."""
    tier_a_saturation_rate_per_s: float | None
    tier_a_max_rate_per_s: float | None
    confirmation_seeds: int
    """Other seeds run at the answer (0 when nothing was found)."""
    confirmed_by_seeds: int
    warnings: tuple[str, ...]


def _stopped_unstable(search: CapacityResult) -> CurvePoint | None:
    """The first full run above the answer that missed, when it was judged unstable."""
    misses = [pt for pt in search.curve if not pt.feasible and pt.load > search.max_load]
    return misses[0] if misses and not misses[0].stable else None


def plan_capacity(
    probe: SeededProbe,
    objective: ServiceLevelObjective,
    *,
    tier_a: TierAEstimate | None = None,
    resident_sequences: float | None = None,
    tolerance: float = 0.02,
    max_probes: int = 16,
    screen: bool = True,
    curve_points: int = 3,
    zero_load_ttft_p95_s: float | None = None,
) -> CapacityPlan:
    """The largest load one replica sustains within ``objective`` (module docstring).

    Open loop with ``tier_a`` (arrival rates); closed loop with ``resident_sequences``, Tier A's
    resident capacity (whole concurrencies). Raises :class:`ThroughputOnlyObjectiveError` and
    :class:`ThroughputFloorUnreachableError` before any simulation.
    """
    if (tier_a is None) == (resident_sequences is None):
        raise ValueError("give tier_a (open loop) or resident_sequences (closed loop), not both")
    judged = search_objective(objective)
    floor = objective.min_throughput_requests_per_s
    closed = resident_sequences is not None
    warnings: list[str] = []
    saturation: float | None = None
    tier_a_max: float | None = None
    if resident_sequences is not None:
        initial_high = max(1.0, resident_sequences)
        warnings.append(CLOSED_LOOP_WARNING)
    else:
        assert tier_a is not None
        saturation = tier_a(SATURATION_PROBE_RATE_PER_S).saturation_rate_per_s
        if floor is not None and floor >= saturation:
            raise ThroughputFloorUnreachableError(floor, saturation)
        initial_high = SATURATION_BRACKET * saturation
        tier_a_max = tier_a_max_rate(tier_a, judged, saturation)

    search = search_capacity(
        lambda load, short: probe(load, short, 0, judged),
        initial_high=initial_high,
        tolerance=tolerance,
        max_probes=max_probes,
        integer=closed,
        first_guess=tier_a_max,
        max_load=float(MAX_CONCURRENCY) if closed else MAX_RATE_PER_S,
        screen=screen,
        curve_fractions=curve_fractions(curve_points),
        zero_load_ttft_p95_s=zero_load_ttft_p95_s,
    )
    warnings.extend(search.warnings)
    binding = search.binding
    unstable = _stopped_unstable(search)
    if unstable is not None:
        warnings.append(
            f"the search stopped at a run judged unstable ({unstable.evaluation.reason}); "
            "with few requests a steady queue can look unstable, so more requests per probe "
            "may raise the answer"
        )
        binding = "stability"
    found = search.max_load > 0
    answer, confirmed = search.max_load, 0
    if found:
        answer, confirmed, lowered = confirm(
            lambda load, seed: probe(load, False, seed, judged).feasible,
            search.max_load,
            integer=closed,
            tolerance=tolerance,
        )
        warnings.extend(_confirmation_warnings(search.max_load, answer, confirmed, lowered))
    if floor is not None and not closed and found and answer < floor:
        warnings.append(
            f"the other targets hold only up to {answer:.4g} requests/s, below the minimum "
            f"throughput {floor:g}/s: no single-replica load meets the whole SLO"
        )
        found, binding = False, "min_throughput_requests_per_s"
    return CapacityPlan(
        closed_loop=closed,
        found=found,
        max_load=answer,
        binding=binding,
        search=search,
        tier_a_saturation_rate_per_s=saturation,
        tier_a_max_rate_per_s=tier_a_max,
        confirmation_seeds=CONFIRMATION_SEEDS if found else 0,
        confirmed_by_seeds=confirmed,
        warnings=tuple(warnings),
    )


def _confirmation_warnings(
    searched: float, answer: float, confirmed: int, lowered: bool
) -> Sequence[str]:
    out: list[str] = []
    if lowered:
        out.append(
            f"the bisection's answer {searched:.4g} was lowered to {answer:.4g} so that runs "
            f"with {CONFIRMATION_SEEDS} other seeds meet the SLO too"
        )
    if confirmed < CONFIRMATION_SEEDS:
        out.append(
            f"at the answer, {CONFIRMATION_SEEDS - confirmed} of {CONFIRMATION_SEEDS} runs "
            "with other seeds miss the SLO: the figure carries sampling noise beyond the "
            "search tolerance; simulate more requests per probe for a firmer answer"
        )
    return out
