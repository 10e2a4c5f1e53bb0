"""Checking an SLO against a simulated run or a Tier A estimate (docs/modeling.md §4.5).

Each target becomes a :class:`Check` with ``margin = limit - predicted`` for an upper limit
(``predicted - limit`` for a lower one) and ``relative_margin = margin / limit``; the objective
holds when every check holds *and* the run is stable. The **binding** check is the one with the
smallest relative margin: the first to break as load grows (or, when the SLO is missed, the one
missed by the most, relatively).

* Latency targets use the all-requests statistics: a timed-out or rejected request counts as
  ``+inf``, so 2 % failures make p99 ``inf``. A statistic without samples (TPOT when every
  request has one output token) is ``NaN``: the check holds vacuously, with an infinite
  relative margin.
* ``failure_rate = (measured - completed) / measured`` (timed out, rejected or failed). With
  ``max_failure_rate = 0`` the margin has no scale: its relative margin is ``+inf`` while no
  request fails and ``-inf`` otherwise.
* Stability is the simulator's verdict (:meth:`SimulationResult.summary`): an unstable run
  misses the objective whatever its percentiles say.
* Goodput is the rate of requests that complete and meet the per-request limits of
  :meth:`ServiceLevelObjective.request_slo` (vLLM bench ``request_goodput``): throughput times
  the share of measured requests meeting them, so it never exceeds throughput; the attainment
  check uses its own limits jointly (DistServe) over measured requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from servesize.core.simulation import SLO, SimulationResult, SimulationSummary
from servesize.core.slo.spec import AttainmentTarget, ServiceLevelObjective
from servesize.core.steptime.openloop import OpenLoopEstimate

Direction = Literal["max", "min"]
"""The boundary correction needs a window of at least this many mean residence times."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One target against its prediction."""

    name: str
    """``"ttft_s.p95"``, ``"failure_rate"``, ``"throughput_requests_per_s"``, ``"attainment"``."""
    predicted: float
    limit: float
    direction: Direction
    margin: float
    relative_margin: float
    holds: bool


