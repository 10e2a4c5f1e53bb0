"""MoE layer pricing at serving time: touched experts, the measured layer at a known number of
tokens per expert and the routing each engine is priced with (docs/modeling.md §2.12).

Every expected number is worked out by hand or read from a row of
``../shared/data/h100/moe.csv`` (TensorRT-LLM 1.3.0rc20 ``moe_torch_flow_cutlass``, H100 SXM).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from servesize.calibration import (
    H100_DATA_DIRECTORY,
    datasheet_rates,
    load_moe_tables,
    reference_gpu,
)
from servesize.core.steptime import MoeTable, expected_experts_touched
from servesize.core.steptime.experts import ROUTING_DISTRIBUTION, moe_cost, moe_table_for
from servesize.core.steptime.operators import MoeOp

QWEN3_30B_EP8_FP8 = MoeOp(
    layers=1,
    num_experts=128,
    experts_per_token=8,
    expert_parallel_size=8,
    expert_tensor_parallel_size=1,
    hidden_size=2048,
    expert_intermediate_size=768,
    gated=True,
    weight_bytes_per_element=1.0,
    compute_dtype="fp8",
    weight_dtype="fp8",
)


@cache
def tables() -> tuple[MoeTable, ...]:
    return load_moe_tables(H100_DATA_DIRECTORY / "moe.csv")


def test_distinct_experts_touched_by_hand() -> None:
    # E = 128, k = 8: one token misses an expert with probability 15/16.
    # T = 2: 128·(1 − 225/256) = 15.5; T = 3: 128·(1 − 3375/4096) = 22.53125.
    touched = expected_experts_touched([2, 3], num_experts=128, experts_per_token=8)
    assert touched.tolist() == pytest.approx([15.5, 22.53125], rel=1e-12)
    # E = 8, k = 2, T = 4: 8·(1 − (3/4)^4) = 8·175/256 = 5.46875.
    assert expected_experts_touched([4], num_experts=8, experts_per_token=2)[0] == pytest.approx(
        5.46875, rel=1e-12
    )


def test_trtllm_prices_the_skewed_routing_and_vllm_the_balanced_one() -> None:
    assert ROUTING_DISTRIBUTION == {"trtllm": "power_law_1.01"}
    for engine, expected in (("trtllm", "power_law_1.01"), ("vllm", "balanced")):
        lookup = moe_table_for(QWEN3_30B_EP8_FP8, tables(), engine=engine)
        assert lookup is not None
        assert lookup.exact
        assert lookup.table.distribution == expected


@pytest.mark.parametrize(
    ("distribution", "latency_ms"),
    # moe.csv rows: fp8, 1024 tokens, h 2048, I 768, top-8 of 128, TP 1, EP 8
    # (64 routed rows per expert on average).
    [("power_law_1.01", 0.09180160164833069), ("balanced", 0.07257066667079926)],
)
def test_a_measured_layer_at_64_tokens_per_expert_is_its_row(
    distribution: str, latency_ms: float
) -> None:
    rates = datasheet_rates(reference_gpu("H100 SXM"))
    lookup = moe_table_for(QWEN3_30B_EP8_FP8, tables(), prefer=distribution)
    assert lookup is not None
    assert lookup.table.distribution == distribution
    tokens = np.array([1024.0])
    cost = moe_cost(QWEN3_30B_EP8_FP8, tokens, activation_bytes=2.0, rates=rates, lookup=lookup)
    assert cost.time_s[0] == pytest.approx(latency_ms * 1e-3, rel=1e-9)


def test_the_skewed_routing_is_dearer_at_many_tokens_and_cheaper_at_few() -> None:
    # moe.csv, bf16, h 2048, I 768, top-8 of 128, TP 1, EP 1 at 16 tokens (one routed row per
    # expert): power law 0.230 ms against balanced 0.420 ms; fp8 EP 8 at 16384 tokens:
    # 0.536 ms against 0.362 ms.
    rates = datasheet_rates(reference_gpu("H100 SXM"))
    ep1_bf16 = replace(
        QWEN3_30B_EP8_FP8, expert_parallel_size=1, weight_bytes_per_element=2.0,
        compute_dtype="bf16", weight_dtype="bf16",
    )  # fmt: skip
    for op, tokens, ratio in (
        (ep1_bf16, 16.0, 0.230 / 0.420),
        (QWEN3_30B_EP8_FP8, 16384.0, 0.536 / 0.362),
    ):
        skewed, balanced = (
            moe_cost(op, np.array([tokens]), activation_bytes=2.0, rates=rates,
                     lookup=moe_table_for(op, tables(), prefer=d)).time_s[0]
            for d in ("power_law_1.01", "balanced")
        )  # fmt: skip
        assert skewed / balanced == pytest.approx(ratio, rel=5e-3)
