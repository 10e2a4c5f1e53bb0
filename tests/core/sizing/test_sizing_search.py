"""The sizing search end to end on small spaces: choice of GPU, pruning reasons, verification,
engine arguments."""

from __future__ import annotations

import pytest

from servesize.core.memory import Deployment, plan_memory
from servesize.core.sizing import SearchSpace, SizingTraffic, size
from servesize.core.slo import LatencyTarget, ServiceLevelObjective
from servesize.core.traffic import FixedLength
from tests.core.sizing.fixtures import GPUS, LLAMA_8B, LLAMA_70B

TRAFFIC = SizingTraffic(
    rate_per_s=8.0, input_tokens=FixedLength(512), output_tokens=FixedLength(128)
)
LOOSE = ServiceLevelObjective(
    targets=(
        LatencyTarget(metric="ttft", statistic="p95", limit_s=2.0),
        LatencyTarget(metric="tpot", statistic="p95", limit_s=0.1),
    )
)
# vLLM flags, from vllm-project/vllm:vllm/engine/arg_utils.py (EngineArgs.add_cli_args).
VLLM_FLAGS = {
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--data-parallel-size",
    "--enable-expert-parallel",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--gpu-memory-utilization",
    "--kv-cache-dtype",
    "--max-model-len",
    "--kv-transfer-config",
    "--port",
    "--no-enable-expert-parallel",
    "--enable-chunked-prefill",
    "--enable-prefix-caching",
    "--block-size",
    "--kv-cache-memory-bytes",
}


def _space(*ids: str, **kw: object) -> SearchSpace:
    defaults: dict[str, object] = {
        "tensor_parallel": (1,),
        "max_num_batched_tokens": (8192,),
        "kv_cache_dtype": ("auto",),
        "max_model_len": (2048,),
    }
    return SearchSpace(hardware=tuple(GPUS[i] for i in ids), **(defaults | kw))  # type: ignore[arg-type]


def test_picks_the_cheaper_gpu_when_both_meet_the_slo() -> None:
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space("h100-sxm", "a100-sxm-80gb"),
        traffic=TRAFFIC,
        objective=LOOSE,
        prices={"h100-sxm": 10.0, "a100-sxm-80gb": 1.0},
        verify_top=1,
    )
    best = result.plans[0]
    assert best.candidate.hardware_id == "a100-sxm-80gb"
    assert {p.candidate.hardware_id for p in result.plans} == {"h100-sxm", "a100-sxm-80gb"}
    # cost = replicas × GPUs × price; per million output tokens at 8 × 128 tokens/s.
    assert best.cost_per_hour == pytest.approx(best.replicas * 1 * 1.0)
    assert best.cost_per_million_output_tokens == pytest.approx(
        best.cost_per_hour / (8 * 128 * 3600) * 1e6  # type: ignore[operator]
    )
    assert best.headroom == 0.85


def test_picks_the_faster_gpu_when_only_it_meets_the_slo() -> None:
    # p95 TPOT of 9 ms: an A100's 8B decode step (16 GB of weights at ~2 TB/s: > 8 ms, plus
    # overheads) misses it even alone, an H100's (3.35 TB/s: ~5 ms) meets it.
    tight = ServiceLevelObjective(
        targets=(LatencyTarget(metric="tpot", statistic="p95", limit_s=0.009),)
    )
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space("h100-sxm", "a100-sxm-80gb"),
        traffic=TRAFFIC,
        objective=tight,
        prices={"h100-sxm": 10.0, "a100-sxm-80gb": 1.0},
        verify_top=0,
    )
    assert result.plans[0].candidate.hardware_id == "h100-sxm"
    (a100,) = [r for r in result.rejected if r.candidate.hardware_id == "a100-sxm-80gb"]
    assert a100.reason == "infeasible-at-zero-load"
    assert "tpot_s.p95" in a100.detail
    assert a100.miss is not None
    assert a100.miss > 0


def test_chosen_plan_meets_the_slo_in_its_own_simulation() -> None:
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space("h100-sxm"),
        traffic=SizingTraffic(
            rate_per_s=30.0, input_tokens=FixedLength(512), output_tokens=FixedLength(128)
        ),
        objective=LOOSE,
        prices={"h100-sxm": 2.5},
        verify_top=1,
    )
    best = result.plans[0]
    assert best.verified
    assert best.decided_by == "simulation"
    assert best.simulation is not None
    assert best.simulation.ttft_p95_s <= 2.0
    assert best.simulation.tpot_p95_s <= 0.1
    assert result.simulations >= 1