def make_check(name: str, *, predicted: float, limit: float, direction: Direction) -> Check:
    """A check with its margins (see the module docstring for NaN and zero limits).

    >>> c = make_check("ttft_s.p95", predicted=0.8, limit=1.0, direction="max")
    >>> round(c.margin, 12), round(c.relative_margin, 12), c.holds
    (0.2, 0.2, True)
    """
    if math.isnan(predicted):
        return Check(
            name=name,
            predicted=predicted,
            limit=limit,
            direction=direction,
            margin=math.nan,
            relative_margin=math.inf,
            holds=True,
        )
    if direction == "max":
        margin = limit - predicted if math.isfinite(predicted) else -math.inf
        holds = predicted <= limit
    else:
        margin = predicted - limit
        holds = predicted >= limit
    no_scale = math.inf if holds else -math.inf
    relative = margin / limit if limit > 0 else no_scale
    return Check(
        name=name,
        predicted=predicted,
        limit=limit,
        direction=direction,
        margin=margin,
        relative_margin=relative,
        holds=holds,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SloEvaluation:
    """The verdict on one operating point."""

    feasible: bool
    """Every check holds and the run is stable."""
    checks: tuple[Check, ...]
    binding: str
    """Name of the check with the smallest relative margin (first in SLO order on ties)."""
    goodput_requests_per_s: float
    throughput_requests_per_s: float
    failure_rate: float
    attainment: float | None
    """Fraction of measured requests meeting the attainment target's limits jointly."""
    stable: bool = True
    reason: str = ""
    """One sentence: what holds, or which check misses and by how much."""
    unscreened: tuple[str, ...] = ()
    """Targets the tier could not predict (Tier A has no ITL or p90 distribution)."""

    def check(self, name: str) -> Check:
        """The check called ``name``."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)


def _describe(check: Check) -> str:
    word = "at most" if check.direction == "max" else "at least"
    return f"{check.name} is {check.predicted:.4g} against {word} {check.limit:.4g}"


def _verdict(
    checks: list[Check],
    *,
    stable: bool,
    stability_reason: str,
    goodput_requests_per_s: float,
    throughput_requests_per_s: float,
    failure_rate: float,
    attainment: float | None,
    unscreened: tuple[str, ...] = (),
) -> SloEvaluation:
    binding = min(checks, key=lambda c: c.relative_margin)
    missed = [c for c in checks if not c.holds]
    feasible = stable and not missed
    if not stable:
        reason = f"unstable: {stability_reason}"
    elif missed:
        worst = min(missed, key=lambda c: c.relative_margin)
        reason = f"missed: {_describe(worst)}"
        if len(missed) > 1:
            reason += f" (and {len(missed) - 1} more)"
    else:
        reason = f"met; binding: {_describe(binding)}"
    return SloEvaluation(
        feasible=feasible,
        checks=tuple(checks),
        binding=binding.name,
        goodput_requests_per_s=goodput_requests_per_s,
        throughput_requests_per_s=throughput_requests_per_s,
        failure_rate=failure_rate,
        attainment=attainment,
        stable=stable,
        reason=reason,
        unscreened=unscreened,
    )


def _common_checks(
    objective: ServiceLevelObjective,
    *,
    failure_rate: float,
    throughput_requests_per_s: float,
    attainment: float | None,
) -> list[Check]:
    checks = [
        make_check(
            "failure_rate",
            predicted=failure_rate,
            limit=objective.max_failure_rate,
            direction="max",
        )
    ]
    if objective.min_throughput_requests_per_s is not None:
        checks.append(
            make_check(
                "throughput_requests_per_s",
                predicted=throughput_requests_per_s,
                limit=objective.min_throughput_requests_per_s,
                direction="min",
            )
        )
    if objective.attainment is not None:
        assert attainment is not None
        checks.append(
            make_check(
                "attainment",
                predicted=attainment,
                limit=objective.attainment.goal,
                direction="min",
            )
        )
    return checks


def evaluate_summary(
    summary: SimulationSummary,
    objective: ServiceLevelObjective,
    *,
    attainment: float | None = None,
    keeps_up: tuple[bool, str] | None = None,
) -> SloEvaluation:
    """Check a simulated run's summary against ``objective``.

    ``keeps_up``: the verdict of :func:`completions_keep_up` on the run; a run that does not
    keep up is unstable whatever the summary says.

    ``summary`` must come from ``result.summary(objective.request_slo())`` (its goodput counts
    those limits). The attainment check needs the fraction under the attainment target's own
    limits: pass it as ``attainment`` (:func:`attainment_fraction`) unless those limits equal
    ``request_slo()``, when the summary's ``slo_attainment`` is that fraction.
    """
    if objective.attainment is not None and attainment is None:
        if objective.attainment.request_slo() != objective.request_slo():
            raise ValueError(
                "attainment: the attainment limits differ from request_slo(); pass the "
                "fraction computed with attainment_fraction()"
            )
        attainment = summary.slo_attainment
    stats = {
        "ttft": summary.ttft_s,
        "itl": summary.itl_s,
        "tpot": summary.tpot_s,
        "e2e": summary.e2e_s,
    }
    checks = [
        make_check(
            t.name,
            predicted=float(getattr(stats[t.metric], t.statistic)),
            limit=t.limit_s,
            direction="max",
        )
        for t in objective.targets
    ]
    not_completed = summary.measured - summary.completed
    failure_rate = not_completed / summary.measured if summary.measured else 0.0
    throughput = summary.throughput_requests_per_s
    goodput = (
        summary.goodput_requests_per_s if summary.goodput_requests_per_s is not None else throughput
    )
    checks += _common_checks(
        objective,
        failure_rate=failure_rate,
        throughput_requests_per_s=throughput,
        attainment=attainment,
    )
    stable, stability_reason = summary.stable, summary.stability_reason
    if stable and keeps_up is not None and not keeps_up[0]:
        stable, stability_reason = False, keeps_up[1]
    return _verdict(
        checks,
        stable=stable,
        stability_reason=stability_reason,
        goodput_requests_per_s=goodput,
        throughput_requests_per_s=throughput,
        failure_rate=failure_rate,
        attainment=attainment if objective.attainment is not None else None,
    )


def attainment_fraction(result: SimulationResult, slo: SLO) -> float:
    """Fraction of measured requests that completed and meet every limit of ``slo`` jointly
    (TPOT only for requests with two or more output tokens), as ``SimulationResult.summary``
    counts them."""
    measured = result.in_window
    good = measured & result.ok
    with np.errstate(invalid="ignore"):
        if slo.ttft_s is not None:
            good &= result.ttft_s <= slo.ttft_s
        if slo.tpot_s is not None:
            good &= (result.output_tokens < 2) | (result.tpot_s <= slo.tpot_s)
        if slo.e2e_s is not None:
            good &= result.e2e_s <= slo.e2e_s
    n = int(measured.sum())
    return float(good.sum()) / n if n else math.nan


COMPLETION_SIGMAS = 3.0
"""Standard deviations of noise a run's completions may fall short of its sends by: one-sided
3σ is a 0.13 % false alarm per run, under 3 % over the twenty-odd probes of a capacity
search (2σ would be 2.3 % per run, about one false alarm in two searches)."""


def completions_keep_up(result: SimulationResult) -> tuple[bool, str]:
    """Whether an open-loop run completes what is offered to it, within its own noise.

    From ``t₀ = window start + W̄`` (``W̄`` the measured completed requests' mean residence,
    so the fill-up of a run that starts empty is not counted) to the window's end, ``A``
    requests are sent and ``D`` complete; timed-out and rejected ones never complete, so they
    count against ``D``. By conservation ``A − D`` is the growth of the number in the system;
    in a steady state that number is about Poisson with mean ``L̄ = (A/T)·W̄`` (Little), so
    the difference of its two ends has standard deviation ``√(2 L̄)``. The run keeps up when
    ``A − D ≤ 3√(2 L̄) + 1`` (:data:`COMPLETION_SIGMAS`), with no proportional slack (the
    simulator's own verdict also allows 2 % of the sends). A closed loop, or a window under
    ``2 W̄``, is left to the simulator's verdict."""
    if result.closed_loop:
        return True, "closed loop"
    ws, we = result.window_start_s, result.window_end_s
    done = result.in_window & result.ok
    if not np.any(done) or not we > ws:
        return True, "nothing to judge"
    residence = float(np.mean(result.exit_s[done] - result.arrival_s[done]))
    start = ws + residence
    if 2.0 * residence > we - ws:
        return True, "window under twice the mean residence"
    sent = int(np.count_nonzero((result.arrival_s > start) & (result.arrival_s <= we)))
    completed = int(
        np.count_nonzero(result.ok & (result.finish_s > start) & (result.finish_s <= we))
    )
    in_system = sent / (we - start) * residence
    allowed = COMPLETION_SIGMAS * math.sqrt(2.0 * in_system) + 1.0
    if sent - completed <= allowed:
        return True, "completions keep up with the sends"
    share = completed / sent if sent else 1.0
    return False, (
        f"{completed} of {sent} requests sent after the fill-up completed in the window "
        f"({share:.1%}; {sent - completed} short, more than the {allowed:.0f} the run's own "
        "noise allows): the queue grows"
    )


def evaluate_result(
    result: SimulationResult, objective: ServiceLevelObjective
) -> tuple[SimulationSummary, SloEvaluation]:
    """Summarise ``result`` under ``objective.request_slo()`` and evaluate it (attainment under
    its own limits)."""
    summary = result.summary(objective.request_slo())
    attainment = (
        attainment_fraction(result, objective.attainment.request_slo())
        if objective.attainment is not None
        else None
    )
    return summary, evaluate_summary(
        summary, objective, attainment=attainment, keeps_up=completions_keep_up(result)
    )


# ----------------------------------------------------------------------------- Tier A


def _analytic_attainment(estimate: OpenLoopEstimate, target: AttainmentTarget) -> float:
    """A lower bound on ``P(TTFT <= x, TPOT <= y, E2E <= z)`` from the Tier A quantiles.

    Tier A's TPOT and decode time are deterministic, so the event reduces to
    ``TTFT <= min(x, z - decode)`` (or to nothing when TPOT misses); its probability is bounded
    below by the largest known quantile level (0.5, 0.95, 0.99) whose TTFT fits.
    """
    if target.tpot_s is not None and estimate.tpot_s > target.tpot_s:
        return 0.0
    decode_s = estimate.e2e_mean_s - estimate.ttft_mean_s
    bound = math.inf
    if target.ttft_s is not None:
        bound = target.ttft_s
    if target.e2e_s is not None:
        bound = min(bound, target.e2e_s - decode_s)
    if math.isinf(bound):
        return 1.0
    levels = (
        (0.99, estimate.ttft_p99_s),
        (0.95, estimate.ttft_p95_s),
        (0.5, estimate.ttft_p50_s),
    )
    return next((q for q, v in levels if v <= bound), 0.0)


def evaluate_analytic(
    estimate: OpenLoopEstimate, objective: ServiceLevelObjective, *, replicas: int = 1
) -> SloEvaluation:
    """Screen ``objective`` with a Tier A open-loop estimate (no failures, throughput = rate).

    Predictions: TTFT mean/p50/p95/p99 from the estimate; TPOT (deterministic in Tier A) for
    every statistic, and the mean ITL equal to it; E2E statistics as TTFT's plus the decode time
    ``E2E_mean - TTFT_mean``. TTFT p90 and ITL percentiles are not modelled and are listed in
    ``unscreened``; goodput is ``rate × P(request meets the per-request limits)`` with the
    probability bounded below as in the attainment check. ``estimate`` is one of ``replicas``
    identical replicas sharing the traffic evenly: throughput and goodput are fleet-wide.
    """
    decode_s = estimate.e2e_mean_s - estimate.ttft_mean_s
    ttft = {
        "mean": estimate.ttft_mean_s,
        "p50": estimate.ttft_p50_s,
        "p95": estimate.ttft_p95_s,
        "p99": estimate.ttft_p99_s,
    }
    checks: list[Check] = []
    unscreened: list[str] = []
    for t in objective.targets:
        predicted: float | None
        if t.metric == "ttft":
            predicted = ttft.get(t.statistic)
        elif t.metric == "e2e":
            base = ttft.get(t.statistic)
            predicted = None if base is None else base + decode_s
        elif t.metric == "tpot" or t.statistic == "mean":
            predicted = estimate.tpot_s
        else:
            predicted = None
        if predicted is None:
            unscreened.append(t.name)
            continue
        checks.append(make_check(t.name, predicted=predicted, limit=t.limit_s, direction="max"))
    rate = estimate.arrival_rate_per_s * replicas
    request_slo = objective.request_slo()
    good_fraction = (
        1.0
        if request_slo is None
        else _analytic_attainment(
            estimate,
            AttainmentTarget(
                goal=1.0,
                ttft_s=request_slo.ttft_s,
                tpot_s=request_slo.tpot_s,
                e2e_s=request_slo.e2e_s,
            ),
        )
    )
    attainment = (
        _analytic_attainment(estimate, objective.attainment)
        if objective.attainment is not None
        else None
    )
    checks += _common_checks(
        objective, failure_rate=0.0, throughput_requests_per_s=rate, attainment=attainment
    )
    return _verdict(
        checks,
        stable=True,
        stability_reason="",
        goodput_requests_per_s=rate * good_fraction,
        throughput_requests_per_s=rate,
        failure_rate=0.0,
        attainment=attainment,
        unscreened=tuple(unscreened),
    )


def evaluate_overload(
    objective: ServiceLevelObjective,
    *,
    rate_per_s: float,
    saturation_rate_per_s: float,
) -> SloEvaluation:
    """The Tier A verdict at or above saturation: the queue grows without bound, every latency
    is ``inf`` and throughput is the saturation rate."""
    checks = [
        make_check(t.name, predicted=math.inf, limit=t.limit_s, direction="max")
        for t in objective.targets
    ]
    attainment = 0.0 if objective.attainment is not None else None
    checks += _common_checks(
        objective,
        failure_rate=0.0,
        throughput_requests_per_s=saturation_rate_per_s,
        attainment=attainment,
    )
    return _verdict(
        checks,
        stable=False,
        stability_reason=(
            f"the rate {rate_per_s:.4g}/s reaches the Tier A saturation rate "
            f"{saturation_rate_per_s:.4g}/s"
        ),
        goodput_requests_per_s=0.0,
        throughput_requests_per_s=saturation_rate_per_s,
        failure_rate=0.0,
        attainment=attainment,
    )
