"""The capacity planner against synthetic probes whose answers are worked out by hand.

Tier A is faked by an M/D/1 queue with a step of ``τ = 10 ms``: saturation ``1/τ = 100/s`` and
mean TTFT ``τ + ρτ / (2(1 − ρ))``, so a 30 ms mean-TTFT target holds up to
``ρ* = 2(L − τ) / (τ + 2(L − τ)) = 0.04 / 0.05 = 0.8``, i.e. 80/s. The "simulator" meets the SLO
exactly up to a threshold load (63/s unless a test says otherwise), whatever Tier A says.
"""

from __future__ import annotations

import pytest

from servesize.core.errors import UnstableQueueError
from servesize.core.slo import (
    CONFIRMATION_SEEDS,
    CapacityPlan,
    Check,
    CurvePoint,
    LatencyTarget,
    ServiceLevelObjective,
    SloEvaluation,
    ThroughputFloorUnreachableError,
    ThroughputOnlyObjectiveError,
    TierAEstimate,
    make_check,
    max_search_runs,
    plan_capacity,
    tier_a_max_rate,
    tier_a_verdict,
)
from servesize.core.slo.capacity_plan import CLOSED_LOOP_WARNING, curve_fractions
from servesize.core.steptime import OpenLoopEstimate

TAU_S = 0.01
LIMIT_S = 0.03
TTFT = ServiceLevelObjective(
    targets=(LatencyTarget(metric="ttft", statistic="mean", limit_s=LIMIT_S),)
)


def md1(rate_per_s: float, tau_s: float = TAU_S) -> OpenLoopEstimate:
    """Tier A's stand-in: M/D/1 with service ``τ``; every TTFT statistic is the mean."""
    rho = rate_per_s * tau_s
    if rho >= 1:
        raise UnstableQueueError(rho)
    ttft = tau_s + rho * tau_s / (2 * (1 - rho))
    return OpenLoopEstimate(
        arrival_rate_per_s=rate_per_s,
        saturation_rate_per_s=1 / tau_s,
        utilization=rho,
        resident_sequences=rho,
        mean_step_s=tau_s,
        tpot_s=tau_s,
        ttft_mean_s=ttft,
        ttft_p50_s=ttft,
        ttft_p95_s=ttft,
        ttft_p99_s=ttft,
        prefill_wait_mean_s=ttft - tau_s,
        prefill_utilization=rho,
        e2e_mean_s=ttft,
        throughput_output_tokens_per_s=rate_per_s,
    )


def slow_md1(rate_per_s: float) -> OpenLoopEstimate:
    """A pessimistic Tier A: a 50 ms step, so it never meets the 30 ms target (no first
    guess) and saturates at 20/s."""
    return md1(rate_per_s, tau_s=0.05)


def _evaluation(checks: tuple[Check, ...], *, load: float, stable: bool) -> SloEvaluation:
    feasible = stable and all(c.holds for c in checks)
    return SloEvaluation(
        feasible=feasible,
        checks=checks,
        binding="stability" if not stable else min(checks, key=lambda c: c.margin).name,
        goodput_requests_per_s=load if feasible else 0.0,
        throughput_requests_per_s=load,
        failure_rate=0.0,
        attainment=None,
        stable=stable,
        reason="" if stable else "the queue grows",
    )


class ThresholdProbe:
    """Meets every target up to its threshold load: target ``name`` is predicted at
    ``limit · load / threshold``. ``thresholds[k]`` overrides target thresholds for seed offset
    ``k``; above ``unstable_above`` a run is unstable. Records each call."""

    def __init__(
        self,
        thresholds: dict[str, float],
        *,
        by_seed: dict[int, dict[str, float]] | None = None,
        unstable_above: float = float("inf"),
    ) -> None:
        self.thresholds = thresholds
        self.by_seed = by_seed or {}
        self.unstable_above = unstable_above
        self.calls: list[tuple[float, bool, int, ServiceLevelObjective]] = []

    def __call__(
        self, load: float, short: bool, seed_offset: int, objective: ServiceLevelObjective
    ) -> CurvePoint:
        self.calls.append((load, short, seed_offset, objective))
        thresholds = self.thresholds | self.by_seed.get(seed_offset, {})
        checks = tuple(
            make_check(
                t.name,
                predicted=t.limit_s * load / thresholds[t.name],
                limit=t.limit_s,
                direction="max",
            )
            for t in objective.targets
        )
        ev = _evaluation(checks, load=load, stable=load <= self.unstable_above)
        return CurvePoint(
            load=load,
            ttft_p50_s=0.0,
            ttft_p95_s=0.0,
            tpot_p50_s=0.0,
            tpot_p95_s=0.0,
            goodput_requests_per_s=ev.goodput_requests_per_s,
            throughput_requests_per_s=load,
            feasible=ev.feasible,
            stable=ev.stable,
            evaluation=ev,
            short=short,
        )

    def loads(self, seed_offset: int = 0) -> list[float]:
        return [c[0] for c in self.calls if c[2] == seed_offset]


