"""The sizing explanation states the figures of the result, worked by hand."""

from __future__ import annotations

from dataclasses import replace

from servesize.core.sizing.explanation import explain
from servesize.core.sizing.result import Plan, Rejection, SizingResult
from servesize.core.sizing.space import Candidate


def _candidate(hardware_id: str, tp: int = 1) -> Candidate:
    return Candidate(
        kind="aggregated",
        hardware_id=hardware_id,
        engine="vllm",
        tensor_parallel_size=tp,
        pipeline_parallel_size=1,
        data_parallel_size=1,
        enable_expert_parallel=False,
        max_num_seqs=None,
        max_num_batched_tokens=None,
        gpu_memory_utilization=None,
        kv_cache_dtype="auto",
        max_model_len=4096,
    )


def _plan(hardware_id: str, replicas: int, price: float | None) -> Plan:
    return Plan(
        candidate=_candidate(hardware_id),
        memory=None,  # type: ignore[arg-type]  # not read by the explanation
        replicas=replicas,
        prefill_replicas=None,
        decode_replicas=None,
        max_rate_per_replica_per_s=10.0,
        decode_max_rate_per_replica_per_s=None,
        utilization=0.5,
        headroom=0.85,
        binding="ttft_s.p95",
        kv_transfer_s=None,
        price_per_gpu_hour=price,
        verified=True,
    )


def _result(plans: tuple[Plan, ...], rejected: tuple[Rejection, ...]) -> SizingResult:
    return SizingResult(
        plans=plans,
        plans_found=len(plans),
        rejected=rejected,
        candidates_evaluated=len(plans) + len(rejected),
        simulations=0,
        elapsed_s=0.0,
        target_rate_per_s=20.0,
        headroom=0.85,
        warnings=(),
    )


def test_the_winner_and_what_each_other_gpu_costs_more() -> None:
    cheap = _plan("l40s", 4, 0.9)  # 4 GPUs × $0.90 = $3.60/h
    same_gpu = replace(cheap, replicas=5)  # not listed: same hardware as the winner
    h100 = _plan("h100-sxm", 2, 2.5)  # $5.00/h: $1.40 (39 %) more
    text = explain(_result((cheap, same_gpu, h100), ()))
    assert text.startswith("Best: l40s ")
    assert "4 GPUs, $3.60/h" in text
    assert "verified by simulation" in text
    assert "binding constraint ttft_s.p95" in text
    assert "h100-sxm vllm TP1 PP1 DP1" in text
    assert "costs $1.40/h more (39%)" in text
    assert "× 5" not in text


def test_no_plan_names_every_obstacle_and_the_nearest_miss() -> None:
    rejected = (
        Rejection(
            candidate=_candidate("l4"),
            reason="infeasible-at-zero-load",
            detail="ttft_s.p95 0.2 > limit 0.01",
            miss=19.0,
        ),
        Rejection(
            candidate=_candidate("h100-sxm"),
            reason="infeasible-at-zero-load",
            detail="ttft_s.p95 0.05 > limit 0.01",
            miss=4.0,
        ),
    )
    text = explain(_result((), rejected))
    assert text.startswith("No deployment meets the SLO at 20 requests/s: 2 miss the SLO even")
    assert "Nearest miss: h100-sxm" in text
    assert "no number of replicas can meet it" in text
