"""Verification of sizing plans: the thinned one-replica check for large fleets, inconclusive
runs, the work bounds, context lengths and SLOs no candidate meets even idle."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from servesize.core.simulation import SchedulerConfig, simulate
from servesize.core.simulation.steptime import ConstantStepTime
from servesize.core.sizing import (
    FLEET_MAX_REPLICAS,
    MAX_CANDIDATES,
    SearchSpace,
    SizingTooLargeError,
    SizingTraffic,
    enumerate_candidates,
    size,
    zero_load_infeasibility,
)
from servesize.core.sizing import verify as verify_module
from servesize.core.sizing.result import Rejection, SizingResult
from servesize.core.sizing.screen import Miss
from servesize.core.sizing.verify import CHUNKED_PREFILL_NOTE, _thinned_arrivals
from servesize.core.slo import LatencyTarget, ServiceLevelObjective
from servesize.core.slo.evaluate import SloEvaluation, make_check
from servesize.core.traffic import FixedLength, open_loop_workload, unit_rate_arrival_times
from tests.core.sizing.fixtures import GPUS, LLAMA_8B
from tests.core.sizing.test_sizing_explain import _candidate

SLO = ServiceLevelObjective(
    targets=(
        LatencyTarget(metric="ttft", statistic="p95", limit_s=1.0),
        LatencyTarget(metric="tpot", statistic="p95", limit_s=0.05),
    )
)


def _h100(**kw: object) -> SearchSpace:
    defaults: dict[str, object] = {
        "tensor_parallel": (1,),
        "max_num_batched_tokens": (8192,),
        "kv_cache_dtype": ("fp8",),
        "max_model_len": (2048,),
    }
    return SearchSpace(hardware=(GPUS["h100-sxm"],), **(defaults | kw))  # type: ignore[arg-type]


def _traffic(rate_per_s: float, prompt: int = 1000, output: int = 200) -> SizingTraffic:
    return SizingTraffic(
        rate_per_s=rate_per_s, input_tokens=FixedLength(prompt), output_tokens=FixedLength(output)
    )


def _size(space: SearchSpace, traffic: SizingTraffic, **kw: object) -> SizingResult:
    args: dict[str, object] = {"prices": {"h100-sxm": 2.5}, "verify_top": 1} | kw
    return size(
        LLAMA_8B,
        model_name="m",
        space=space,
        traffic=traffic,
        objective=SLO,
        **args,  # type: ignore[arg-type]
    )


# ----------------------------------------------------------------------------- thinning


def test_random_routing_splits_poisson_arrivals_into_independent_md1_queues() -> None:
    # The basis of the one-replica check: with random routing each of R replicas sees Poisson
    # arrivals at λ/R. One request at a time (max_num_seqs 1), 4-token prompts and 3 output
    # tokens take 3 steps of 0.1 s: an M/D/1 queue with S = 0.3 s. At λ/R = 5/3 per s, ρ = 0.5
    # and Pollaczek-Khinchine gives W_q = ρ·S / (2(1 − ρ)) = 0.5 · 0.3 / 1.0 = 0.15 s.
    engine = SchedulerConfig(
        max_num_batched_tokens=16, max_num_seqs=1, block_size_tokens=4, num_kv_blocks=64
    )
    four, three = FixedLength(4), FixedLength(3)
    fleet = open_loop_workload(
        num_requests=10_000,
        rate_per_s=50 / 3,
        rng=np.random.default_rng(1),
        input_tokens=four,
        output_tokens=three,
    )
    fleet_run = simulate(
        fleet,
        engine,
        ConstantStepTime(0.1),
        replicas=10,
        routing="random",
        routing_rng=np.random.default_rng(2),
    )
    one = open_loop_workload(
        num_requests=6_000,
        rate_per_s=5 / 3,
        rng=np.random.default_rng(3),
        input_tokens=four,
        output_tokens=three,
    )
    one_run = simulate(one, engine, ConstantStepTime(0.1))
    for run in (fleet_run, one_run):
        assert run.summary().queueing_delay_s.mean == pytest.approx(0.15, rel=0.1)


def test_thinned_renewal_arrivals_keep_the_first_two_moments() -> None:
    # Keeping each gap-sum of a renewal stream with probability p: the kept gaps are geometric
    # sums of the original ones, with squared CV 1 + (c² − 1)·p.
    assert _thinned_arrivals("poisson", 1.0, 0.1) == ("poisson", 1.0)
    assert _thinned_arrivals("gamma", 3.0, 1.0) == ("gamma", 3.0)
    process, cv = _thinned_arrivals("gamma", 3.0, 0.25)  # 1 + 8/4 = 3
    assert process == "gamma"
    assert cv == pytest.approx(math.sqrt(3.0))
    # Checked on a sampled stream: thin 200 000 gamma(cv 3) gaps at random, p = 0.25.
    rng = np.random.default_rng(0)
    times = unit_rate_arrival_times(200_000, process="gamma", rng=rng, cv=3.0)
    kept = np.diff(times[rng.random(times.size) < 0.25])
    assert np.std(kept) / np.mean(kept) == pytest.approx(cv, rel=0.05)


# ----------------------------------------------------------------------------- large fleets


def test_a_large_fleet_is_verified_on_one_thinned_replica() -> None:
    # 2000 requests/s of 1000 + 200 tokens need ~90 H100s: too many for a fleet simulation.
    result = _size(_h100(), _traffic(2000.0))
    best = result.plans[0]
    assert best.replicas > FLEET_MAX_REPLICAS
    assert best.verified
    assert best.verification == "one-replica-thinned"
    assert best.simulation is not None
    assert best.simulation.ttft_p95_s <= 1.0
    assert best.simulation.tpot_p95_s <= 0.05
    # Fleet throughput is scaled back from the replica's share.
    assert best.simulation.throughput_requests_per_s == pytest.approx(2000.0, rel=0.05)
    assert not [r for r in result.rejected if r.reason == "verification-failed"]


def test_verification_work_does_not_grow_with_the_fleet() -> None:
    # Same per-replica load (the plan's replicas scale with the rate), same run.
    small = _size(_h100(), _traffic(2000.0))
    huge = _size(_h100(), _traffic(200_000.0))
    assert huge.plans[0].replicas > 50 * small.plans[0].replicas
    assert huge.plans[0].verified
    assert huge.simulated_requests <= 1.1 * small.simulated_requests


def test_a_large_disaggregated_plan_is_verified_on_a_sub_fleet() -> None:
    # 4096-token prompts at 300/s: tens of prefill and decode replicas. The sub-fleet keeps
    # the pools' ratio as nearly as 8 replicas allow, at the rate that loads each pool at least
    # as much as the fleet does; its throughput, scaled up, is the fleet's.
    result = _size(
        _h100(disaggregation=True, max_model_len=(8192,)),
        _traffic(300.0, prompt=4096, output=256),
        verify_top=2,
    )
    (pd,) = [p for p in result.plans if p.candidate.kind == "disaggregated"]
    assert pd.prefill_replicas is not None
    assert pd.decode_replicas is not None
    assert pd.prefill_replicas + pd.decode_replicas > FLEET_MAX_REPLICAS
    assert pd.verified
    assert pd.verification == "sub-fleet-thinned"
    assert pd.simulation is not None
    assert pd.simulation.throughput_requests_per_s == pytest.approx(300.0, rel=0.1)


def test_a_small_fleet_is_simulated_whole() -> None:
    result = _size(_h100(), _traffic(20.0))
    best = result.plans[0]
    assert best.replicas <= FLEET_MAX_REPLICAS
    assert best.verification == "fleet"
    assert best.verified


def test_an_inconclusive_run_keeps_the_plan_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    holds = make_check("ttft_s.p95", predicted=0.5, limit=1.0, direction="max")
    evaluation = SloEvaluation(
        feasible=False,
        checks=(holds,),
        binding="ttft_s.p95",
        goodput_requests_per_s=1.0,
        throughput_requests_per_s=1.0,
        failure_rate=0.0,
        attainment=None,
        stable=False,
        reason="unstable: window too short",
    )
    summary = SimpleNamespace(
        stable=False, stability_conclusive=False, stability_reason="the window is too short"
    )
    monkeypatch.setattr(
        verify_module,
        "_simulate",
        lambda ctx, plan, run, replication=0: (None, summary, evaluation, False),
    )
    result = _size(_h100(), _traffic(20.0))
    best = result.plans[0]
    assert not best.verified
    assert best.decided_by == "tier_a"
    assert best.verification == "fleet"
    assert "inconclusive" in best.notes[0]
    assert not [r for r in result.rejected if r.reason == "verification-failed"]
    # A conclusive instability still rejects the plan (after the extra replicas).
    monkeypatch.setattr(
        verify_module,
        "_simulate",
        lambda ctx, plan, run, replication=0: (
            None,
            SimpleNamespace(stable=False, stability_conclusive=True, stability_reason="grew"),
            evaluation,
            False,
        ),
    )
    again = _size(_h100(kv_cache_dtype=("auto",)), _traffic(20.0))
    failed = [r for r in again.rejected if r.reason == "verification-failed"]
    assert failed
    assert "window too short" in failed[0].detail


# ----------------------------------------------------------------------------- work bounds


def test_candidate_count_matches_the_enumeration_and_is_bounded() -> None:
    space = _h100(tensor_parallel=(1, 2, 4), kv_cache_dtype=("auto", "fp8"), disaggregation=True)
    assert space.candidate_count == len(list(enumerate_candidates(space))) == 3 * 2 + 3
    big = _h100(
        tensor_parallel=tuple(range(1, 10)),
        max_num_seqs=tuple(range(64, 64 * 9, 64)),
        max_num_batched_tokens=tuple(range(1024, 1024 * 9, 1024)),
    )
    assert big.candidate_count == 9 * 8 * 8 > MAX_CANDIDATES
    with pytest.raises(SizingTooLargeError, match="576 configurations, more than the 512"):
        _size(big, _traffic(20.0))


def test_a_run_over_the_work_budget_leaves_the_plan_to_tier_a() -> None:
    # 8000-token prompts in 256-token steps: 1 + 32 chunks each, so the shortest conclusive
    # run (1800 measured + 180 warm-up requests) is 1980 · 33 = 65 340 request-chunks, over
    # the 40 000 of one sizing.
    result = _size(
        _h100(max_num_batched_tokens=(256,), max_model_len=(16384,)),
        _traffic(5.0, prompt=8000, output=64),
        verify_top=2,
    )
    assert result.simulations == 0
    assert result.simulated_requests == 0
    best = result.plans[0]
    assert not best.verified
    assert best.notes[0].startswith("not simulated: a conclusive")


# ----------------------------------------------------------------------------- context


def test_a_context_shorter_than_the_longest_request_is_rejected() -> None:
    result = _size(_h100(max_model_len=(512, 1200)), _traffic(5.0), verify_top=0)
    (short,) = result.rejected
    assert short.reason == "context-too-short"
    assert short.candidate.max_model_len == 512
    assert "512 < the longest request, 1200 tokens" in short.detail
    # 1000 + 200 tokens fit exactly in 1200.
    assert [p.candidate.max_model_len for p in result.plans] == [1200]


# ----------------------------------------------------------------------------- zero load


def _idle_miss(hardware_id: str, *values: tuple[str, float, float]) -> Rejection:
    misses = tuple(
        Miss(name=name, predicted=value, limit=limit, direction="max")
        for name, value, limit in values
    )
    return Rejection(
        candidate=_candidate(hardware_id),
        reason="infeasible-at-zero-load",
        detail="",
        zero_load=misses,
    )


def _result(*rejected: Rejection, passed: int = 0) -> SizingResult:
    return SizingResult(
        plans=(),
        plans_found=0,
        rejected=rejected,
        candidates_evaluated=len(rejected),
        target_rate_per_s=1.0,
        headroom=0.85,
        simulations=0,
        elapsed_s=0.0,
        passed_zero_load=passed,
    )


def test_zero_load_infeasibility_names_the_best_value_of_each_target() -> None:
    l4 = _idle_miss("l4", ("ttft_s.p95", 0.2, 0.01), ("tpot_s.p95", 0.02, 0.05))
    h100 = _idle_miss("h100-sxm", ("ttft_s.p95", 0.05, 0.01), ("tpot_s.p95", 0.008, 0.05))
    (ttft,) = zero_load_infeasibility(_result(l4, h100))
    assert (ttft.name, ttft.best, ttft.candidate.hardware_id, ttft.alone) == (
        "ttft_s.p95",
        0.05,
        "h100-sxm",
        True,
    )
    # Each target met by some candidate, none meeting both: both named, with who comes closest.
    a = _idle_miss("a", ("ttft_s.p95", 0.03, 0.04), ("tpot_s.p95", 0.012, 0.01))
    b = _idle_miss("b", ("ttft_s.p95", 0.05, 0.04), ("tpot_s.p95", 0.008, 0.01))
    joint = {z.name: z for z in zero_load_infeasibility(_result(a, b))}
    assert joint["ttft_s.p95"].candidate.hardware_id == "a"
    assert joint["tpot_s.p95"].candidate.hardware_id == "b"
    assert not any(z.alone for z in joint.values())
    # Not an SLO problem when some candidate met every target idle (it ran into something else).
    assert zero_load_infeasibility(_result(l4, h100, passed=1)) == ()


def test_an_slo_no_gpu_meets_idle_is_found_in_a_search() -> None:
    tight = ServiceLevelObjective(
        targets=(LatencyTarget(metric="ttft", statistic="p95", limit_s=0.001),)
    )
    result = size(
        LLAMA_8B,
        model_name="m",
        space=SearchSpace(
            hardware=(GPUS["h100-sxm"], GPUS["a100-sxm-80gb"]),
            tensor_parallel=(1,),
            max_num_batched_tokens=(8192,),
            kv_cache_dtype=("auto",),
            max_model_len=(2048,),
        ),
        traffic=_traffic(5.0),
        objective=tight,
        prices={},
        verify_top=0,
    )
    (best,) = zero_load_infeasibility(result)
    # A 1000-token prefill of an 8B model is 2 · 8e9 · 1000 = 16 TFLOP: at least 16 ms at the
    # H100's 989 TFLOP/s dense BF16, more on the A100 (312 TFLOP/s), so the H100 is closest.
    assert best.candidate.hardware_id == "h100-sxm"
    assert best.best > 0.016
    assert best.alone


def test_trtllm_plans_with_prompts_over_the_budget_are_simulated_with_chunked_prefill() -> None:
    # TensorRT-LLM runs prompts whole by default; 10,000-token prompts exceed the 8192-token
    # budget, so its plan is verified with chunked prefill on (the engine would refuse them
    # otherwise) and meets a loose SLO at a light load instead of rejecting every request.
    loose = ServiceLevelObjective(
        targets=(
            LatencyTarget(metric="ttft", statistic="p95", limit_s=5.0),
            LatencyTarget(metric="tpot", statistic="p95", limit_s=0.2),
        )
    )
    space = _h100(engines=("trtllm",), max_model_len=(16384,))
    result = size(
        LLAMA_8B,
        model_name="m",
        space=space,
        traffic=_traffic(0.5, prompt=10_000, output=50),
        objective=loose,
        prices={"h100-sxm": 2.5},
        verify_top=1,
    )
    assert result.plans, [r.reason for r in result.rejected]
    best = result.plans[0]
    assert best.verified
    assert best.simulation is not None
    assert best.simulation.throughput_requests_per_s == pytest.approx(0.5, rel=0.2)
    assert CHUNKED_PREFILL_NOTE in best.notes


def test_trtllm_prompts_over_the_budget_are_verified_with_chunked_prefill() -> None:
    # 8500-token prompts exceed 8192 tokens (TensorRT-LLM's GUARANTEED_NO_EVICT never preempts,
    # so the prompt alone counts): the plan is verified with chunked prefill on, and says so.
    loose = ServiceLevelObjective(
        targets=(
            LatencyTarget(metric="ttft", statistic="p95", limit_s=5.0),
            LatencyTarget(metric="tpot", statistic="p95", limit_s=0.2),
        )
    )
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_h100(engines=("trtllm",), max_model_len=(16384,)),
        traffic=_traffic(0.2, prompt=8500, output=500),
        objective=loose,
        prices={"h100-sxm": 2.5},
        verify_top=1,
    )
    assert result.plans, [r.reason for r in result.rejected]
    assert result.plans[0].verified
    assert CHUNKED_PREFILL_NOTE in result.plans[0].notes


# ----------------------------------------------------------------------------- replications


def test_the_margin_interval_is_students_t_over_the_seeds() -> None:
    # Margins 0.1, 0.2, 0.3: mean 0.2, s = 0.1, s/√3 = 0.0577; t(0.975, 2) = 4.303 gives a
    # half-width of 0.248; P(μ > 0) = T₂(0.2/0.0577 = 3.46) = 0.963.
    mean, half, p_met = verify_module.margin_interval([0.1, 0.2, 0.3])
    assert mean == pytest.approx(0.2)
    assert half == pytest.approx(4.302652729911275 * 0.1 / math.sqrt(3))
    assert p_met == pytest.approx(0.9629, abs=1e-3)
    same_mean, same_half, same_p = verify_module.margin_interval([0.1, 0.1, 0.1])
    assert same_mean == pytest.approx(0.1)
    assert (same_half, same_p) == (0.0, 1.0)


def _margins_simulate(margins: list[float]):  # type: ignore[no-untyped-def]
    """A ``_simulate`` whose k-th seed misses or meets the TTFT p95 limit by ``margins[k]``."""
    stats = SimpleNamespace(p50=0.5, p95=0.5, p99=0.5)
    summary = SimpleNamespace(
        stable=True,
        stability_conclusive=True,
        stability_reason="ok",
        ttft_s=stats,
        tpot_s=stats,
        e2e_s=stats,
    )

    def run(ctx, plan, run, replication=0):  # type: ignore[no-untyped-def]
        margin = margins[min(replication, len(margins) - 1)]
        check = make_check("ttft_s.p95", predicted=1.0 - margin, limit=1.0, direction="max")
        evaluation = SloEvaluation(
            feasible=check.holds,
            checks=(check,),
            binding="ttft_s.p95",
            goodput_requests_per_s=1.0,
            throughput_requests_per_s=1.0,
            failure_rate=0.0,
            attainment=None,
            stable=True,
            reason="met" if check.holds else "missed",
        )
        return None, summary, evaluation, False

    return run


def test_a_verdict_that_depends_on_the_seed_is_marginal_with_its_probability(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seeds alternately meet and miss by a few per cent: the interval straddles 0 at every
    # count up to MAX_REPLICATIONS, so the plan is not verified on any one seed's say.
    monkeypatch.setattr(
        verify_module, "_simulate", _margins_simulate([0.05, -0.04, 0.03, -0.05, 0.04, -0.03])
    )
    result = _size(_h100(), _traffic(20.0))
    notes = [n for p in result.plans for n in p.notes] + [r.detail for r in result.rejected]
    marginal = [n for n in notes if "marginal" in n]
    assert marginal
    assert f"{verify_module.MAX_REPLICATIONS} seeds" in marginal[0]
    assert "P(SLO met)" in marginal[0]
    assert not any(p.verified for p in result.plans)


def test_a_clear_margin_on_every_seed_verifies_with_its_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verify_module, "_simulate", _margins_simulate([0.30, 0.32, 0.31]))
    best = _size(_h100(), _traffic(20.0)).plans[0]
    assert best.verified
    assert any(n.startswith("verified: 3 seeds") and n.endswith("met") for n in best.notes)


def test_the_sized_fleet_does_not_depend_on_the_verification_seed() -> None:
    # The README sizing load, per replica: every traffic seed verifies on its own seeds and
    # must reach the same plan, each verdict with its interval stated.
    plans = [
        _size(_h100(), dataclasses.replace(_traffic(50.0), seed=seed)).plans[0]
        for seed in (0, 1, 2)
    ]
    assert len({(p.replicas, p.candidate.label) for p in plans}) == 1
    for plan in plans:
        assert plan.verified
        assert any("seeds: binding relative margin" in n for n in plan.notes)