def _plan(
    probe: ThresholdProbe,
    objective: ServiceLevelObjective = TTFT,
    *,
    tier_a: TierAEstimate = md1,
) -> CapacityPlan:
    """An open-loop plan at 2 % tolerance, without screening runs or extra curve points."""
    return plan_capacity(
        probe,
        objective,
        tier_a=tier_a,
        tolerance=0.02,
        max_probes=20,
        screen=False,
        curve_points=0,
    )


def test_tier_a_max_rate_inverts_the_md1_mean_wait() -> None:
    rate = tier_a_max_rate(md1, TTFT, 100.0)
    assert rate is not None
    assert rate <= 80.0  # the bisection's low end always meets the target
    assert rate == pytest.approx(80.0, rel=1e-3)


def test_tier_a_verdict_past_saturation_is_an_overload_at_the_implied_rate() -> None:
    # 250/s over 2 replicas is 125/s each: ρ = 1.25, so one replica saturates at 125 / 1.25.
    verdict, saturation = tier_a_verdict(md1, TTFT, rate_per_s=250.0, replicas=2)
    assert saturation == pytest.approx(100.0)
    assert not verdict.feasible
    assert not verdict.stable
    assert verdict.checks[0].predicted == float("inf")


def test_bisection_returns_the_threshold_within_the_tolerance() -> None:
    probe = ThresholdProbe({"ttft_s.mean": 63.0})
    plan = _plan(probe)
    # First 1.05 × the saturation rate, then Tier A's own answer (80/s): both miss.
    assert probe.loads()[:2] == [pytest.approx(105.0), pytest.approx(80.0, rel=1e-3)]
    assert plan.found
    assert plan.search.converged
    low, high = plan.search.low, plan.search.high
    assert low <= 63.0 < high
    assert high - low <= 0.02 * high
    assert plan.max_load == low
    assert 63.0 * (1 - 0.02) <= plan.max_load <= 63.0
    assert plan.binding == "ttft_s.mean"
    assert plan.tier_a_saturation_rate_per_s == pytest.approx(100.0)
    assert plan.tier_a_max_rate_per_s == pytest.approx(80.0, rel=1e-3)
    # Every other seed meets the SLO at the answer: nothing lowered, nothing to warn about.
    assert plan.confirmation_seeds == CONFIRMATION_SEEDS
    assert plan.confirmed_by_seeds == CONFIRMATION_SEEDS
    assert [c[:3] for c in probe.calls[-2:]] == [(low, False, 1), (low, False, 2)]
    assert plan.warnings == ()


def test_a_pessimistic_tier_a_bracket_doubles_then_bisects() -> None:
    probe = ThresholdProbe({"ttft_s.mean": 64.0})
    plan = _plan(probe, tier_a=slow_md1)
    assert plan.tier_a_max_rate_per_s is None  # Tier A misses even a light load
    # 21 ✓ 42 ✓ 84 ✗ (doubling), then 63 ✓ 73.5 ✗ 68.25 ✗ 65.625 ✗ 64.3125 ✗ 63.65625 ✓:
    # [63.65625, 64.3125] is 0.656 wide, within 2 % of 64.3125 (1.286).
    trail = [21.0, 42.0, 84.0, 63.0, 73.5, 68.25, 65.625, 64.3125, 63.65625]
    assert probe.loads()[: len(trail)] == pytest.approx(trail)
    assert plan.max_load == pytest.approx(63.65625)
    assert plan.search.high == pytest.approx(64.3125)


def test_the_binding_constraint_is_the_target_that_breaks_first() -> None:
    two = ServiceLevelObjective(
        targets=(
            LatencyTarget(metric="ttft", statistic="mean", limit_s=LIMIT_S),
            LatencyTarget(metric="tpot", statistic="mean", limit_s=0.05),
        )
    )
    ttft_first = _plan(ThresholdProbe({"ttft_s.mean": 63.0, "tpot_s.mean": 90.0}), two)
    tpot_first = _plan(ThresholdProbe({"ttft_s.mean": 90.0, "tpot_s.mean": 63.0}), two)
    assert ttft_first.binding == "ttft_s.mean"
    assert tpot_first.binding == "tpot_s.mean"
    assert ttft_first.max_load == tpot_first.max_load


def test_an_unstable_first_miss_binds_as_stability_with_a_warning() -> None:
    plan = _plan(ThresholdProbe({"ttft_s.mean": 1000.0}, unstable_above=63.0))
    assert 63.0 * 0.98 <= plan.max_load <= 63.0
    assert plan.binding == "stability"
    assert any("stopped at a run judged unstable" in w for w in plan.warnings)


