"""Offline max throughput against TensorRT-LLM's published H100 rows (validation, not fitted).

Figures reached (``python -m bench.accuracy --offline``, measured H100 tables and the fitted
TensorRT-LLM constants both tiers use), absolute percentage error of the output throughput:

| rows | MAPE | median | p90 | mean signed |
|---|---|---|---|---|
| dense (30) | 6.3 | 5.0 | 13.1 | +2.4 |
| MoE (22) | 39.7 | 35.6 | 68.4 | +39.7 |

(74.0 / 69.9 / 100.5 / +74.0 for MoE before TensorRT-LLM's measured MoE layer was priced with the
power-law routing rows of ``moe.csv``, docs/modeling.md §2.12.) MoE throughput is still
over-predicted, far above the 12 % target (§5.6, §5.8). The guard checks that the MoE error stays
at the figure reached (39.7 % MAPE plus 1.5 points) and its mean signed error below +42 %, so a
change that makes the MoE step cheaper again is seen, and the dense target of 8 %.
"""

from __future__ import annotations

from functools import cache

import pytest

from bench.accuracy import architectures
from servesize.calibration import (
    OFFLINE_CSV,
    OfflinePrediction,
    load_measured_profile,
    load_offline_rows,
    predict_offline,
    reference_gpu,
    summarise_offline,
)
from servesize.calibration.offline import (
    OFFLINE_MODELS,
    offline_deployment,
    trtllm_bench_settings,
)


@cache
def predictions() -> tuple[OfflinePrediction, ...]:
    rows = load_offline_rows()
    return tuple(
        predict_offline(
            rows, architectures(), reference_gpu("H100 SXM"), measured=load_measured_profile()
        )
    )


def test_the_published_table_is_read_whole() -> None:
    rows = load_offline_rows(OFFLINE_CSV)
    assert len(rows) == 112
    assert sum(r.gpu == "H100 SXM" for r in rows) == 52
    assert sum(r.gpu == "H200 SXM" for r in rows) == 60
    first = rows[0]
    assert (first.model, first.num_gpus, first.input_tokens, first.output_tokens) == (
        "Llama 3.1 405B",
        8,
        128,
        128,
    )
    assert first.num_requests == 30000
    assert first.output_throughput_tokens_per_s == 3627.0
    assert {r.model for r in rows} == set(OFFLINE_MODELS)


def test_moe_rows_run_attention_data_parallel_with_experts_over_every_gpu() -> None:
    archs = architectures()
    rows = {r.model: r for r in load_offline_rows() if r.gpu == "H100 SXM"}
    moe = offline_deployment(rows["Qwen3-235B-A22B"], archs["Qwen/Qwen3-235B-A22B"])
    assert (moe.tensor_parallel_size, moe.data_parallel_size) == (1, 8)
    assert moe.enable_expert_parallel
    tp = offline_deployment(
        rows["Qwen3-235B-A22B"], archs["Qwen/Qwen3-235B-A22B"], moe_layout="tensor_parallel"
    )
    assert (tp.tensor_parallel_size, tp.data_parallel_size) == (8, 1)
    assert tp.enable_expert_parallel
    dense = offline_deployment(rows["Llama 3.3 70B"], archs["meta-llama/Llama-3.3-70B-Instruct"])
    assert (dense.tensor_parallel_size, dense.data_parallel_size) == (2, 1)
    for d in (moe, dense):
        assert (d.engine, d.kv_cache_dtype, d.quantization) == ("trtllm", "fp8", "fp8")
        assert d.gpu_memory_utilization == 0.95


def test_batch_limits_follow_trtllm_bench_heuristic_worked_by_hand() -> None:
    """``calc_engine_setting``/``finetune_setting`` by hand, 80·10^9-byte GPUs, FP8 KV:

    Qwen3-235B TP8, 1000/1000: 2·94·max(8, 4)·128 = 192,512 B/token; 0.95·(640e9 − 235.09e9)
    / (192,512·2000) = 999.1 requests -> batch 128·ceil(999.1/128) = 1024; tokens
    999.1·2 = 1998 -> max(2048, 256·8) = 2048 >= ISL + batch = 2024.
    Llama-3.1-8B TP1, 128/128: 2·32·8·128 = 65,536 B/token; 0.95·(80e9 − 8.03e9)/(65,536·256)
    = 4075 -> 256·16 = 4096; tokens 8150 -> 512·16 = 8192.
    """
    archs = architectures()
    rows = {
        (r.model, r.input_tokens, r.output_tokens): r
        for r in load_offline_rows()
        if r.gpu == "H100 SXM"
    }
    qwen = rows[("Qwen3-235B-A22B", 1000, 1000)]
    llama = rows[("Llama 3.1 8B", 128, 128)]
    memory = 80 * 10**9
    assert trtllm_bench_settings(qwen, archs["Qwen/Qwen3-235B-A22B"], memory) == (1024, 2048)
    assert trtllm_bench_settings(llama, archs["meta-llama/Llama-3.1-8B"], memory) == (4096, 8192)
    d = offline_deployment(llama, archs["meta-llama/Llama-3.1-8B"], device_memory_bytes=memory)
    assert (d.max_num_seqs, d.max_num_batched_tokens) == (4096, 8192)


def test_every_row_is_predicted() -> None:
    assert len(predictions()) == 52
    assert sum(p.moe for p in predictions()) == 22


def test_dense_rows_meet_the_target_and_moe_rows_stay_at_the_reached_figure() -> None:
    dense = summarise_offline([p for p in predictions() if not p.moe])
    moe = summarise_offline([p for p in predictions() if p.moe])
    assert dense.mape <= 8.0
    assert moe.mape <= 39.7 + 1.5
    assert moe.mean_signed <= 42.0


def test_error_sign_and_summary_arithmetic() -> None:
    p = predictions()[0]
    measured = p.row.output_throughput_tokens_per_s
    assert p.error_percent == pytest.approx(100 * (p.predicted_tokens_per_s - measured) / measured)
    s = summarise_offline(list(predictions()[:2]))
    errors = sorted(abs(x.error_percent) for x in predictions()[:2])
    assert s.mape == pytest.approx(sum(errors) / 2)
    assert s.median == pytest.approx(sum(errors) / 2)
