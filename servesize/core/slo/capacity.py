"""The largest load that meets an SLO: open-loop arrival rate or closed-loop concurrency.

docs/modeling.md §3.11. The search is a pure function of a *probe*, ``(load, short) -> CurvePoint``,
which the caller implements by simulating with one seed at every load (common random numbers:
the arrival process scales the same standard draws by ``1/rate``, and the lengths are the same,
so neighbouring loads differ only by the load and feasibility is near-monotone in it).

1. **Bracket.** The first probe is at ``initial_high`` (Tier A's saturation rate × 1.05, or the
   resident capacity for a closed loop). While it meets the SLO the bracket doubles (Tier A was
   pessimistic), at most ``max_expansions`` times.
2. **First guess.** When given (Tier A's own maximum rate under the SLO) and inside the bracket,
   it is probed next: a good guess halves the bracket at once.
3. **Bisection** until ``high − low <= tolerance·high`` (integer loads: ``high − low <= 1``) or the
   probe budget runs out. ``low`` is always a load that met the SLO (0 before one has).
4. **Early abort.** With ``screen`` on, each load is first run short (the caller decides how
   short); a short run that misses a target by more than half its limit (relative margin below
   ``-SCREEN_MARGIN``; any failure when no failure is allowed) or, unstable, serves less than
   half its offered rate is *certainly missed* and counts as a miss without the full run.
   Overload only worsens with run length, so the screen rarely errs, and near the answer (small
   misses) the full run decides.
5. **Curve.** Loads at ``curve_fractions`` of the answer are added for plotting; the curve holds
   every full-length point, sorted by load.

The **knee** is the lowest load at which p95 TTFT reaches ``KNEE_FACTOR`` (2) times its zero-load
value, interpolated linearly between the two curve points around the crossing (the first point
at or past it when the one before is the only finite neighbour); ``None`` if the curve never
gets there. The **binding constraint** is the binding check of the lowest probed load that
missed (the target that breaks first as load grows past the answer), or, when no load missed,
of the answer itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from servesize.core.simulation import SimulationSummary
from servesize.core.slo.evaluate import SloEvaluation

KNEE_FACTOR = 2.0
SCREEN_MARGIN = 0.5
"""A short run missing a target by more than this relative margin is a certain miss."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CurvePoint:
    """One probed load (arrival rate per second, or concurrency) and what it gave."""

    load: float
    ttft_p50_s: float
    ttft_p95_s: float
    tpot_p50_s: float
    tpot_p95_s: float
    goodput_requests_per_s: float
    throughput_requests_per_s: float
    feasible: bool
    stable: bool
    stability_conclusive: bool = True
    """False when the run was too short to judge its stability."""
    evaluation: SloEvaluation
    short: bool = False
    """From a short screening run."""
    ttft_p99_s: float = math.nan
    tpot_p99_s: float = math.nan


def curve_point(
    load: float, summary: SimulationSummary, evaluation: SloEvaluation, *, short: bool = False
) -> CurvePoint:
    """The curve entry of one simulated load."""
    return CurvePoint(
        load=load,
        ttft_p50_s=summary.ttft_s.p50,
        ttft_p95_s=summary.ttft_s.p95,
        tpot_p50_s=summary.tpot_s.p50,
        tpot_p95_s=summary.tpot_s.p95,
        goodput_requests_per_s=evaluation.goodput_requests_per_s,
        throughput_requests_per_s=evaluation.throughput_requests_per_s,
        feasible=evaluation.feasible,
        stable=evaluation.stable,
        stability_conclusive=summary.stability_conclusive,
        evaluation=evaluation,
        short=short,
        ttft_p99_s=summary.ttft_s.p99,
        tpot_p99_s=summary.tpot_s.p99,
    )


Probe = Callable[[float, bool], CurvePoint]
"""``probe(load, short)``: simulate at ``load``; ``short`` asks for the screening run."""


def certainly_missed(point: CurvePoint, *, integer: bool = False) -> bool:
    """Some target missed by more than ``SCREEN_MARGIN`` of its limit, or (open loop) an
    unstable run serving less than ``1 − SCREEN_MARGIN`` of its offered rate (a short window
    alone can make a steady run look unstable, so a mild shortfall, or a window too short to
    judge, is left to the full run)."""
    ev = point.evaluation
    if any(c.relative_margin < -SCREEN_MARGIN for c in ev.checks):
        return True
    overloaded = ev.throughput_requests_per_s < (1 - SCREEN_MARGIN) * point.load
    return not ev.stable and point.stability_conclusive and not integer and overloaded


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityResult:
    """The answer of :func:`search_capacity`."""

    max_load: float
    """Largest probed load meeting the SLO (0 when none did)."""
    binding: str | None
    curve: tuple[CurvePoint, ...]
    knee_load: float | None
    probes: int
    """Runs made, short screening runs included."""
    short_probes: int
    low: float
    high: float
    """The final bracket: ``low`` met the SLO, ``high`` missed it (``inf`` if none missed)."""
    converged: bool
    warnings: tuple[str, ...]