def test_a_seed_that_misses_lowers_the_answer_by_twice_the_tolerance() -> None:
    answer = _plan(ThresholdProbe({"ttft_s.mean": 63.0})).max_load
    # Seed 2 holds only up to 99 % of the bisection's answer: there it misses, so the answer
    # steps to answer × (1 − 2 × 0.02), where the search's seed and both others hold.
    probe = ThresholdProbe({"ttft_s.mean": 63.0}, by_seed={2: {"ttft_s.mean": 0.99 * answer}})
    plan = _plan(probe)
    assert plan.found
    assert plan.search.max_load == answer  # the bisection's own answer stays in the search
    assert plan.max_load == pytest.approx(0.96 * answer)
    assert plan.confirmed_by_seeds == 2
    # The search's seed at the lowered answer, then both others.
    assert [c[2] for c in probe.calls[-3:]] == [0, 1, 2]
    assert {c[0] for c in probe.calls[-3:]} == {plan.max_load}
    (warning,) = plan.warnings
    assert f"lowered to {0.96 * answer:.4g}" in warning


def test_a_seed_that_keeps_missing_lowers_at_most_twice_and_warns() -> None:
    # Seed 2 holds only up to 50/s: the answer (~62.5) steps down twice by 4 %, to ~57.6,
    # where seed 2 still misses.
    probe = ThresholdProbe({"ttft_s.mean": 63.0}, by_seed={2: {"ttft_s.mean": 50.0}})
    plan = _plan(probe)
    assert plan.max_load == pytest.approx(plan.search.max_load * 0.96**2)
    assert plan.confirmed_by_seeds == 1
    assert plan.confirmation_seeds == 2
    assert len(plan.warnings) == 2
    assert "1 of 2 runs with other seeds miss the SLO" in plan.warnings[1]


def test_a_minimum_throughput_is_checked_against_the_answer_not_by_the_probes() -> None:
    below = ServiceLevelObjective(targets=TTFT.targets, min_throughput_requests_per_s=50.0)
    above = ServiceLevelObjective(targets=TTFT.targets, min_throughput_requests_per_s=70.0)
    probe = ThresholdProbe({"ttft_s.mean": 63.0})
    met = _plan(probe, below)
    # The probes judge the other targets only (a floor would fail every light load).
    assert all(c[3].min_throughput_requests_per_s is None for c in probe.calls)
    assert met.found
    assert met.max_load == met.search.max_load
    assert 63.0 * 0.98 <= met.max_load <= 63.0
    assert met.binding == "ttft_s.mean"
    # Tier A's first guess ignores the floor too: still the M/D/1 answer, 80/s.
    assert met.tier_a_max_rate_per_s == pytest.approx(80.0, rel=1e-3)
    missed = _plan(ThresholdProbe({"ttft_s.mean": 63.0}), above)
    assert not missed.found
    assert missed.max_load == met.max_load
    assert missed.binding == "min_throughput_requests_per_s"
    assert missed.confirmation_seeds == 0
    assert "below the minimum throughput 70/s" in missed.warnings[-1]


def test_a_floor_at_saturation_or_alone_is_refused_before_any_simulation() -> None:
    probe = ThresholdProbe({"ttft_s.mean": 63.0})
    at_saturation = ServiceLevelObjective(targets=TTFT.targets, min_throughput_requests_per_s=100.0)
    with pytest.raises(ThroughputFloorUnreachableError) as caught:
        _plan(probe, at_saturation)
    assert caught.value.saturation_rate_per_s == pytest.approx(100.0)
    assert caught.value.min_throughput_requests_per_s == 100.0
    with pytest.raises(ThroughputOnlyObjectiveError):
        _plan(probe, ServiceLevelObjective(min_throughput_requests_per_s=1.0))
    assert probe.calls == []


def test_closed_loop_searches_whole_concurrencies_from_the_resident_capacity() -> None:
    probe = ThresholdProbe({"ttft_s.mean": 12.0})
    plan = plan_capacity(
        probe, TTFT, resident_sequences=5.3, max_probes=20, screen=False, curve_points=0
    )
    assert plan.closed_loop
    assert plan.max_load == 12.0
    assert plan.search.high == 13.0
    assert plan.tier_a_saturation_rate_per_s is None
    assert plan.warnings[0] == CLOSED_LOOP_WARNING
    assert all(load == int(load) for load, *_ in probe.calls)
    with pytest.raises(ValueError, match="not both"):
        plan_capacity(probe, TTFT, tier_a=md1, resident_sequences=5.3)


def test_curve_fractions_and_the_run_budget() -> None:
    assert curve_fractions(3) == pytest.approx((0.1, 0.45, 0.8))
    assert curve_fractions(1) == (0.5,)
    assert curve_fractions(0) == ()
    # 8 probes + 2 curve points + the confirmation's 2 seeds and 2 lowerings of 3 runs each.
    assert max_search_runs(8, 2) == 8 + 2 + 2 + 2 * 3
