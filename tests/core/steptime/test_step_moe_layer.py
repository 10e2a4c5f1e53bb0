"""The grouped-GEMM MoE layer model against hand arithmetic and an exact binomial sum."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servesize.core.steptime import (
    DeviceRates,
    MoeKernelConstants,
    MoeLayerShape,
    expected_padded_rows,
    moe_layer_time_s,
)

# 1 PFLOP/s bf16 at 100 %, 1 TB/s at 100 %: times are FLOPs / 1e15 and bytes / 1e12.
RATES = DeviceRates(
    peak_flop_per_s={"bf16": 1e15},
    memory_bandwidth_bytes_per_s=1e12,
    gemm_efficiency={"bf16": 1.0},
    bandwidth_efficiency=1.0,
)
TOY = MoeKernelConstants(
    floor_s=10e-6,
    gemm_efficiency={"bf16": 0.5},
    activation_hidden_factor=1.0,
    activation_intermediate_factor=1.0,
    tile_rows=4,
)
SHAPE = MoeLayerShape(
    hidden_size=1000,
    expert_intermediate_size=500,
    num_experts=4,
    experts_per_token=2,
    expert_parallel_size=1,
    expert_tensor_parallel_size=1,
    gated=True,
    weight_bytes_per_element=2.0,
    compute_dtype="bf16",
)


def _exact_padded_rows(tokens: int, p: float, tile: int) -> float:
    """``tile · Σ_x P(X = x)·⌈x/tile⌉`` with ``X ~ Binomial(tokens, p)``, term by term."""
    total = 0.0
    for x in range(tokens + 1):
        total += math.comb(tokens, x) * p**x * (1 - p) ** (tokens - x) * math.ceil(x / tile)
    return tile * total


@pytest.mark.parametrize("tokens", [1, 2, 7, 40, 300, 1000])
@pytest.mark.parametrize("tile", [16, 64])
def test_padded_rows_equal_the_exact_binomial_expectation(tokens: int, tile: int) -> None:
    got = expected_padded_rows([tokens], num_experts=128, experts_per_token=8, tile_rows=tile)
    assert got[0] == pytest.approx(_exact_padded_rows(tokens, 8 / 128, tile), rel=1e-9)


def test_one_token_pads_a_whole_tile_for_the_expert_it_reaches() -> None:
    # One token reaches a given expert with probability k/E = 1/16; it then fills one 64-row tile.
    got = expected_padded_rows([1], num_experts=128, experts_per_token=8, tile_rows=64)
    assert got[0] == pytest.approx(64 / 16)


def test_balanced_rows_round_up_to_the_tile() -> None:
    got = expected_padded_rows(
        [2, 8, 9, 1], num_experts=4, experts_per_token=2, tile_rows=4, balanced=True
    )
    # 2 tokens · 2 / 4 experts = 1 row each -> one tile; 4 rows -> one tile; 4.5 -> two tiles;
    # 1 token: 2 of the 4 experts get one row each (half a tile per expert on average).
    assert got.tolist() == [4.0, 4.0, 8.0, 2.0]


def test_a_memory_bound_layer_is_floor_plus_weights_plus_activations() -> None:
    t, flops, nbytes, _, _ = moe_layer_time_s(SHAPE, [2], rates=RATES, constants=TOY, balanced=True)
    # Every expert gets one row (one 4-row tile) and is touched. gate_up: 4·(2·1000·500)·2 B =
    # 8 MB -> 8 µs against 2·16·1e6 FLOP at 0.5 PFLOP/s = 0.064 µs; down: 4 µs. Activations:
    # 4 routed rows · (1000 + 500) · 2 B = 12 kB -> 0.012 µs. Floor 10 µs.
    assert t[0] == pytest.approx(10e-6 + 8e-6 + 4e-6 + 0.012e-6)
    assert flops[0] == pytest.approx(2 * 4 * 1.5e6)  # unpadded routed rows
    assert nbytes[0] == pytest.approx(12e6 + 12e3)


def test_a_compute_bound_layer_pays_the_grouped_gemm_efficiency() -> None:
    t, *_ = moe_layer_time_s(SHAPE, [4000], rates=RATES, constants=TOY, balanced=True)
    # 2000 rows per expert (a whole number of tiles), 8000 rows: gate_up 2·8000·1e6 FLOP at
    # 0.5 PFLOP/s = 32 µs (> 8 µs of weights), down 16 µs, activations 8000·1500·2 B = 24 µs.
    assert t[0] == pytest.approx(10e-6 + 32e-6 + 16e-6 + 24e-6)


def test_expert_parallelism_splits_rows_and_weights() -> None:
    shape = MoeLayerShape(
        hidden_size=1000,
        expert_intermediate_size=500,
        num_experts=4,
        experts_per_token=2,
        expert_parallel_size=2,
        expert_tensor_parallel_size=1,
        gated=True,
        weight_bytes_per_element=2.0,
        compute_dtype="bf16",
    )
    t, *_ = moe_layer_time_s(shape, [4000], rates=RATES, constants=TOY, balanced=True)
    # Half the experts and half the rows per GPU: 16 + 8 + 12 µs plus the floor.
    assert t[0] == pytest.approx(10e-6 + 16e-6 + 8e-6 + 12e-6)


def test_no_tokens_cost_only_what_the_caller_masks() -> None:
    _, flops, _, _, _ = moe_layer_time_s(SHAPE, [0], rates=RATES, constants=TOY)
    assert flops[0] == 0.0


def test_time_grows_with_tokens() -> None:
    tokens = np.array([1, 8, 64, 512, 4096, 32768], dtype=np.float64)
    t, *_ = moe_layer_time_s(SHAPE, tokens, rates=RATES, constants=TOY)
    assert np.all(np.diff(t) > 0)
