"""FLOPs per token: matmul term by hand, attention terms and prefill sums checked by brute force."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import flops_profile, parse_architecture

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _config(filename: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return data


def test_llama_3_1_8b_decode_flops() -> None:
    # matmul parameters: total 8,030,261,248 - input embedding 525,336,576 - norms
    #   (32*2*4096 + 4096 = 266,240) = 7,504,658,432 -> 2x = 15,009,316,864 FLOPs per token
    # attention per attended token: 32 layers * 4 * 32 heads * 128 = 524,288 FLOPs
    profile = flops_profile(parse_architecture(_config("meta-llama--Llama-3.1-8B.json"), name="x"))
    assert profile.matmul_flops_per_token == 15_009_316_864
    assert profile.decode_flops_per_token(1) == 15_009_316_864 + 524_288
    assert profile.decode_flops_per_token(8192) == 15_009_316_864 + 524_288 * 8192


def test_tied_head_still_costs_a_matmul() -> None:
    # Llama-3.2-1B ties its head, yet logits need 2 * V * h = 2 * 128256 * 2048 FLOPs per token.
    arch = parse_architecture(_config("meta-llama--Llama-3.2-1B-Instruct.json"), name="x")
    untied = parse_architecture(
        {**_config("meta-llama--Llama-3.2-1B-Instruct.json"), "tie_word_embeddings": False},
        name="y",
    )
    assert (
        flops_profile(arch).matmul_flops_per_token == flops_profile(untied).matmul_flops_per_token
    )


@pytest.mark.parametrize("filename", ["google--gemma-2-9b.json", "meta-llama--Llama-3.1-8B.json"])
@pytest.mark.parametrize(("prompt", "cached"), [(1, 0), (5000, 0), (3000, 2000), (10, 9000)])
def test_prefill_is_the_sum_of_per_token_costs(filename: str, prompt: int, cached: int) -> None:
    profile = flops_profile(parse_architecture(_config(filename), name=filename))
    brute = sum(profile.decode_flops_per_token(c) for c in range(cached + 1, cached + prompt + 1))
    assert profile.prefill_flops(prompt, cached) == brute


def test_sliding_layers_stop_growing_past_the_window() -> None:
    # gemma-2-9b: 21 sliding layers (window 4096) and 21 full layers, 16 heads of 256:
    # each layer costs 4 * 16 * 256 = 16,384 FLOPs per attended token.
    profile = flops_profile(parse_architecture(_config("google--gemma-2-9b.json"), name="g"))
    step = profile.decode_flops_per_token(10_001) - profile.decode_flops_per_token(10_000)
    assert step == 21 * 16_384
    below = profile.decode_flops_per_token(101) - profile.decode_flops_per_token(100)
    assert below == 42 * 16_384


def test_linear_attention_cost_is_constant_in_context() -> None:
    # Qwen3-Next: 36 delta-net layers add 6 * 32 * 128 * 128 = 3,145,728 FLOPs each per token;
    # only the 12 full layers (4 * 16 * 256 = 16,384 per attended token) grow with context.
    arch = parse_architecture(_config("Qwen--Qwen3-Next-80B-A3B-Thinking.json"), name="q")
    profile = flops_profile(arch)
    assert profile.recurrent_flops_per_token == 36 * 3_145_728
    growth = profile.decode_flops_per_token(2001) - profile.decode_flops_per_token(2000)
    assert growth == 12 * 16_384


def test_rejects_empty_context() -> None:
    profile = flops_profile(parse_architecture(_config("meta-llama--Llama-3.1-8B.json"), name="x"))
    with pytest.raises(ValueError, match="context_tokens"):
        profile.decode_flops_per_token(0)
