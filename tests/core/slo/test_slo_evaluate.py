"""SLO evaluation against hand-worked numbers: checks, margins, binding, goodput, failures."""

import math
from typing import Any

import numpy as np
import pytest

from servesize.core.simulation import (
    ConstantStepTime,
    LatencyStats,
    LinearStepTime,
    SchedulerConfig,
    SimulationSummary,
    simulate,
)
from servesize.core.slo import (
    AttainmentTarget,
    LatencyTarget,
    ServiceLevelObjective,
    evaluate_analytic,
    evaluate_overload,
    evaluate_result,
    evaluate_summary,
)
from servesize.core.steptime import OpenLoopEstimate
from servesize.core.traffic import FixedLength, closed_loop_workload, open_loop_workload

NAN_STATS = LatencyStats(
    count=0, mean=math.nan, p50=math.nan, p90=math.nan, p95=math.nan, p99=math.nan
)


def _stats(mean: float, p50: float, p90: float, p95: float, p99: float) -> LatencyStats:
    return LatencyStats(count=100, mean=mean, p50=p50, p90=p90, p95=p95, p99=p99)


def _summary(**overrides: object) -> SimulationSummary:
    fields: dict[str, object] = {
        "ttft_s": _stats(0.5, 0.4, 0.7, 0.8, 1.2),
        "tpot_s": _stats(0.03, 0.03, 0.04, 0.045, 0.06),
        "itl_s": _stats(0.03, 0.025, 0.05, 0.08, 0.25),
        "e2e_s": _stats(8.0, 7.0, 10.0, 12.0, 20.0),
        "queueing_delay_s": NAN_STATS,
        "ttft_completed_s": NAN_STATS,
        "tpot_completed_s": NAN_STATS,
        "e2e_completed_s": NAN_STATS,
        "queueing_delay_completed_s": NAN_STATS,
        "engine_ttft_completed_s": NAN_STATS,
        "offered_rate_per_s": 5.0,
        "throughput_requests_per_s": 4.9,
        "throughput_output_tokens_per_s": 1250.0,
        "goodput_requests_per_s": 4.5,
        "slo_attainment": 0.92,
        "measured": 100,
        "completed": 100,
        "failed": 0,
        "timed_out": 0,
        "rejected": 0,
        "preemptions": 0,
        "peak_kv_utilization": 0.1,
        "mean_in_system": 3.0,
        "littles_law_in_system": 3.0,
        "stable": True,
        "stability_reason": "ok",
        "stability_conclusive": True,
        "window_start_s": 0.0,
        "window_end_s": 20.0,
        "warnings": (),
    }
    fields.update(overrides)
    return SimulationSummary(**fields)  # type: ignore[arg-type]


SLO_TTFT_TPOT = ServiceLevelObjective(
    targets=(
        LatencyTarget(metric="ttft", statistic="p95", limit_s=1.0),
        LatencyTarget(metric="tpot", statistic="p95", limit_s=0.05),
    )
)


def test_checks_margins_and_binding_from_a_known_summary() -> None:
    ev = evaluate_summary(_summary(), SLO_TTFT_TPOT)
    ttft, tpot, failures = ev.checks
    # p95 TTFT 0.8 <= 1.0: margin 0.2, relative 0.2. p95 TPOT 0.045 <= 0.05: margin 0.005,
    # relative 0.1, the smaller, so TPOT binds. No failures against a budget of 0.
    assert (ttft.name, ttft.predicted, ttft.limit, ttft.direction) == (
        "ttft_s.p95",
        0.8,
        1.0,
        "max",
    )
    assert ttft.margin == pytest.approx(0.2)
    assert ttft.relative_margin == pytest.approx(0.2)
    assert tpot.margin == pytest.approx(0.005)
    assert tpot.relative_margin == pytest.approx(0.1)
    assert failures.name == "failure_rate"
    assert failures.predicted == 0.0
    assert failures.holds
    assert failures.relative_margin == math.inf  # no scale when no failure is allowed
    assert ev.feasible
    assert ev.binding == "tpot_s.p95"
    assert ev.goodput_requests_per_s == 4.5
    assert ev.throughput_requests_per_s == 4.9


def test_a_missed_target_makes_the_slo_infeasible_and_binds() -> None:
    slo = ServiceLevelObjective(
        targets=(
            LatencyTarget(metric="ttft", statistic="p99", limit_s=1.0),
            LatencyTarget(metric="itl", statistic="p99", limit_s=0.2),
        ),
    )
    ev = evaluate_summary(_summary(), slo)
    # p99 TTFT 1.2 vs 1.0: margin -0.2, relative -0.2; p99 ITL 0.25 vs 0.2: relative -0.25.
    assert not ev.feasible
    assert [c.holds for c in ev.checks] == [False, False, True]
    assert ev.check("itl_s.p99").relative_margin == pytest.approx(-0.25)
    assert ev.binding == "itl_s.p99"
    assert "missed: itl_s.p99" in ev.reason
    assert "1 more" in ev.reason