def knee_load(
    curve: Sequence[CurvePoint], zero_load_ttft_p95_s: float, factor: float = KNEE_FACTOR
) -> float | None:
    """Lowest load where p95 TTFT reaches ``factor ×`` its zero-load value (module docstring).

    >>> from servesize.core.slo.evaluate import SloEvaluation
    >>> e = SloEvaluation(feasible=True, checks=(), binding="", goodput_requests_per_s=0.0,
    ...                   throughput_requests_per_s=0.0, failure_rate=0.0, attainment=None)
    >>> pts = [CurvePoint(load=x, ttft_p50_s=0.0, ttft_p95_s=y, tpot_p50_s=0.0, tpot_p95_s=0.0,
    ...        goodput_requests_per_s=0.0, throughput_requests_per_s=0.0, feasible=True,
    ...        stable=True, evaluation=e) for x, y in [(1.0, 1.0), (3.0, 3.0)]]
    >>> knee_load(pts, 1.0)  # 2 s is reached halfway between loads 1 and 3
    2.0
    """
    threshold = factor * zero_load_ttft_p95_s
    previous: CurvePoint | None = None
    for point in sorted(curve, key=lambda p: p.load):
        y = point.ttft_p95_s if point.stable else math.inf
        if not math.isnan(y) and y >= threshold:
            if previous is None or not math.isfinite(y):
                return point.load
            y0 = previous.ttft_p95_s
            if y == y0:
                return point.load
            return previous.load + (threshold - y0) * (point.load - previous.load) / (y - y0)
        if point.stable and math.isfinite(point.ttft_p95_s):
            previous = point
    return None


def search_capacity(
    probe: Probe,
    *,
    initial_high: float,
    tolerance: float = 0.02,
    max_probes: int = 16,
    integer: bool = False,
    first_guess: float | None = None,
    max_expansions: int = 6,
    max_load: float = math.inf,
    screen: bool = True,
    curve_fractions: Sequence[float] = (0.1, 0.4, 0.7),
    zero_load_ttft_p95_s: float | None = None,
) -> CapacityResult:
    """Find the largest load meeting the SLO (module docstring). ``max_probes`` bounds the
    full-length runs of the bracket and bisection; the curve adds ``len(curve_fractions)`` more
    at most, and screening adds one short run before each full one."""
    if not (math.isfinite(initial_high) and initial_high > 0):
        raise ValueError(f"initial_high must be finite and > 0, got {initial_high}")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tolerance}")
    if max_probes < 1:
        raise ValueError(f"max_probes must be >= 1, got {max_probes}")
    full: list[CurvePoint] = []
    missed: list[CurvePoint] = []
    runs = 0
    short_runs = 0
    warnings: list[str] = []

    def run(load: float) -> CurvePoint:
        nonlocal runs, short_runs
        if screen:
            quick = probe(load, True)
            runs += 1
            short_runs += 1
            if certainly_missed(quick, integer=integer):
                missed.append(quick)
                return quick
        point = probe(load, False)
        runs += 1
        full.append(point)
        if not point.feasible:
            missed.append(point)
        return point

    def snap(load: float) -> float:
        return float(max(1, math.ceil(load))) if integer else load

    def converged(low: float, high: float) -> bool:
        if integer:
            return high - low <= 1
        return low > 0 and high - low <= tolerance * high

    full_probes = 0
    low, high = 0.0, min(snap(initial_high), max_load)
    point = run(high)
    full_probes += 1
    expansions = 0
    while point.feasible:
        low = high
        if expansions >= max_expansions or full_probes >= max_probes or high >= max_load:
            warnings.append(
                f"the SLO still holds at {high:.4g}, the largest load probed: the capacity is at "
                "least that"
            )
            high = math.inf
            break
        high = min(snap(2 * high), max_load)
        point = run(high)
        full_probes += 1
        expansions += 1

    if math.isfinite(high) and first_guess is not None:
        guess = snap(first_guess)
        if low < guess < high and full_probes < max_probes:
            point = run(guess)
            full_probes += 1
            low, high = (guess, high) if point.feasible else (low, guess)

    while math.isfinite(high) and not converged(low, high) and full_probes < max_probes:
        mid = float((int(low) + int(high)) // 2) if integer else 0.5 * (low + high)
        if integer and mid <= low:
            break
        point = run(mid)
        full_probes += 1
        low, high = (mid, high) if point.feasible else (low, mid)

    done = math.isfinite(high) and converged(low, high)
    if math.isfinite(high) and not done:
        if low == 0:
            warnings.append(
                f"no probed load met the SLO (the lowest probed was {high:.4g}); raise "
                "max_probes or relax the SLO"
            )
        else:
            warnings.append(
                f"the probe budget ran out before the bracket [{low:.4g}, {high:.4g}] narrowed "
                f"to the tolerance {tolerance:.2%}"
            )

    if low > 0:
        probed = [p.load for p in full]
        spacing = max(tolerance * low, 0.5 if integer else 0.0)
        for fraction in curve_fractions:
            load = snap(fraction * low)
            near = any(abs(load - x) <= spacing for x in probed)
            if not near and load < low:
                run(load)
                probed.append(load)

    curve = tuple(sorted(full, key=lambda p: p.load))
    above = [p for p in missed if p.load > low]
    if above:
        binding: str | None = min(above, key=lambda p: p.load).evaluation.binding
    else:
        at_low = [p for p in full if p.load == low]
        binding = at_low[0].evaluation.binding if at_low else None
    knee = (
        knee_load(curve, zero_load_ttft_p95_s)
        if zero_load_ttft_p95_s is not None and zero_load_ttft_p95_s > 0
        else None
    )
    return CapacityResult(
        max_load=low,
        binding=binding,
        curve=curve,
        knee_load=knee,
        probes=runs,
        short_probes=short_runs,
        low=low,
        high=high,
        converged=done,
        warnings=tuple(warnings),
    )