def test_rejects_a_70b_bf16_model_on_one_24_gb_gpu_with_the_ledger_reason() -> None:
    result = size(
        LLAMA_70B,
        model_name="m",
        space=_space("l4"),
        traffic=TRAFFIC,
        objective=LOOSE,
        prices={},
        verify_top=0,
    )
    assert result.plans == ()
    (rejected,) = result.rejected
    assert rejected.reason == "does-not-fit"
    assert rejected.detail  # the memory ledger's own reason


def test_rejects_candidates_over_the_gpu_limit() -> None:
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space("h100-sxm", tensor_parallel=(1, 2), max_gpus=1),
        traffic=SizingTraffic(
            rate_per_s=200.0, input_tokens=FixedLength(512), output_tokens=FixedLength(128)
        ),
        objective=LOOSE,
        prices={},
        verify_top=0,
    )
    reasons = {r.candidate.tensor_parallel_size: r for r in result.rejected}
    assert reasons[2].reason == "over-gpu-limit"  # 2 GPUs per replica > 1
    assert reasons[1].reason == "over-gpu-limit"  # 200/s needs several replicas
    assert "replicas" in reasons[1].detail


def test_unpriced_plans_rank_last_with_a_warning() -> None:
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space("h100-sxm", "a100-sxm-80gb"),
        traffic=TRAFFIC,
        objective=LOOSE,
        prices={"h100-sxm": 99.0},
        verify_top=0,
    )
    assert result.plans[0].candidate.hardware_id == "h100-sxm"
    assert result.plans[-1].cost_per_hour is None
    assert any("no price" in w for w in result.warnings)


def test_disaggregated_plans_are_ranked_with_the_aggregated_ones() -> None:
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space("h100-sxm", disaggregation=True),
        traffic=TRAFFIC,
        objective=LOOSE,
        prices={"h100-sxm": 2.5},
        verify_top=0,
    )
    kinds = {p.candidate.kind for p in result.plans}
    assert kinds == {"aggregated", "disaggregated"}
    (pd,) = [p for p in result.plans if p.candidate.kind == "disaggregated"]
    assert pd.prefill_replicas is not None
    assert pd.decode_replicas is not None
    assert pd.replicas == pd.prefill_replicas + pd.decode_replicas
    # 512 tokens × 128 KiB/token (bf16, 8 KV heads × 128 × 2 × 32 layers) over 450 GB/s + 1 ms.
    assert pd.kv_transfer_s == pytest.approx(1e-3 + 512 * 131072 / 450e9, rel=1e-9)


def test_engine_args_use_known_flags_and_the_plan_fits() -> None:
    result = size(
        LLAMA_8B,
        model_name="meta-llama/Llama-3.1-8B",
        space=_space("h100-sxm", tensor_parallel=(2,), kv_cache_dtype=("fp8",)),
        traffic=TRAFFIC,
        objective=LOOSE,
        prices={},
        verify_top=0,
    )
    launch = result.plans[0].launch
    assert launch is not None
    assert launch.engine == "vllm"
    (server,) = launch.commands
    args = list(server.argv)
    flags = {a for a in args[3:] if a.startswith("--")}
    assert flags <= VLLM_FLAGS, flags - VLLM_FLAGS
    value = {args[i]: args[i + 1] for i in range(3, len(args) - 1) if args[i].startswith("--")}
    assert value["--tensor-parallel-size"] == "2"
    # The arguments, read back as a deployment, fit by the memory ledger.
    replay = plan_memory(
        LLAMA_8B,
        GPUS["h100-sxm"],
        Deployment(
            tensor_parallel_size=int(value["--tensor-parallel-size"]),
            max_num_seqs=int(value["--max-num-seqs"]),
            max_num_batched_tokens=int(value["--max-num-batched-tokens"]),
            gpu_memory_utilization=float(value["--gpu-memory-utilization"]),
            kv_cache_dtype=value["--kv-cache-dtype"],
            max_model_len=int(value["--max-model-len"]),
        ),
    )
    assert replay.fits


def test_progress_counts_every_candidate_screened() -> None:
    # 2 GPUs × TP (1, 2) × budgets (2048, 8192) = 8 aggregated candidates, plus one
    # disaggregated pair per layout (2 GPUs × 2 TPs) = 12; rejected or not, every candidate is
    # reported exactly once, in order, against the same total.
    calls: list[tuple[int, int]] = []
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space(
            "l4",
            "h100-sxm",
            tensor_parallel=(1, 2),
            max_num_batched_tokens=(2048, 8192),
            disaggregation=True,
        ),
        traffic=TRAFFIC,
        objective=LOOSE,
        prices={},
        verify_top=0,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(k, 12) for k in range(1, 13)]
    assert result.candidates_evaluated == 12