def test_failure_budget_throughput_floor_and_attainment_are_checked() -> None:
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="e2e", statistic="p50", limit_s=10.0),),
        max_failure_rate=0.01,
        min_throughput_requests_per_s=5.0,
        attainment=AttainmentTarget(goal=0.9, ttft_s=1.0, tpot_s=0.05),
    )
    summary = _summary(failed=0, timed_out=2, completed=98)
    ev = evaluate_summary(summary, slo, attainment=0.93)
    fr = ev.check("failure_rate")
    assert fr.predicted == pytest.approx(0.02)
    assert fr.margin == pytest.approx(-0.01)
    assert not fr.holds
    assert fr.relative_margin == pytest.approx(-1.0)
    tp = ev.check("throughput_requests_per_s")
    # 4.9 >= 5.0 fails: margin predicted - limit = -0.1, relative -0.02.
    assert tp.direction == "min"
    assert tp.margin == pytest.approx(-0.1)
    assert not tp.holds
    att = ev.check("attainment")
    assert att.predicted == 0.93
    assert att.margin == pytest.approx(0.03)
    assert att.holds
    assert ev.binding == "failure_rate"
    assert not ev.feasible


def test_attainment_limits_differing_from_request_slo_need_the_fraction() -> None:
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="p95", limit_s=0.5),),
        attainment=AttainmentTarget(goal=0.9, ttft_s=1.0),
    )
    with pytest.raises(ValueError, match="attainment"):
        evaluate_summary(_summary(), slo)
    same = ServiceLevelObjective(attainment=AttainmentTarget(goal=0.9, ttft_s=1.0))
    assert evaluate_summary(_summary(), same).attainment == 0.92


def test_an_unstable_run_is_infeasible_whatever_its_percentiles() -> None:
    ev = evaluate_summary(_summary(stable=False, stability_reason="queue grows"), SLO_TTFT_TPOT)
    assert all(c.holds for c in ev.checks)
    assert not ev.feasible
    assert ev.reason == "unstable: queue grows"


def test_a_statistic_without_samples_holds_and_never_binds() -> None:
    ev = evaluate_summary(_summary(tpot_s=NAN_STATS), SLO_TTFT_TPOT)
    assert ev.check("tpot_s.p95").holds
    assert ev.binding == "ttft_s.p95"


def _one_slot() -> SchedulerConfig:
    return SchedulerConfig(
        max_num_seqs=1, max_num_batched_tokens=10_000, block_size_tokens=16, num_kv_blocks=10**6
    )


def test_goodput_counts_only_requests_meeting_every_limit_and_failures_stay_in() -> None:
    # Ten requests sent 0.01 s apart to one slot serving each in one 0.1 s step (one output
    # token): request i gets its token at 0.1 (i + 1), so TTFT_i = 0.1 + 0.09 i. A timeout of
    # 0.5 s fails every request with TTFT > 0.5 (i >= 5). With TTFT <= 0.3 only i = 0, 1, 2
    # are good: attainment 3/10 over all measured requests, failures included.
    w = open_loop_workload(
        num_requests=10,
        rate_per_s=100.0,
        process="constant",
        input_tokens=FixedLength(8),
        output_tokens=FixedLength(1),
        rng=np.random.default_rng(0),
        timeout_s=0.5,
    )
    r = simulate(w, _one_slot(), ConstantStepTime(0.1))
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="p50", limit_s=0.3),),
        max_failure_rate=0.6,
        attainment=AttainmentTarget(goal=0.25, ttft_s=0.3),
    )
    summary, ev = evaluate_result(r, slo)
    ttft = np.where(r.ok, r.ttft_s, np.inf)
    np.testing.assert_allclose(ttft[:5], 0.1 + 0.09 * np.arange(5), atol=1e-9)
    assert np.all(np.isinf(ttft[5:]))
    assert summary.measured == 10
    assert ev.failure_rate == pytest.approx(0.5)
    assert ev.attainment == pytest.approx(0.3)
    # Goodput is the departure rate times the good share (3 of 10 measured).
    assert ev.goodput_requests_per_s == pytest.approx(0.3 * summary.throughput_requests_per_s)
    assert ev.goodput_requests_per_s <= ev.throughput_requests_per_s
    # p50 of [0.1, 0.19, 0.28, 0.37, 0.46, inf × 5]: halfway between 0.46 and inf is inf.
    assert ev.check("ttft_s.p50").predicted == math.inf
    assert not ev.feasible
    assert ev.check("ttft_s.p50").margin == -math.inf


