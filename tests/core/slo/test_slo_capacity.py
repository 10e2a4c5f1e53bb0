"""Capacity search against exact queueing results, plus its monotonicity and mechanics.

With ``max_num_seqs = 1``, one output token and a constant step ``τ`` the engine is an M/D/1
queue (Poisson arrivals) whose TTFT is the wait plus ``τ``; the Pollaczek–Khinchine mean wait
``W(ρ) = ρτ / (2(1 − ρ))`` inverts to the largest load meeting a mean-TTFT target ``L``:
``ρ* = 2(L − τ) / (τ + 2(L − τ))``.
"""

import math

import numpy as np
import pytest
from scipy import stats

from servesize.core.simulation import ConstantStepTime, LinearStepTime, SchedulerConfig, simulate
from servesize.core.slo import (
    AttainmentTarget,
    CurvePoint,
    LatencyTarget,
    ServiceLevelObjective,
    SloEvaluation,
    certainly_missed,
    curve_point,
    evaluate_result,
    knee_load,
    make_check,
    search_capacity,
)
from servesize.core.traffic import FixedLength, GeometricLength, open_loop_workload

TAU = 0.01
BATCHES = 20


def _engine(max_num_seqs: int = 1, kv_blocks: int = 10**6) -> SchedulerConfig:
    return SchedulerConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=10_000,
        block_size_tokens=16,
        num_kv_blocks=kv_blocks,
    )


def _md1_probe(slo: ServiceLevelObjective, num_requests: int = 6_000):  # type: ignore[no-untyped-def]
    def probe(rate: float, short: bool) -> CurvePoint:
        w = open_loop_workload(
            num_requests=num_requests // 4 if short else num_requests,
            rate_per_s=rate,
            input_tokens=FixedLength(16),
            output_tokens=FixedLength(1),
            rng=np.random.default_rng(7),
            warmup_requests=200,
        )
        summary, ev = evaluate_result(simulate(w, _engine(), ConstantStepTime(TAU)), slo)
        return curve_point(rate, summary, ev, short=short)

    return probe


def _rho_star(limit_s: float) -> float:
    wait = limit_s - TAU
    return 2 * wait / (TAU + 2 * wait)


def test_common_random_numbers_scale_the_same_draws_by_one_over_rate() -> None:
    def draw(rate: float, process: str) -> tuple[np.ndarray, np.ndarray]:
        w = open_loop_workload(
            num_requests=500,
            rate_per_s=rate,
            input_tokens=GeometricLength(100.0),
            output_tokens=GeometricLength(50.0),
            rng=np.random.default_rng(3),
            process=process,  # type: ignore[arg-type]
            cv=2.0,
        )
        return w.arrival_s * rate, w.prompt_tokens

    for process in ("poisson", "gamma"):
        (a1, p1), (a2, p2) = draw(2.0, process), draw(7.0, process)
        np.testing.assert_allclose(a1, a2, rtol=1e-12)
        np.testing.assert_array_equal(p1, p2)


def test_max_rate_for_a_mean_ttft_target_matches_md1() -> None:
    limit = 0.03  # W = 0.02 s = 2τ ⇒ ρ* = 0.8, λ* = 80/s
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="mean", limit_s=limit),)
    )
    rho_star = _rho_star(limit)
    assert rho_star == pytest.approx(0.8)
    tolerance = 0.02
    result = search_capacity(
        _md1_probe(slo, 4_000), initial_high=1.05 / TAU, tolerance=tolerance, max_probes=12
    )
    assert result.converged
    assert result.binding == "ttft_s.mean"
    # Statistical allowance: a 99 % batch-means interval on the mean wait at the answer, mapped
    # to load through dW/dρ = τ / (2(1 − ρ)²).
    w = open_loop_workload(
        num_requests=4_000,
        rate_per_s=result.max_load,
        input_tokens=FixedLength(16),
        output_tokens=FixedLength(1),
        rng=np.random.default_rng(7),
        warmup_requests=200,
    )
    r = simulate(w, _engine(), ConstantStepTime(TAU))
    waits = np.asarray(r.queueing_delay_s[r.in_window])
    means = np.array([b.mean() for b in np.array_split(waits, BATCHES)])
    half = stats.t.ppf(0.995, BATCHES - 1) * means.std(ddof=1) / math.sqrt(BATCHES)
    rho_ci = half / (TAU / (2 * (1 - rho_star) ** 2))
    rho_found = result.max_load * TAU
    assert abs(rho_found - rho_star) <= tolerance * rho_star + rho_ci
    # The answer met the SLO; the bracket's top missed it and sits within the tolerance.
    assert result.high - result.low <= tolerance * result.high


def test_looser_slo_never_lowers_capacity() -> None:
    answers = []
    for limit in (0.02, 0.03, 0.05):
        slo = ServiceLevelObjective(
            targets=(LatencyTarget(metric="ttft", statistic="p95", limit_s=limit),)
        )
        res = search_capacity(_md1_probe(slo, 2_000), initial_high=1.05 / TAU, tolerance=0.05)
        answers.append(res.max_load)
    assert answers[0] <= answers[1] <= answers[2]
    assert answers[0] < answers[2]


def test_more_kv_blocks_never_lower_capacity() -> None:
    # Batched decode (step grows with the batch) limited by KV: 120 tokens per request need 8
    # blocks of 16, so 16 blocks hold 2 requests and 160 hold 20.
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="p95", limit_s=0.5),)
    )
    step = LinearStepTime(base_s=0.01, per_token_s=1e-5)
    answers = []
    for blocks in (16, 160):

        def probe(rate: float, short: bool, blocks: int = blocks) -> CurvePoint:
            w = open_loop_workload(
                num_requests=200 if short else 800,
                rate_per_s=rate,
                input_tokens=FixedLength(100),
                output_tokens=FixedLength(20),
                rng=np.random.default_rng(5),
                warmup_requests=100,
            )
            summary, ev = evaluate_result(simulate(w, _engine(64, blocks), step), slo)
            return curve_point(rate, summary, ev, short=short)

        answers.append(search_capacity(probe, initial_high=10.0, tolerance=0.05).max_load)
    assert answers[0] < answers[1]