def test_seed_question_more_tokens_per_second_but_twice_the_ttft_loses_on_goodput() -> None:
    # "Tokens/s increases but p95 TTFT doubles. Is the optimisation successful?" Two closed
    # loops on one engine, step time 0.02 s + 1e-4 s per token, prompts of 500 and 50 output
    # tokens, no think time: the N clients move in lock step. A step prefilling N prompts takes
    # 0.02 + N·0.05 s and emits the first token; each of the 49 decode steps 0.02 + N·1e-4 s.
    #   N = 4: TTFT 0.22 s, E2E 0.22 + 49·0.0204 = 1.2196 s, 4·50/1.2196 = 164 tokens/s
    #   N = 8: TTFT 0.42 s, E2E 0.42 + 49·0.0208 = 1.4392 s, 8·50/1.4392 = 278 tokens/s
    # Under p95 TTFT <= 0.3 s every request of N = 8 misses: goodput 0 against 4/1.2196 = 3.28/s.
    step = LinearStepTime(base_s=0.02, per_token_s=1e-4)
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="p95", limit_s=0.3),)
    )
    engine = SchedulerConfig(
        max_num_seqs=64, max_num_batched_tokens=8192, block_size_tokens=16, num_kv_blocks=10**6
    )
    results = {}
    for clients in (4, 8):
        w = closed_loop_workload(
            clients=clients,
            num_requests=40 * clients,
            input_tokens=FixedLength(500),
            output_tokens=FixedLength(50),
            rng=np.random.default_rng(0),
            warmup_requests=4 * clients,
        )
        results[clients] = evaluate_result(simulate(w, engine, step), slo)
    (fast_summary, fast), (slow_summary, slow) = results[8], results[4]
    assert fast_summary.throughput_output_tokens_per_s == pytest.approx(400 / 1.4392, rel=0.03)
    assert slow_summary.throughput_output_tokens_per_s == pytest.approx(200 / 1.2196, rel=0.03)
    assert fast.check("ttft_s.p95").predicted == pytest.approx(0.42, rel=1e-6)
    assert slow.check("ttft_s.p95").predicted == pytest.approx(0.22, rel=1e-6)
    assert slow.goodput_requests_per_s == pytest.approx(4 / 1.2196, rel=0.03)
    assert fast.goodput_requests_per_s == 0.0
    ranked = sorted(results.items(), key=lambda kv: -kv[1][1].goodput_requests_per_s)
    assert [n for n, _ in ranked] == [4, 8]
    assert not fast.feasible
    assert fast.reason.startswith("missed: ttft_s.p95 is 0.42")


def _estimate(**overrides: float) -> OpenLoopEstimate:
    fields: dict[str, Any] = {
        "arrival_rate_per_s": 4.0,
        "saturation_rate_per_s": 10.0,
        "utilization": 0.4,
        "resident_sequences": 8.0,
        "mean_step_s": 0.03,
        "tpot_s": 0.03,
        "ttft_mean_s": 0.3,
        "ttft_p50_s": 0.25,
        "ttft_p95_s": 0.6,
        "ttft_p99_s": 0.9,
        "prefill_wait_mean_s": 0.05,
        "prefill_utilization": 0.2,
        "e2e_mean_s": 0.3 + 0.03 * 99,
        "throughput_output_tokens_per_s": 400.0,
    }
    fields.update(overrides)
    return OpenLoopEstimate(**fields)


def test_analytic_screen_maps_tier_a_figures_onto_the_targets() -> None:
    slo = ServiceLevelObjective(
        targets=(
            LatencyTarget(metric="ttft", statistic="p95", limit_s=1.0),
            LatencyTarget(metric="ttft", statistic="p90", limit_s=1.0),
            LatencyTarget(metric="tpot", statistic="p99", limit_s=0.05),
            LatencyTarget(metric="itl", statistic="p99", limit_s=0.05),
            LatencyTarget(metric="e2e", statistic="p99", limit_s=3.0),
        ),
    )
    ev = evaluate_analytic(_estimate(), slo)
    # E2E p99 = TTFT p99 + 99 decode steps of 0.03 s = 0.9 + 2.97 = 3.87 > 3.0.
    assert ev.check("e2e_s.p99").predicted == pytest.approx(3.87)
    assert ev.check("tpot_s.p99").predicted == 0.03
    assert ev.unscreened == ("ttft_s.p90", "itl_s.p99")
    assert not ev.feasible
    assert ev.binding == "e2e_s.p99"
    assert ev.throughput_requests_per_s == 4.0
    assert ev.failure_rate == 0.0


def test_analytic_goodput_uses_the_highest_quantile_level_that_fits() -> None:
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="p50", limit_s=0.7),),
        attainment=AttainmentTarget(goal=0.9, ttft_s=0.7),
    )
    ev = evaluate_analytic(_estimate(), slo)
    # p95 0.6 <= 0.7 < p99 0.9: at least 95 % of requests meet 0.7 s.
    assert ev.attainment == 0.95
    assert ev.goodput_requests_per_s == pytest.approx(0.95 * 4.0)
    slow_decode = evaluate_analytic(
        _estimate(tpot_s=0.06),
        ServiceLevelObjective(attainment=AttainmentTarget(goal=0.5, ttft_s=5.0, tpot_s=0.05)),
    )
    assert slow_decode.attainment == 0.0
    assert slow_decode.goodput_requests_per_s == 0.0


def test_overload_verdict_is_infeasible_with_infinite_latency() -> None:
    ev = evaluate_overload(SLO_TTFT_TPOT, rate_per_s=12.0, saturation_rate_per_s=10.0)
    assert not ev.feasible
    assert not ev.stable
    assert ev.check("ttft_s.p95").predicted == math.inf
    assert ev.throughput_requests_per_s == 10.0
    assert ev.goodput_requests_per_s == 0.0