def test_capacity_expands_the_bracket_when_tier_a_is_pessimistic() -> None:
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="mean", limit_s=0.03),)
    )
    res = search_capacity(_md1_probe(slo, 3_000), initial_high=20.0, tolerance=0.05)
    # 20 → 40 → 80 → 160 (80 holds only by chance; the answer lies in [40, 100)).
    assert 40.0 <= res.max_load < 100.0
    assert res.curve == tuple(sorted(res.curve, key=lambda p: p.load))
    assert all(not p.short for p in res.curve)


def test_short_screening_runs_abort_hopeless_loads() -> None:
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="mean", limit_s=0.03),)
    )
    res = search_capacity(_md1_probe(slo, 3_000), initial_high=1.05 / TAU, tolerance=0.05)
    # 105/s is above saturation (100/s): its short run is unstable, so no full run is made.
    assert res.short_probes > 0
    assert all(p.load < 1.0 / TAU for p in res.curve)
    assert res.probes == res.short_probes + len(res.curve)


def test_no_feasible_load_within_the_budget_is_reported() -> None:
    never = SloEvaluation(
        feasible=False,
        checks=(),
        binding="ttft_s.p95",
        goodput_requests_per_s=0.0,
        throughput_requests_per_s=0.0,
        failure_rate=0.0,
        attainment=None,
    )

    def probe(load: float, short: bool) -> CurvePoint:
        return CurvePoint(
            load=load,
            ttft_p50_s=1.0,
            ttft_p95_s=2.0,
            tpot_p50_s=0.1,
            tpot_p95_s=0.1,
            goodput_requests_per_s=0.0,
            throughput_requests_per_s=load,
            feasible=False,
            stable=True,
            evaluation=never,
            short=short,
        )

    res = search_capacity(probe, initial_high=10.0, max_probes=5, screen=False)
    assert res.max_load == 0.0
    assert not res.converged
    assert res.probes == 5
    assert "no probed load met the SLO" in res.warnings[0]
    assert res.binding == "ttft_s.p95"


def test_closed_loop_concurrency_search_is_integer_and_exact() -> None:
    # A fake closed loop whose p95 TTFT is 0.1 s × N: a 1.25 s target allows N = 12.
    def probe(n: float, short: bool) -> CurvePoint:
        check = make_check("ttft_s.p95", predicted=0.1 * n, limit=1.25, direction="max")
        ev = SloEvaluation(
            feasible=check.holds,
            checks=(check,),
            binding=check.name,
            goodput_requests_per_s=0.0,
            throughput_requests_per_s=n,
            failure_rate=0.0,
            attainment=None,
        )
        return CurvePoint(
            load=n,
            ttft_p50_s=0.05 * n,
            ttft_p95_s=0.1 * n,
            tpot_p50_s=0.01,
            tpot_p95_s=0.01,
            goodput_requests_per_s=0.0,
            throughput_requests_per_s=n,
            feasible=check.holds,
            stable=True,
            evaluation=ev,
            short=short,
        )

    res = search_capacity(probe, initial_high=5.3, integer=True, screen=False, max_probes=20)
    assert res.max_load == 12.0
    assert res.high == 13.0
    assert res.converged
    assert all(p.load == int(p.load) for p in res.curve)
    # Knee: p95 TTFT reaches 2 × 0.3 s = 0.6 s at N = 6 (linear, so exactly on a probed point
    # or interpolated to it).
    assert knee_load(res.curve, 0.3) == pytest.approx(6.0)


def test_attainment_form_capacity_matches_md1_sojourn_probability() -> None:
    # M/D/1 with one-step service: P(TTFT <= τ) = P(no wait) = 1 − ρ. A goal of 40 % with a
    # limit of τ (+ rounding) gives ρ* = 0.6, λ* = 60/s; the fraction is a mean of indicators,
    # so its 99 % interval is about 2.6·sqrt(0.24 / n_eff) — we allow 0.05 in ρ.
    slo = ServiceLevelObjective(attainment=AttainmentTarget(goal=0.4, ttft_s=TAU * (1 + 1e-9)))
    res = search_capacity(_md1_probe(slo, 3_000), initial_high=1.05 / TAU, tolerance=0.02)
    assert res.binding == "attainment"
    assert res.max_load * TAU == pytest.approx(0.6, abs=0.05)


def test_a_window_too_short_to_judge_is_left_to_the_full_run() -> None:
    # 20 requests at 90/s with 100 output tokens of 10 ms on a wide engine: the window (~0.2 s)
    # is far under two mean residences (~1 s), so the short run is called unstable but
    # inconclusively, and screening must not count it as a certain miss.
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="tpot", statistic="p95", limit_s=0.05),)
    )
    w = open_loop_workload(
        num_requests=20,
        rate_per_s=90.0,
        input_tokens=FixedLength(16),
        output_tokens=FixedLength(100),
        rng=np.random.default_rng(3),
        warmup_requests=2,
    )
    summary, ev = evaluate_result(simulate(w, _engine(64), ConstantStepTime(TAU)), slo)
    assert not summary.stable
    assert not summary.stability_conclusive
    point = curve_point(90.0, summary, ev, short=True)
    assert ev.throughput_requests_per_s < 0.5 * 90.0
    assert not certainly_missed(point)
